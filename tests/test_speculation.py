"""The checks' first requests asked ahead (grader/judge/speculation.py): a grading gives the same
verdicts as one that asks check by check, in fewer round trips; a speculation that goes wrong is
forgotten, never charged to the budget nor reported; an answer kept is used only for the same
request, by value, to the worker that gave it, once."""
import json
import os
from pathlib import Path

import pytest
import torch

from grader.judge import runner, speculation
from grader.judge.checks.support import Verdict, judged_maps, record_judged
from grader.judge.service import Judge
from grader.judge.student import Student, StudentError
from grader.sandbox.launch import Limits, WorkerFailure

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
# The reference, correct files in other styles (four projections, einsum, helpers), wrong ones
# whose checks fail on values, raise, or hold the stub's NotImplementedError, a random one (its
# numbers follow the worker's random state, so only its verdicts' keys are compared), one that
# kills its worker in attend, one that cannot be imported.
SAMPLE = {
    "reference": ROOT / "solutions" / "attention.py",
    "stub": ROOT / "exercises" / "attention.py",
    "separate_projections": SUBMISSIONS / "correct" / "separate_projections.py",
    "einsum": SUBMISSIONS / "correct" / "einsum.py",
    "helpers_and_classes": SUBMISSIONS / "correct" / "helpers_and_classes.py",
    "scores_transposed": SUBMISSIONS / "wrong" / "scores_transposed.py",
    "merge_no_transpose": SUBMISSIONS / "wrong" / "merge_no_transpose.py",
    "softmax_no_dim": SUBMISSIONS / "wrong" / "softmax_no_dim.py",
    "mask_off_by_one": SUBMISSIONS / "wrong" / "mask_off_by_one.py",
    "attend_dropout_functional": SUBMISSIONS / "wrong" / "attend_dropout_functional.py",
    "os_exit_in_attend": SUBMISSIONS / "hostile" / "os_exit_in_attend.py",
    "exit_at_import": SUBMISSIONS / "hostile" / "exit_at_import.py",
}
RANDOM = {"attend_dropout_functional"}


def verdicts(data, keys_only=False):
    """(check id, status, score, each part's verdict) of a report; `keys_only`: the verdicts'
    keys without their fields (a random file's numbers)."""
    rows = []
    for check in data["checks"]:
        said = check.get("verdicts") or []
        said = [v.get("key") if keys_only else json.dumps(v, sort_keys=True) for v in said]
        rows.append((check["id"], check["status"], check["score"], tuple(said)))
    return rows


def graded(path, ask_ahead, limits=None):
    """(report data, the student proxy) of one grading on a judge of its own."""
    judge = Judge(limits or Limits(), "auto", start="auto")
    try:
        if not ask_ahead:
            saved, runner.KitPlugin.ask_ahead = runner.KitPlugin.ask_ahead, lambda *a: None
        try:
            sub, student = judge.begin(str(path))
            return judge.finish(sub, student), student
        finally:
            if not ask_ahead:
                runner.KitPlugin.ask_ahead = saved
    finally:
        judge.close()


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_a_grading_gives_the_verdicts_of_asking_check_by_check(name):
    ahead, _ = graded(SAMPLE[name], ask_ahead=True)
    alone, _ = graded(SAMPLE[name], ask_ahead=False)
    assert verdicts(ahead, name in RANDOM) == verdicts(alone, name in RANDOM)
    assert ahead["score"] == alone["score"]
    assert ahead["metadata"]["worker_events"] == alone["metadata"]["worker_events"]


def test_the_reference_is_answered_from_ahead_in_fewer_round_trips():
    _, ahead = graded(SAMPLE["reference"], ask_ahead=True)
    _, alone = graded(SAMPLE["reference"], ask_ahead=False)
    assert ahead.round_trips <= alone.round_trips - 30
    assert not ahead.ahead_failed and ahead.starts == alone.starts == 1


