"""The door matrix: one submission, one verdict, whatever door it enters by.

Every door must report the same `(check id, status, score)` for the same file, read from the
pytest-json-report document of the checks' tests that every report carries (`pytest` in its data,
runner.carried): a check's status and points are added up from its tests' outcomes and metadata
here, apart from the report model, which must agree with them.  The doors that
stay up and grade one file after another see every file of the corpus, the doors that start anew
for each file a sample:

- `python -m grader batch` on the whole corpus (one run: each student's report.json and
  gradebook.csv's per-check columns) is the table every other door is held to;
- `python -m grader grade FILE --format json`, as an instructor runs it, on the CLI sample: it
  must equal the batch's table for the file (so every door equals `grade`);
- the student's doors, on the public subset: `python -m grader watch` (one process, every file
  saved in turn: the verdict each screen showed, from its --stats lines) and the notebook's
  `%check` (the kernel's judge process, fed the assembled cells as the kernel feeds it) on every
  file, `python -m grader check` on the CLI sample;
- the Gradescope autograder, run as Gradescope runs it (an emulated /autograder with source/,
  submission/ and results/, its own hardening included);
- the Classroom workflow's grading step, run from the committed workflow file in a copy of the
  student bundle, and its per-check command-grader steps;
- the nbgrader regrade of the same code handed in as the released notebook.

The slowest doors (Gradescope, Classroom, nbgrader) see a fixed sample that holds the reference,
the stub and files that fail in different ways; the CLI sample adds a file of each other kind
(another correct style, a part-credit mask, the device and dtype mistakes, randomness, a block
without the library).
"""
import collections
import concurrent.futures
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from grader import rubric as rubric_module
from grader.authoring import notebook_build
from grader.instructor import nbregrade
from grader.tools import notebook as kernel_side

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SUBMISSIONS = ROOT / "tests" / "submissions"
RUBRIC = rubric_module.load()
PUBLIC = {c.id for c in RUBRIC.checks if c.visibility == "public"}
MAX = sum(c.points for c in RUBRIC.checks)


def corpus():
    """name -> path: the reference, the stub, and every .py of the correct and wrong corpora."""
    files = {"reference": ROOT / "solutions" / "attention.py",
             "stub": ROOT / "exercises" / "attention.py"}
    for kind in ("correct", "wrong"):
        for path in sorted((SUBMISSIONS / kind).glob("*.py")):
            files[f"{kind}-{path.stem}"] = path
    return files


FILES = corpus()
# The slow doors' sample: full marks, nothing, a named mistake in each piece, a timeout-prone
# file and a block without the library.
SAMPLE = ["reference", "stub", "correct-einsum", "wrong-split_no_transpose",
          "wrong-mask_missing", "wrong-no_out_proj", "wrong-quiz_shape_as_list"]
# `grade` and `check`, each a process of its own per file (torch imported twice, a cold worker).
CLI_SAMPLE = SAMPLE + ["correct-nan_guard_item", "correct-separate_projections",
                       "wrong-mask_bool_added", "wrong-device_mask_no_device",
                       "wrong-dtype_softmax_float32", "wrong-block_dropout_active",
                       "wrong-linear_made_in_forward", "wrong-uses_sdpa", "wrong-merge_sum"]


# A check's outcome when several of its tests fail: an error over a timeout over a failure.
WORST = ["failed", "timeout", "error"]


def verdict(data):
    """{check id: (status, score)} from a report's pytest-json-report document: the points its
    tests earned, summed, and `passed` where every test passed, else the worst status of their
    verdicts (a test that failed without one is an error of the kit)."""
    tests = collections.defaultdict(list)
    for test in data["pytest"]["tests"]:
        tests[test["metadata"]["check"]].append(test)
    table = {}
    for check_id, runs in tests.items():
        failing = [(t["metadata"].get("verdict") or {}).get("status", "error") for t in runs
                   if t["outcome"] != "passed" or t["metadata"].get("verdict")]
        table[check_id] = (max(failing, key=WORST.index) if failing else "passed",
                           round(sum(t["metadata"]["points"] for t in runs), 4))
    return table


def verdict_of_checks(checks):
    """{check id: (status, score)} from a report's checks, as the report model made them."""
    return {c["id"]: (c["status"], round(float(c["score"]), 4)) for c in checks}


def public(table):
    return {key: value for key, value in table.items() if key in PUBLIC}


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, encoding="utf-8", cwd=ROOT,
                          timeout=600, **kwargs)


