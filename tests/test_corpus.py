"""The grader against a corpus of student submissions (tests/submissions/).

- wrong/*.py: the reference with one realistic mistake each.  The header says what it is:
      # mistake: <one line>
      # expect-fail: <check id>      (one or more; each must not pass)
      # expect-key: <message key>    (one or more; each must be among the verdict keys of the
                                      expect-fail checks: the feedback names the mistake)
- correct/: solutions in different styles (a .py, an .ipynb, a folder); each gets full marks.
- hostile/*.py: submissions that attack the grader (test_corpus_hostile.py, a file of its own so
  that make test's workers grade them beside the rest).

Every submission is graded once a test run (`graded`: the single files by one batch, the rest each
by a judge with a cold worker) with isolation="auto" (bubblewrap where it works).
CORPUS_ISOLATION=process forces the plain subprocess, to prove the suite passes without bubblewrap
too.
"""
import atexit
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import door_matrix
from scratch import private_tempdir
from grader.judge.student import RESERVE_SECONDS
from grader.judge import service  # noqa: E402
from grader.render import report
from grader import rubric
from grader.sandbox import launch as sandbox  # noqa: E402

SUBMISSIONS = ROOT / "tests" / "submissions"
ISOLATION = os.environ.get("CORPUS_ISOLATION", "auto")
GRADE_SECONDS = 120  # a subprocess of the kit that does not answer within this is stuck


def within_budget(data):
    """The grader's own account of the student's time stays inside the one budget (the last call
    may start just before it ends and run for one call's time; then the fast kinds' reserve)."""
    limits = sandbox.Limits()
    return data["metadata"]["student_seconds"] <= limits.submission_seconds + RESERVE_SECONDS + limits.call_seconds
RUBRIC = rubric.load()


def corpus(kind):
    folder = SUBMISSIONS / kind
    return sorted(p for p in folder.iterdir()
                  if p.suffix in (".py", ".ipynb") or (p.is_dir() and p.name != "__pycache__"))


def ids(paths):
    return [p.name for p in paths]


WRONG, CORRECT = corpus("wrong"), corpus("correct")


# -- grading, once per submission ------------------------------------------------------------
def _digest(path):
    """A digest of a file, or of every file under a folder: the original must never change."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(path.parent)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


class Graded:
    """One grading, with the grader's temporary folders in a private scratch folder: what is
    left there afterwards is a leak (or, without bubblewrap, a hostile write outside the work
    folder), and nothing a submission writes can reach the real temp folder."""

    def __init__(self, data, leftovers, unchanged):
        self.data, self.leftovers, self.unchanged = data, leftovers, unchanged
        self.by_id = {c["id"]: c for c in self.data["checks"]}

    @classmethod
    def grade(cls, path, grade=None, scratch=None):
        """`path` graded by `grade(path)` (default: a judge of its own, cold workers) with the
        grader's temp folders in `scratch` (default: a fresh folder, removed afterwards)."""
        before = _digest(path)
        with private_tempdir(scratch, prefix="corpus-scratch-") as folder:
            try:
                data = (grade or (lambda p: service.grade(p, isolation=ISOLATION)))(str(path))
            finally:
                leftovers = sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))
                if scratch is None:
                    shutil.rmtree(folder, ignore_errors=True)
        return cls(data, leftovers, _digest(path) == before)

    def record(self):
        return {"data": self.data, "leftovers": self.leftovers, "unchanged": self.unchanged}

    def select(self, pattern):
        return [c for c in self.data["checks"] if fnmatch.fnmatchcase(c["id"], pattern)]

    def keys(self, check_id):
        return {v["key"] for v in self.by_id[check_id]["verdicts"]}


_graded = {}
_batch_folder = []
BATCHED = {path: name for name, path in door_matrix.FILES.items()}  # the batch's name of each file


def graded(path):
    """The grading of `path`, once a test run.  The corpus's single files (the reference and
    every .py of correct/ and wrong/) are graded by one `batch` of the whole corpus, which the
    door matrix holds every door to (door_matrix.batch_of_corpus; its forked workers give the
    verdicts cold ones do, test_forkserver.py); the rest (hostile files, notebooks, folders) each
    by a judge of its own with a cold worker, in a scratch temp folder of its own.  make test's
    xdist workers share both (KIT_TESTS_SHARED, tests/conftest.py): the first to ask grades, one
    that asks meanwhile waits for it, the others read its record."""
    if path not in _graded:
        shared = os.environ.get("KIT_TESTS_SHARED")
        name = BATCHED.get(Path(path))
        if name is not None:
            if shared is None and not _batch_folder:
                _batch_folder.append(tempfile.mkdtemp(prefix="corpus-batch-"))
                atexit.register(shutil.rmtree, _batch_folder[0], True)
            _, reports, left = door_matrix.batch_of_corpus(Path(shared or _batch_folder[0]),
                                                           _batch_names(name))
            _graded[path] = Graded(reports[name], left, True)  # the batch grades a copy
        else:
            _graded[path] = graded_once(path, shared)
    return _graded[path]