def test_a_hang_met_ahead_is_forgotten_uncharged_and_unreported(monkeypatch):
    # attend never returns: asked ahead, it is waited for AHEAD_SECONDS at most, then everything
    # asked ahead is dropped and the checks meet the hang themselves, as without speculation.
    charged = []  # (budget, reserve, by kind) before and after each ask
    ask = Student.ask_ahead

    def recording(self, plans, seconds):
        before = (self.spent, self.reserve_spent, dict(self.spent_by_kind), len(self.events))
        ask(self, plans, seconds)
        charged.append((before, (self.spent, self.reserve_spent, dict(self.spent_by_kind),
                                 len(self.events))))

    monkeypatch.setattr(Student, "ask_ahead", recording)
    limits = Limits(call_seconds=1.5, submission_seconds=60.0)
    path = SUBMISSIONS / "hostile" / "infinite_loop_in_attend.py"
    ahead, student = graded(path, ask_ahead=True, limits=limits)
    alone, other = graded(path, ask_ahead=False, limits=limits)
    assert student.ahead_failed and student.max_starts == other.max_starts + 1
    assert verdicts(ahead) == verdicts(alone)
    assert ahead["metadata"]["worker_events"] == alone["metadata"]["worker_events"]
    # what was waited for ahead is not the student's time, nor an event of the report
    assert charged and all(before == after for before, after in charged)


# -- the dry run ------------------------------------------------------------------------------
def offline_student(tmp_path):
    """A Student with no worker started (none is ever needed by a dry run)."""
    student = Student(str(tmp_path))
    student.seed = 7
    return student


def check_that_asks(student, seed):
    q = torch.randn(1, 1, 3, 4, generator=torch.Generator().manual_seed(seed))
    record_judged(student, "probe", q, q, q, None)
    return student.attend_twice(q, q, q, return_weights=True)


def test_the_dry_run_stops_at_the_first_request_and_touches_nothing(tmp_path):
    student = offline_student(tmp_path)
    double = speculation.stand_in(student)
    calls = speculation.first_request(check_that_asks, ["student", "seed"], {}, double)
    assert calls is not None
    assert [op for op, _ in calls] == ["call", "call"]
    assert calls[0][1]["fn"] == "attend" and calls[0][1]["kwargs"]["return_weights"] is True
    # nothing was sent, started or recorded on the student itself
    assert student.worker is None and student.round_trips == 0 and student.next_id == 0
    assert judged_maps(student) == {}


def test_a_check_that_ends_before_asking_or_asks_afresh_is_not_asked_ahead(tmp_path):
    student = offline_student(tmp_path)

    def judged_before_asking(student, seed):
        raise Verdict("wrong_type", expected="x", got="y")

    def skipped(student, seed):
        pytest.skip("not here")

    def asks_nothing(student, seed):
        return None

    def asks_afresh(student, seed):
        return student.request("forward", afresh=True, handle=1, x=torch.zeros(1))

    def asks_with_a_timeout_of_its_own(student, seed):
        return student.train_copy(seed=0, n_heads=4, timeout=20)

    double = speculation.stand_in(student)
    for check in (judged_before_asking, skipped, asks_nothing, asks_afresh,
                  asks_with_a_timeout_of_its_own):
        assert speculation.first_request(check, ["student", "seed"], {}, double) is None


def attend_call(op="call", fn="attend", first=None, mask=None, t=(1, 2.5)):
    x = torch.arange(6.0).reshape(2, 3)
    return [(op, {"fn": fn, "args": [x if first is None else first, x],
                  "kwargs": {"mask": mask, "t": t}})]


def test_same_calls_compares_every_argument_by_value():
    x = torch.arange(6.0).reshape(2, 3)
    call = attend_call()
    assert speculation.same_calls(call, attend_call(first=x.clone()))
    for changed in (attend_call(fn="split_heads"), attend_call(op="new"),
                    attend_call(first=x + 1), attend_call(first=x.double()),
                    attend_call(first=x.reshape(3, 2)), attend_call(t=[1, 2.5]),
                    attend_call(t=(True, 2.5)), attend_call(mask=False), call * 2):
        assert not speculation.same_calls(call, changed)
    nan = [("call", {"args": [float("nan")]})]
    assert speculation.same_calls(nan, [("call", {"args": [float("nan")]})])
    with_nan = [("call", {"args": [torch.tensor([float("nan")])]})]
    assert not speculation.same_calls(with_nan, with_nan)  # never taken for the same: asked again
    assert not speculation.same_calls(attend_call(), attend_call(first=x.to("meta")))


