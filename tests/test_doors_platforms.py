"""The door matrix, part three: Gradescope, the Classroom workflow and the nbgrader regrade, on
the sample of the slow doors (tests/door_matrix.py)."""
import contextlib
import io
import json
import os
import re
import shlex
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
from grader.tools import classroom


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    proc = run([PY, "-m", "grader.instructor.gradescope", "build", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    return out


# Gradescope's autograder grades each file in a run of its own (a cold spare worker, the
# hardening): full marks, another correct style (einsum) and a named mistake in the module here;
# nothing (the stub, uploaded in a zip) and a named mistake in attend (wrong/mask_missing) are
# test_gradescope.py's runs, held to the batch's verdict there; test_doors.py's `grade` takes
# the rest of the sample cold (split_heads, the quiz).
GRADESCOPE_SAMPLE = ["reference", "correct-einsum", "wrong-no_out_proj"]
# The Classroom workflow grades attention.py and the released attention.ipynb (the untouched
# stub notebook: nothing, graded in every run) and keeps the better; then a command-grader step
# per public check.  Full marks (every step all its points) and a mistake (some steps none).
CLASSROOM_SAMPLE = ["reference", "wrong-split_no_transpose"]


@pytest.mark.parametrize("name", GRADESCOPE_SAMPLE)
def test_gradescope_gives_grades_verdict(name, baseline, autograder_zip, tmp_path):
    from test_gradescope import fake_autograder, gives_the_batchs_verdict, run_autograder

    root = fake_autograder(tmp_path, autograder_zip, {"attention.py": FILES[name]})
    proc, results = run_autograder(root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (root / "source" / "solutions").exists(), "the hardening ran"
    gives_the_batchs_verdict(results, baseline[name])


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
        # Every step's command is `python -m grader.classroom REPORT CHECK` but for the check:
        # the first runs as the command grader runs it (a shell with PATH and HOME only), the
        # others call the same main here (a Python start each is all they would add).
        argv = shlex.split(command)
        assert argv[:4] == [".venv/bin/python", "-m", "grader.classroom",
                            "out/public-checks.json"] and len(argv) == 5, command
        if not awarded:
            env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
            code = subprocess.run(command, shell=True, cwd=repo, env=env, capture_output=True,
                                  timeout=60).returncode
        else:
            with contextlib.redirect_stdout(io.StringIO()):
                code = classroom.main([str(repo / argv[3]), argv[4]])
        awarded[argv[4]] = points if code == 0 else 0
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
    # as `make autograde` regrades: a long-lived judge grading notebook after notebook (one
    # judge: judges side by side are test_batch.py's)
    results = nbregrade.regrade_all(found, notebook_build.build(), jobs=1)
    for name in SAMPLE:
        assert "error" not in results[name], (name, results[name])
        assert verdict(results[name]) == baseline[name], name