def _batch_names(name):
    """The files batched with `name`: the whole corpus (the batch the door matrix reads too) where
    this run's selected tests grade all of correct/ and wrong/, else the selected files alone (a
    maintainer's `-k` run of one new file batches that file)."""
    chosen = {BATCHED[p] for p in door_matrix.SELECTED if p in BATCHED}
    every = {n for n in door_matrix.FILES if n.startswith(("correct-", "wrong-"))}
    if every <= chosen:
        return None
    return sorted(chosen) if name in chosen else [name]


def graded_once(path, shared):
    if shared is None:
        return Graded.grade(path)
    record = Path(shared) / f"graded-{hashlib.sha256(str(path).encode()).hexdigest()[:16]}"
    with open(f"{record}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(f"{record}.json"):
            return Graded(**json.loads(Path(f"{record}.json").read_text(encoding="utf-8")))
        done = Graded.grade(path)
        Path(f"{record}.json").write_text(json.dumps(done.record()), encoding="utf-8")
        return done


# -- the wrong solutions' headers ------------------------------------------------------------
HEADER = re.compile(r"^# (mistake|expect-fail|expect-key): (.+?)\s*$")


def header(path):
    """{'mistake': [...], 'expect-fail': [...], 'expect-key': [...]} from the leading comments."""
    found = {"mistake": [], "expect-fail": [], "expect-key": []}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        match = HEADER.match(line)
        if match:
            found[match.group(1)].append(match.group(2))
    return found


# Mistakes the grader catches but does not name as it should: reported, kept honest with a strict
# xfail (an XPASS fails the suite, so the marker must go once the grader is fixed).
NOT_NAMED = {}

# Mistakes with an expect-fail check that passes although it should not (the same grader gap).
NOT_CAUGHT = {}


def test_corpus_is_big_enough():
    assert len(WRONG) >= 20, ids(WRONG)
    assert len(CORRECT) >= 8, ids(CORRECT)
    assert {p.suffix for p in CORRECT} >= {".py", ".ipynb"} and any(p.is_dir() for p in CORRECT)


def header_problems(path):
    h = header(path)
    found = [] if len(h["mistake"]) == 1 else ["not exactly one '# mistake:' line"]
    found += [] if h["expect-fail"] and h["expect-key"] else ["no expect-fail or no expect-key"]
    found += [f"unknown check id {c}" for c in h["expect-fail"] if c not in RUBRIC.by_id]
    return found + [f"unknown message key {k}" for k in h["expect-key"] if k not in RUBRIC.messages]


def test_wrong_headers_are_well_formed():
    # One test for every header (it reads files only): a `-k` run of one file's tests selects
    # no other file, so it batches that file alone (_batch_names).
    problems = {p.name: header_problems(p) for p in WRONG if header_problems(p)}
    assert problems == {}


def test_each_wrong_solution_is_a_different_mistake():
    mistakes = [header(p)["mistake"][0] for p in WRONG]
    assert len(set(mistakes)) == len(mistakes)


def test_every_check_is_proven_by_a_wrong_solution():
    # Each rubric check is the expect-fail of at least one wrong solution, so the corpus proves it
    # fails on the mistake it exists for (test_wrong_solution_fails_its_checks does the proving).
    covered = {check_id for p in WRONG for check_id in header(p)["expect-fail"]}
    unproven = sorted(c.id for c in RUBRIC.checks if c.id not in covered)
    assert unproven == [], f"no wrong solution has these as expect-fail: {unproven}"


def xfail_where(table):
    return [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=table[p.name]))
            if p.name in table else p for p in WRONG]


@pytest.mark.parametrize("path", WRONG, ids=ids(WRONG))
def test_wrong_solution_does_not_get_full_marks(path):
    g = graded(path)
    assert within_budget(g.data)
    assert g.data["score"] < g.data["max_score"]
    assert g.leftovers == [], "the grader left files in the temp folder"


@pytest.mark.parametrize("path", xfail_where(NOT_CAUGHT), ids=ids(WRONG))
def test_wrong_solution_fails_its_checks(path):
    g = graded(path)
    for check_id in header(path)["expect-fail"]:
        result = g.by_id[check_id]
        assert result["status"] != "passed", f"{check_id} passed"
        assert result["score"] < result["max_score"], check_id