# -- answering from what was asked ahead ------------------------------------------------------
class FakeWorker:
    """Enough of a worker for Student._stop: killed, with nothing printed."""

    class Output:
        def text(self):
            return ""

    def __init__(self):
        self.killed = False
        self.stdout = self.stderr = self.Output()

    def kill(self):
        self.killed = True


def answered_ahead(tmp_path, outcomes, limits=None):
    """A student with a fake worker and `outcomes` kept for check "c" asking attend(x)."""
    student = Student(str(tmp_path), limits=limits)
    student.worker, student.hello_pending = FakeWorker(), False
    calls = [("call", {"fn": "attend", "args": [torch.ones(2)], "kwargs": {}, "views": []})]
    student.ahead = {"c": (student.worker, calls, outcomes)}
    return student


def test_an_answer_kept_is_used_once_for_the_same_request(tmp_path):
    student = answered_ahead(tmp_path, [({"id": 1, "ok": 5}, 0.25)])
    student.expect("c")
    assert student.call("attend", torch.ones(2)) == 5
    assert student.spent == pytest.approx(0.25) and student.spent_by_kind == {"call:attend": 0.25}
    assert student.round_trips == 0
    student.expect("c")  # used: nothing is kept for it any more
    assert student.planned is None


def test_a_kept_error_is_raised_as_the_call_would_raise_it(tmp_path):
    error = {"type": "ValueError", "mro": ["ValueError", "Exception"], "message": "no", "line": 3}
    student = answered_ahead(tmp_path, [({"id": 1, "error": error}, 0.01)])
    student.expect("c")
    with pytest.raises(StudentError) as raised:
        student.call("attend", torch.ones(2))
    assert raised.value.type == "ValueError" and raised.value.line == 3
    assert raised.value.call_index == 0 and raised.value.answers == []


def test_an_answer_for_another_request_or_another_worker_is_not_used(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(Student, "_send", lambda self, calls: asked.append(calls))
    monkeypatch.setattr(Student, "_reply", lambda self, timeout, follow_up=False: "asked")
    student = answered_ahead(tmp_path, [({"id": 1, "ok": 5}, 0.01)])
    student.expect("c")
    assert student.call("attend", torch.zeros(2)) == "asked"  # other values: asked for real
    student = answered_ahead(tmp_path, [({"id": 1, "ok": 5}, 0.01)])
    student.worker = FakeWorker()  # replaced since: what the old one answered is not used
    student.expect("c")
    assert student.call("attend", torch.ones(2)) == "asked"
    student = answered_ahead(tmp_path, [({"id": 1, "ok": 5}, 0.01)])
    assert student.call("attend", torch.ones(2)) == "asked"  # not expected: no check's first
    assert len(asked) == 3


def test_an_answer_slower_than_the_time_left_now_is_a_timeout(tmp_path):
    # Asked now, the call would have been given the 0.1 s left of the budget and timed out.
    limits = Limits(call_seconds=5.0, submission_seconds=1.0)
    student = answered_ahead(tmp_path, [({"id": 1, "ok": 5}, 0.5)], limits)
    student.spent = 0.9
    worker = student.worker
    student.expect("c")
    with pytest.raises(WorkerFailure) as failed:
        student.call("attend", torch.ones(2))
    assert failed.value.kind == "timeout" and worker.killed and student.worker is None
    assert student.events == [{"kind": "timeout", "message": "no answer within 0.1 s"}]
    assert "call:attend" in student.poisoned  # a timeout poisons its kind, as asked now


def test_answers_beyond_what_is_kept_are_asked_by_their_checks(monkeypatch):
    # A file whose answers are large has only the first of them kept (the judge holds no more of
    # them at once than when each check asks); the others' checks ask, with the same verdicts.
    from grader.judge import student as student_module

    _, whole = graded(SAMPLE["reference"], ask_ahead=True)
    monkeypatch.setattr(student_module, "AHEAD_KEEP_BYTES", 3000)
    capped, student = graded(SAMPLE["reference"], ask_ahead=True)
    alone, _ = graded(SAMPLE["reference"], ask_ahead=False)
    assert verdicts(capped) == verdicts(alone) and capped["score"] == alone["score"]
    assert whole.round_trips < student.round_trips and not student.ahead_failed
