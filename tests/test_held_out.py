"""Issue 71: what each check's verdict holds on to when the student's code holds out, in every
way a worker can start (cold or forked; plain process or bubblewrap).

- A forward that never returns, and ignores SIGTERM, costs module.param_count nothing: the count
  is read from torch's registries before forward runs, the worker is killed with SIGKILL (nothing
  a process can ignore) as soon as the call's time is up, and none of its processes is left;
  forward's own checks say timeout (the corpus: hostile/forward_ignores_sigterm.py, here its loop
  asleep: asleep()).
- An allocation without bound is named by the memory limit, not as a timeout: however slowly it
  grows, while it grows past a quarter of what the limit leaves (student.Overtime); a call that
  holds memory but no longer grows, or never grew, is still a timeout.
- A piece the file does not define at all (no def, no class) is named as missing on every check
  that needs it, its own and forward's, in both languages, never as the NameError forward met.
"""
import ast
import time
from pathlib import Path

import pytest
import torch

from grader import rubric
from grader.authoring import stubs as authoring
from grader.judge import grading, runner
from grader.judge import student as student_module
from grader.judge.student import MEMORY_GRACE_SECONDS, StudentError
from grader.judge.workers import forked
from grader.render import report
from grader.sandbox import forkserver, launch
from grader.sandbox.launch import Limits, WorkerFailure

import zygotes

HOSTILE = Path(__file__).parent / "submissions" / "hostile"
REFERENCE = open(authoring.SOLUTION, encoding="utf-8").read()
RUBRIC = rubric.load()
COLD_BWRAP = ["bubblewrap"] if launch.bubblewrap_works() else []
FORK_BWRAP = ["fork-bubblewrap"] if COLD_BWRAP and forkserver.supported("bubblewrap") else []
MODES = ["process", "fork-process"] + COLD_BWRAP + FORK_BWRAP
KILL_SECONDS = 3.0  # from a call's time up to its failure raised: the kill, never a wait for it
D, H, MAX_LEN = 12, 3, 8

def start(tmp_path, source, mode, limits):
    """(sub, student) for `source` as attention.py, its worker started the way `mode` says."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "attention.py").write_text(source, encoding="utf-8")
    if mode.startswith("fork-"):
        server = zygotes.server(mode[len("fork-"):])
        return grading.start(str(folder), server.isolation, limits, forked(server))
    return grading.start(str(folder), mode, limits)


def worker_processes(student):
    """This judge's pids of every process of the student's worker (bubblewrap's own included)."""
    worker = student.worker
    if not hasattr(worker, "server"):
        return launch.process_tree(worker.proc.pid)
    root = worker.pid if worker.server.mode == "plain" else \
        launch.pid_below(worker.server.proc.pid, worker.pid)
    assert root is not None, "the forked worker was not found"
    return launch.process_tree(root)


def running(pid):
    """Whether `pid` is a process that still runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def eventually(condition, seconds=10):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


# -- a forward that hangs and ignores SIGTERM ----------------------------------------------------
def asleep(source):
    """hostile/forward_ignores_sigterm.py with forward's endless loop asleep instead of spinning:
    the same hang that ignores SIGTERM to the judge (no answer within the call's time, SIGTERM
    ignored, SIGKILL), without a core burnt for each call's whole time (the spinning file itself
    is graded forked by test_corpus_hostile, with the same 2 s calls)."""
    spin = "        while True:  # never returns, and a SIGTERM does not stop it\n            pass\n"
    assert spin in source and "import signal\n" in source
    return source.replace(spin, "        while True:  # never returns, and a SIGTERM does not stop it\n"
                                "            time.sleep(1)\n").replace(
        "import signal\n", "import signal\nimport time\n", 1)


SIGTERM_FILE = asleep((HOSTILE / "forward_ignores_sigterm.py").read_text(encoding="utf-8"))


# The whole public grading in the fork modes only: in a cold worker, the kill and the fresh worker
# that then reads the count (describe) are test_a_worker_that_ignores_sigterm_is_killed's, in every
# mode; a cold worker's grading would only add two torch imports a restart.  In fork-bubblewrap
# (the kit's isolation where bubblewrap works) the same file's whole grading, forked, with the
# same 2 s calls, is test_corpus_hostile's (forward_ignores_sigterm: the count and every other
# built piece keep their points, forward's checks say timeout): here the plain process's forks.
@pytest.mark.parametrize("mode", ["fork-process"])
def test_a_hang_that_ignores_sigterm_costs_the_count_nothing(tmp_path, mode):
    sub, student = start(tmp_path, SIGTERM_FILE, mode, Limits(call_seconds=2.0))
    data = grading.finish(sub, student, visibilities=("public",))
    by_id = {c["id"]: c for c in data["checks"]}
    count = by_id["module.param_count"]
    assert count["status"] == "passed" and count["score"] == count["max_score"], count["verdicts"]
    for check_id in ("module.shapes", "module.causal"):
        assert by_id[check_id]["status"] == "timeout", by_id[check_id]
        assert {v["key"] for v in by_id[check_id]["verdicts"]} == {"timeout"}
    assert by_id["attend.causal"]["status"] == "passed"


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_that_ignores_sigterm_is_killed_when_its_time_is_up(tmp_path, mode):
    call_seconds = 1.0
    sub, student = start(tmp_path, SIGTERM_FILE, mode, Limits(call_seconds=call_seconds))
    try:
        module = student.module(D, H, MAX_LEN)
        processes = worker_processes(student)
        began = time.monotonic()
        with pytest.raises(WorkerFailure) as failed:
            module(torch.zeros(1, 4, D))
        assert failed.value.kind == "timeout"
        assert time.monotonic() - began < call_seconds + KILL_SECONDS
        assert eventually(lambda: not any(running(pid) for pid in processes)), \
            [pid for pid in processes if running(pid)]
        assert student.worker is None  # the next call gets a fresh worker
        assert student.module(D, H, MAX_LEN).contract("describe", d_model=D)["params"]
    finally:
        student.close()
        sub.cleanup()


# -- memory without bound ------------------------------------------------------------------------
HOGS = REFERENCE + '''

import time


def grow_then_creep():
    """1 GiB at once, then 8 MiB every 0.1 s: the limit is reached only long after the call's time."""
    hog = [torch.ones(2 ** 28)]
    while True:
        hog.append(torch.ones(2 ** 21))
        time.sleep(0.1)


