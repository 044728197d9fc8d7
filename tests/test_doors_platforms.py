"""The door matrix, part three: Gradescope, the Classroom workflow and the nbgrader regrade, on
the sample of the slow doors (tests/door_matrix.py)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from door_matrix import (FILES, PUBLIC, PY, ROOT, SAMPLE, baseline, batched, public,  # noqa: F401
                         run, verdict)
from handed_in import handed_in
from grader.authoring import notebook_build
from grader.instructor import nbregrade


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    proc = run([PY, "-m", "grader.instructor.gradescope", "build", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    return out


# Gradescope's autograder grades each file in a run of its own (a cold spare worker, the
# hardening): full marks, nothing, another correct style (einsum) and a named mistake in two
# more pieces (attend, the module); test_doors.py's `grade` takes the rest of the sample cold
# (split_heads, the quiz).
GRADESCOPE_SAMPLE = ["reference", "stub", "correct-einsum", "wrong-mask_missing",
                     "wrong-no_out_proj"]
# The Classroom workflow grades attention.py and the released attention.ipynb (the untouched
# stub notebook: nothing, graded in every run) and keeps the better; then a command-grader step
# per public check.  Full marks (every step all its points) and a mistake (some steps none).
CLASSROOM_SAMPLE = ["reference", "wrong-split_no_transpose"]


@pytest.mark.parametrize("name", GRADESCOPE_SAMPLE)
def test_gradescope_gives_grades_verdict(name, baseline, autograder_zip, tmp_path):
    from test_gradescope import fake_autograder, run_autograder

    root = fake_autograder(tmp_path, autograder_zip, {"attention.py": FILES[name]})
    proc, results = run_autograder(root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (root / "source" / "solutions").exists(), "the hardening ran"
    got = {t["name"].split(":")[0]: (t["status"], round(float(t["score"]), 4))
           for t in results["tests"]}
    # Gradescope knows two statuses: a check passes there when it passed here.
    expected = {c: ("passed" if s == "passed" else "failed", p)
                for c, (s, p) in baseline[name].items()}
    assert got == expected
    assert results["score"] == pytest.approx(sum(p for _, p in baseline[name].values()))
    assert verdict(results["extra_data"]) == baseline[name]


@pytest.fixture(scope="module")
def classroom_workflow():
    with open(ROOT / "release" / ".github" / "workflows" / "classroom.yml", encoding="utf-8") as f:
        steps = yaml.safe_load(f)["jobs"]["public-checks"]["steps"]
    grading = [s for s in steps
               if re.search(r"-m grader(\.classroom)? (check|grade) ", s.get("run", ""))]
    assert len(grading) == 1, "one step grades"
    graders = [s for s in steps if "command-grader" in s.get("uses", "")]
    return grading[0]["run"], [(s["with"]["command"], s["with"]["max-score"]) for s in graders]


@pytest.mark.parametrize("name", CLASSROOM_SAMPLE)
def test_the_classroom_workflow_gives_grades_public_verdict(name, baseline, classroom_workflow,
                                                             tmp_path):
    script, graders = classroom_workflow
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "release", repo, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    os.symlink(sys.prefix, repo / ".venv")  # this venv, as `make setup` made the student's
    shutil.copy(FILES[name], repo / "attention.py")
    env = dict(os.environ, GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    graded = json.loads((repo / "out" / "public-checks.json").read_text(encoding="utf-8"))
    assert verdict(graded) == public(baseline[name])
    awarded = {}
    for command, points in graders:
        check_id = command.split()[-1]
        step = subprocess.run(command, shell=True, cwd=repo, capture_output=True, timeout=60)
        awarded[check_id] = points if step.returncode == 0 else 0
    assert set(awarded) == PUBLIC
    # Classroom's command grader gives a step all of its points or none.
    expected = {c: (p if s == "passed" else 0) for c, (s, p) in public(baseline[name]).items()}
    assert awarded == expected


def test_the_nbgrader_regrade_gives_grades_verdict(baseline, tmp_path):
    """The kit's regrade of each sample file handed in as the released notebook."""
    released = json.loads((ROOT / "release" / "attention.ipynb").read_text(encoding="utf-8"))
    found = {}
    for name in SAMPLE:
        text = FILES[name].read_text(encoding="utf-8")
        pieces = dict(notebook_build.split_source(text)[2])
        path = tmp_path / f"{name}.ipynb"
        path.write_text(json.dumps(handed_in(released, pieces)), encoding="utf-8")
        found[name] = str(path)
    # as `make autograde` regrades: long-lived judges, each grading notebook after notebook
    results = nbregrade.regrade_all(found, notebook_build.build(), jobs=2)
    for name in SAMPLE:
        assert "error" not in results[name], (name, results[name])
        assert verdict(results[name]) == baseline[name], name