def cli_report(command, path):
    proc = run([PY, "-m", "grader", command, str(path), "--format", "json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def each(function, names, jobs=2):
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return dict(zip(names, pool.map(function, names)))


@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    """`batch` on every file of the corpus: (its output folder, {name: report data})."""
    entries = tmp_path_factory.mktemp("doors") / "in"
    entries.mkdir()
    for name, path in FILES.items():
        shutil.copy(path, entries / f"{name}.py")
    out = entries.parent / "out"
    proc = run([PY, "-m", "grader", "batch", str(entries), "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    reports = {}
    for name in FILES:
        record = json.loads((out / "students" / name / "report.json").read_text(encoding="utf-8"))
        reports[name] = record["report"]
    return out, reports


@pytest.fixture(scope="module")
def baseline(batched):
    return {name: verdict(data) for name, data in batched[1].items()}


def test_the_report_model_agrees_with_the_pytest_document(batched):
    for name, data in batched[1].items():
        assert verdict_of_checks(data["checks"]) == verdict(data), name
        summary = data["pytest"]["summary"]
        assert summary.get("passed", 0) + summary.get("failed", 0) + summary.get("error", 0) == \
            len(data["pytest"]["tests"]), name


def test_the_baseline_covers_every_check_and_the_extremes(batched, baseline):
    graded = batched[1]
    for name, table in baseline.items():
        assert set(table) == {c.id for c in RUBRIC.checks}, name
    assert graded["reference"]["score"] == MAX
    assert graded["stub"]["score"] == 0
    for name in FILES:
        if name.startswith("correct-"):
            assert graded[name]["score"] == MAX, (name, [c for c in graded[name]["checks"]
                                                         if c["status"] != "passed"])
        elif name.startswith("wrong-"):
            assert graded[name]["score"] < MAX, name


def test_grade_gives_the_batchs_verdict(baseline):
    graded = each(lambda name: cli_report("grade", FILES[name]), CLI_SAMPLE)
    for name, data in graded.items():
        assert verdict(data) == baseline[name], name


def test_check_gives_the_public_part_of_grade(baseline):
    checked = each(lambda name: cli_report("check", FILES[name]), CLI_SAMPLE)
    for name, data in checked.items():
        assert verdict(data) == public(baseline[name]), name


def test_the_kernels_check_gives_the_public_part_of_grade(baseline):
    """`%check`'s engine: the assembled cells, graded by the kernel's own judge process."""
    judge = kernel_side.kernel_judge()
    try:
        for name, path in FILES.items():
            source = kernel_side.assemble([path.read_text(encoding="utf-8")])
            data = kernel_side.judge(source, hidden=False, timeout=300)
            assert "error" not in data, (name, data)
            assert verdict(data) == public(baseline[name]), name
    finally:
        judge.stop()


def test_the_kernels_check_of_one_exercise_gives_its_part_of_grade(baseline):
    """`%check EXERCISE` runs that exercise's checks only: each gets the verdict grade gives it
    (a check judges its own piece, whatever else ran before it)."""
    judge = kernel_side.kernel_judge()
    try:
        for name, path in FILES.items():
            source = kernel_side.assemble([path.read_text(encoding="utf-8")])
            for exercise in RUBRIC.exercises():
                data = kernel_side.judge(source, hidden=False, timeout=300, exercise=exercise)
                assert "error" not in data, (name, exercise, data)
                want = {key: value for key, value in public(baseline[name]).items()
                        if RUBRIC.by_id[key].exercise == exercise}
                assert verdict(data) == want, (name, exercise)
    finally:
        judge.stop()


def test_watch_shows_the_public_part_of_grade(baseline, tmp_path):
    """One `watch` process, the corpus saved into the watched file one after the other."""
    watched, stats = tmp_path / "attention.py", tmp_path / "stats.jsonl"
    watched.write_text(FILES["stub"].read_text(encoding="utf-8"), encoding="utf-8")
    proc = subprocess.Popen([PY, "-m", "grader", "watch", str(watched), "--poll", "--lang", "en",
                             "--stats", str(stats)], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        shown = [wait_for_screen(stats, 1, proc)]
        names = ["stub"] + [n for n in FILES if n != "stub"]
        for number, name in enumerate(names[1:], start=2):
            temporary = tmp_path / "attention.py.saving"
            temporary.write_text(FILES[name].read_text(encoding="utf-8"), encoding="utf-8")
            os.replace(temporary, watched)
            shown.append(wait_for_screen(stats, number, proc))
    finally:
        proc.kill()
        proc.wait()
    for name, screen in zip(names, shown):
        assert verdict(screen) == public(baseline[name]), name
        assert {c: (s, round(float(p), 4)) for c, s, p in screen["checks"]} == \
            public(baseline[name]), name  # what the screen showed


def wait_for_screen(stats, number, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stats.exists():
            lines = stats.read_text(encoding="utf-8").splitlines()
            if len(lines) >= number:
                return json.loads(lines[number - 1])
        assert proc.poll() is None, "watch ended"
        time.sleep(0.05)
    pytest.fail(f"watch drew no screen {number} within {seconds} s")


def test_the_gradebook_gives_the_reports_verdict(batched, baseline):
    with open(batched[0] / "gradebook.csv", encoding="utf-8", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    for name in FILES:
        row = rows[name]
        # The gradebook writes scores to two decimals (28.67), the same as the class page.
        assert {c: float(row[c]) for c in baseline[name]} == \
            {c: round(score, 2) for c, (_, score) in baseline[name].items()}, name
        assert float(row["total"]) == pytest.approx(sum(s for _, s in baseline[name].values()),
                                                    abs=0.005)


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    proc = run([PY, "-m", "grader.instructor.gradescope", "build", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("name", SAMPLE)
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


@pytest.mark.parametrize("name", SAMPLE[:4])
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
        path.write_text(json.dumps(notebook_build.handed_in(released, pieces)), encoding="utf-8")
        found[name] = str(path)
    # as `make autograde` regrades: long-lived judges, each grading notebook after notebook
    results = nbregrade.regrade_all(found, nbregrade.source_notebook(), jobs=2)
    for name in SAMPLE:
        assert "error" not in results[name], (name, results[name])
        assert verdict(results[name]) == baseline[name], name