def grow_to_the_limit():
    """1 GiB at once, then 256 MiB every 0.3 s: the limit stops it a few seconds in."""
    hog = [torch.ones(2 ** 28)]
    while True:
        hog.append(torch.ones(2 ** 26))
        time.sleep(0.3)


def hold_then_hang():
    """1.5 GiB held, then an endless loop that allocates nothing more (asleep: no core burnt)."""
    hog = torch.ones(3 * 2 ** 27)
    while True:
        hog[0] += 1
        time.sleep(0.1)


def hang():
    while True:
        time.sleep(0.1)


def huge_tensor():
    return torch.empty(10 ** 12)


def huge_list():
    return [0] * 10 ** 12
'''
CALL_SECONDS = 2.0


class CountedOvertime(student_module.Overtime):
    """student.Overtime, each one kept: what the grader decided to wait beyond a call's time."""
    made = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        CountedOvertime.made.append(self)


@pytest.fixture
def counted(monkeypatch):
    CountedOvertime.made = []
    monkeypatch.setattr(student_module, "Overtime", CountedOvertime)


def memory_failure(student, fn):
    """(the exception the call of `fn` raised, the seconds the grader gave it beyond the call's
    own time: its worker started before).  What the grader counted (Overtime's steps), not a wall
    clock a busy machine stretches; the call's own time is the limit's call_seconds."""
    student.constants(["Q1_SHAPE"])
    made = len(CountedOvertime.made)
    with pytest.raises((StudentError, WorkerFailure)) as raised:
        student.call(fn)
    return raised.value, sum(o.given for o in CountedOvertime.made[made:])


def said(fields, lang):
    return RUBRIC.message("memory_limit", lang, **fields)


@pytest.mark.parametrize("mode", MODES)
def test_memory_that_grows_past_the_calls_time_is_named_by_the_limit(tmp_path, mode, counted):
    sub, student = start(tmp_path, HOGS, mode, Limits(call_seconds=CALL_SECONDS))
    try:
        failure, more = memory_failure(student, "grow_then_creep")
        assert isinstance(failure, WorkerFailure) and failure.kind == "memory_limit", failure
        assert 0 < more <= MEMORY_GRACE_SECONDS  # waited while it grew, no longer than the grace
        assert CountedOvertime.made[-1].out_of_memory()
        verdict = runner.classify(failure)
        assert (verdict["status"], verdict["key"]) == ("error", "memory_limit")
        limit = f"{Limits().memory_bytes / 2 ** 30:g} GiB"
        assert verdict["fields"]["limit"] == limit and verdict["fields"]["where"] == "grow_then_creep"
        assert "内存" in said(verdict["fields"], "zh") and limit in said(verdict["fields"], "zh")
        assert "memory limit of " + limit in said(verdict["fields"], "en")
        trips = student.round_trips
        again, _ = memory_failure(student, "grow_then_creep")  # at once, the same verdict
        assert runner.classify(again)["key"] == "memory_limit"
        assert student.round_trips == trips  # answered without asking the worker again
    finally:
        student.close()
        sub.cleanup()


def test_memory_is_named_whichever_way_the_limit_stops_it(tmp_path, counted):
    sub, student = start(tmp_path, HOGS, "fork-process", Limits(call_seconds=CALL_SECONDS))
    try:
        for fn in ("grow_to_the_limit", "huge_tensor", "huge_list"):
            failure, _ = memory_failure(student, fn)
            assert runner.classify(failure)["key"] == "memory_limit", (fn, failure)
            if isinstance(failure, StudentError):  # its own error, in the time given while it
                assert failure.line is not None  # grew (or at once): the student's line named
    finally:
        student.close()
        sub.cleanup()


def test_a_hang_that_holds_memory_but_does_not_grow_is_a_timeout(tmp_path, counted):
    sub, student = start(tmp_path, HOGS, "fork-process", Limits(call_seconds=CALL_SECONDS))
    try:
        failure, more = memory_failure(student, "hang")
        assert failure.kind == "timeout" and more == 0  # no time more
        assert f"no answer within {CALL_SECONDS:g} s" in str(failure)
        failure, more = memory_failure(student, "hold_then_hang")
        assert failure.kind == "timeout", failure
        assert more <= MEMORY_GRACE_SECONDS
        assert not CountedOvertime.made[-1].out_of_memory()
    finally:
        student.close()
        sub.cleanup()


# -- a piece not defined at all ------------------------------------------------------------------
def without(source, name):
    """`source` with the top-level definition of `name` (a def or a class) taken out."""
    node = next(n for n in ast.parse(source).body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    lines = source.splitlines(keepends=True)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return "".join(lines[:first - 1] + lines[node.end_lineno:])


# Checks of CausalSelfAttention that never run forward: they keep their points whichever function
# forward would call is missing.
BUILT_ONLY = {"module.param_count", "module.mask_buffer", "module.errors"}


def needing(name):
    """The ids of the checks that need `name`: its exercise's, and forward's (which calls every
    function of the exercise); module.no_library_attention needs only the block and attend (an
    error of forward's helpers is another check's business)."""
    exercise = "CausalSelfAttention" if name == "CausalSelfAttention" else name
    excused = BUILT_ONLY | ({"module.no_library_attention"}
                            if name not in ("attend", "CausalSelfAttention") else set())
    return {c.id for c in RUBRIC.checks if c.exercise == exercise or
            (c.exercise == "CausalSelfAttention" and c.id not in excused)}


@pytest.mark.parametrize("name", ["split_heads", "merge_heads", "attend", "CausalSelfAttention"])
def test_a_missing_piece_is_named_as_missing_by_every_check_that_needs_it(tmp_path, name):
    sub, student = start(tmp_path, without(REFERENCE, name), "fork-process", Limits())
    data = grading.finish(sub, student)
    failing = {c["id"]: c for c in data["checks"] if c["status"] != "passed"}
    assert set(failing) == needing(name)
    for check_id, result in failing.items():
        verdicts = result["verdicts"]
        assert verdicts and {v["key"] for v in verdicts} == {"not_defined"}, (check_id, verdicts)
        assert {v["fields"]["name"] for v in verdicts} == {name}
        for lang, missing in (("zh", "缺少"), ("en", "missing")):
            text = report.feedback(RUBRIC, result, lang)
            assert f"`{name}`" in text and missing in text, (check_id, lang, text)
            assert "NameError" not in text and "AttributeError" not in text


def test_a_name_the_file_defines_is_not_called_missing(tmp_path):
    # forward meeting a NameError of the student's own (a typo) is the student's error, as raised
    source = REFERENCE.replace("merge_heads(context)", "merge_head(context)", 1)
    assert source != REFERENCE
    sub, student = start(tmp_path, source, "fork-process", Limits())
    try:
        with pytest.raises(StudentError) as raised:
            student.module(D, H, MAX_LEN)(torch.zeros(1, 4, D))
        assert raised.value.not_defined is None and raised.value.is_a("NameError")
        assert runner.classify(raised.value)["key"] == "raised"
    finally:
        student.close()
        sub.cleanup()