@pytest.mark.parametrize("path", xfail_where(NOT_NAMED), ids=ids(WRONG))
def test_wrong_solution_feedback_names_the_mistake(path):
    g = graded(path)
    h = header(path)
    failing = [g.by_id[c] for c in h["expect-fail"] if g.by_id[c]["status"] != "passed"]
    seen = {v["key"] for result in failing for v in result["verdicts"]}
    for key in h["expect-key"]:
        assert key in seen, f"{key} not named; the feedback said {sorted(seen)}"
        # ... and the rendered feedback carries that message's text, in both languages.
        for result in failing:
            for verdict in result["verdicts"]:
                if verdict["key"] == key:
                    for lang in ("en", "zh"):
                        text = RUBRIC.message(key, lang, **verdict.get("fields", {}))
                        assert text and text in report.feedback(RUBRIC, result, lang)


@pytest.mark.parametrize("path", CORRECT, ids=ids(CORRECT))
def test_correct_solution_gets_full_marks(path):
    g = graded(path)
    assert within_budget(g.data)
    max_score = sum(c["max_score"] for c in g.data["checks"])
    assert max_score > 0 and g.data["max_score"] == max_score
    assert len(g.data["checks"]) == len(RUBRIC.checks)
    not_passed = {c["id"]: (c["status"], [v["key"] for v in c["verdicts"]])
                  for c in g.data["checks"] if c["status"] != "passed"}
    assert not_passed == {}
    assert g.data["score"] == max_score
    assert g.leftovers == [], "the grader left files in the temp folder"


def test_isolation_is_recorded():
    g = graded(CORRECT[0])
    expected = sandbox.choose_isolation(ISOLATION)
    assert g.data["metadata"]["isolation"] == expected


# -- determinism -----------------------------------------------------------------------------
TIMING = re.compile(r"time|second|elapsed|duration|took|started|finished", re.I)


def normalised(data, output=True):
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if not TIMING.search(k)}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    out = clean(data)
    out["metadata"].pop("submission", None)
    if not output:
        out["metadata"].pop("student_output", None)
    return out


@pytest.mark.parametrize("path,output", [
    (SUBMISSIONS / "wrong" / "mask_fill_zero.py", True),
    (SUBMISSIONS / "wrong" / "merge_no_transpose.py", True),
    (SUBMISSIONS / "correct" / "notebook.ipynb", True),  # it prints: the output must match too
], ids=lambda p: getattr(p, "name", str(p)))
def test_grading_twice_gives_the_same_report(path, output):
    """Two gradings, each in processes of its own (its own hash seed and generators), give the
    same report: graded()'s, shared with the tests above (a .py: the batch's forked worker; the
    notebook: a judge of its own, a cold worker), and a fresh cold one; how the worker started
    aside (forked and cold workers give the same verdicts: test_forkserver.py)."""
    first, second = graded(path).data, Graded.grade(path).data
    assert second["metadata"]["worker_start"] == "exec"
    first, second = (normalised(json.loads(json.dumps(data)), output) for data in (first, second))
    for data in (first, second):
        data["metadata"].pop("worker_start")
    assert second == first
    for lang in ("en", "zh"):
        assert json.loads(report.to_json(RUBRIC, second, lang)) == \
            json.loads(report.to_json(RUBRIC, first, lang))


def test_what_the_student_prints_is_captured(tmp_path):
    # A plain subprocess used to lose it every time (block-buffered pipe, then SIGKILL); the
    # worker now runs unbuffered.  (A notebook's top-level prints are left out: only its
    # definitions run, tests/test_notebook_stray_cells.py.)
    path = tmp_path / "attention.py"
    path.write_text((ROOT / "solutions" / "attention.py").read_text(encoding="utf-8")
                    + "\nprint('weights 0.5735')\n", encoding="utf-8")
    data = service.grade(str(path), isolation="process", visibilities=("public",))
    assert "0.5735" in data["metadata"]["student_output"]


def test_a_check_that_cannot_run_says_so_and_names_nothing_else():
    # forward fails for T < max_len (the mask is not cropped): module.shapes names the mistake;
    # the checks that needed forward say they could not run; the parameters, the mask buffer and
    # the library check judge pieces that are right, and pass.
    g = graded(SUBMISSIONS / "wrong" / "mask_not_cropped.py")
    assert "mask_not_cropped" in g.keys("module.shapes")
    for check_id in ("module.causal", "module.reference", "module.gradients"):
        assert g.keys(check_id) == {"cannot_run"}, (check_id, g.keys(check_id))
    for check_id in ("module.param_count", "module.mask_buffer", "module.no_library_attention"):
        assert g.by_id[check_id]["status"] == "passed", (check_id, g.keys(check_id))
