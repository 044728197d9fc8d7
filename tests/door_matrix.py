"""The door matrix: one submission, one verdict, whatever door it enters by.

Every door must report the same `(check id, status, score)` for the same file, read from the
pytest-json-report document of the checks' tests that every report carries (`pytest` in its data,
runner.carried): a check's status and points are added up from its tests' outcomes and metadata
here, apart from the report model, which must agree with them.  The doors that
stay up and grade one file after another see every file of the corpus (`watch`, every public
verdict of it), the doors that start anew for each file a sample:

- `python -m grader batch` on the whole corpus (one run: each student's report.json and
  gradebook.csv's per-check columns) is the table every other door is held to;
- `python -m grader grade FILE --format json`, as an instructor runs it, on a sample of its own
  (test_doors.py: one file as a process, the rest through the command's own function in the
  test's process, each a cold worker): it must equal the batch's table for the file (so every
  door equals `grade`);
- the student's doors, on the public subset: the notebook's `%check` (the kernel's judge
  process, fed the assembled cells as the kernel feeds it) on every file, `python -m grader
  watch` (one process, a file of each public verdict of the corpus saved in turn: the verdict
  each screen showed, from its --stats lines), `python -m grader check` on a sample of its own;
- the Gradescope autograder, run as Gradescope runs it (an emulated /autograder with source/,
  submission/ and results/, its own hardening included; test_gradescope.py's own runs of the
  stub and of wrong/mask_missing are held to the batch too);
- the Classroom workflow's grading step, run from the committed workflow file in a copy of the
  student bundle, and its per-check command-grader steps;
- the nbgrader regrade of the same code handed in as the released notebook.

The slowest doors see the fixed SAMPLE that holds the reference, the stub and files that fail in
different ways (nbgrader all of it; Gradescope, Classroom, `grade` and `check`, a process or more
per file, each a part of it, every file of it graded cold by Gradescope or `grade`); `grade` adds
what a cold worker meets first (the device and dtype mistakes, torch's ready-made attention
refused).

The matrix is three test files, so that pytest-xdist's workers (`--dist loadfile`) run them side
by side: test_doors.py (the batch, `grade`, `check`, the gradebook), test_doors_students.py
(`watch`, the notebook's `%check`) and test_doors_platforms.py (Gradescope, Classroom, nbgrader).
The batch of the whole corpus they are all held to runs once a test run (`batched`: the first
worker to need it grades, the others wait for it and read its reports).
"""
import collections
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import rubric as rubric_module

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
SELECTED = set()  # the paths this run's selected tests take as `path` (tests/conftest.py)
# The slow doors' sample: full marks, nothing, a named mistake in each piece, a timeout-prone
# file and a block without the library.
SAMPLE = ["reference", "stub", "correct-einsum", "wrong-split_no_transpose",
          "wrong-mask_missing", "wrong-no_out_proj", "wrong-quiz_shape_as_list"]
# `grade` and `check` (each a cold worker per file) take their samples in test_doors.py.


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


def shared_folder(tmp_path_factory):
    """A folder every xdist worker of this test run shares (tests/conftest.py), or one of this
    run's own without xdist."""
    shared = os.environ.get("KIT_TESTS_SHARED")
    return Path(shared) if shared else tmp_path_factory.getbasetemp()


def batch_of_corpus(folder, names=None):
    """`batch` on the corpus's files `names` (all of FILES by default), once a test run whoever
    asks first (the others wait for it and read its reports): (its output folder, {name: report
    data}, what the batch left in its temporary folder, which is a leak).  Kept under a name of
    this kit's root and of `names`, so that a copy of the kit tested from inside a test
    (test_recipe.py) grades its own corpus."""
    names = sorted(names or FILES)
    key = hashlib.sha256("\n".join([str(ROOT)] + names).encode()).hexdigest()[:12]
    folder = folder / f"corpus-{key}"
    folder.mkdir(exist_ok=True)
    entries, out, done = folder / "in", folder / "out", folder / "batched.json"
    with open(folder / "batch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker grades; the others wait here
        if not done.exists():
            for stale in (entries, out, folder / "batch-tmp"):
                shutil.rmtree(stale, ignore_errors=True)
            entries.mkdir()
            for name in names:
                shutil.copy(FILES[name], entries / f"{name}.py")
            scratch = folder / "batch-tmp"
            scratch.mkdir()
            proc = run([PY, "-m", "grader", "batch", str(entries), "--out", str(out),
                        "--isolation", os.environ.get("CORPUS_ISOLATION", "auto")],
                       env=dict(os.environ, TMPDIR=str(scratch)))
            assert proc.returncode == 0, proc.stderr[-2000:]
            left = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*"))
            done.write_text(json.dumps(left), encoding="utf-8")
    reports = {}
    for name in names:
        record = json.loads((out / "students" / name / "report.json").read_text(encoding="utf-8"))
        reports[name] = record["report"]
    return out, reports, json.loads(done.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    """`batch` on every file of the corpus (batch_of_corpus): (its output folder, {name: report
    data})."""
    out, reports, _ = batch_of_corpus(shared_folder(tmp_path_factory))
    return out, reports


@pytest.fixture(scope="module")
def baseline(batched):
    """{name: {check id: (status, score)}}: the batch's verdicts, every door's yardstick."""
    return {name: verdict(data) for name, data in batched[1].items()}
