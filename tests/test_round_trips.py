"""Several calls in one round trip (Student.request_all, worker.calls_of) answer exactly as the
same calls asked one by one: each call gets its own copy of its inputs, the calls after one that
raised are never made, an error names the call that raised, a hang poisons the kind of the call
that hung, and the follow-ups of `new` address the block it made."""
import os
import sys

import pytest
import torch

from grader.sandbox.launch import Limits, WorkerFailure
from grader.judge.student import Student, StudentError
from grader.sandbox.runtime import wire

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "grader", "sandbox", "runtime"))
import worker  # noqa: E402

SOURCE = '''
import time

import torch

made = []
ANSWER, OTHER, NEXT = 42, [1, 2], True
DEEP = [0]
for _ in range(40):
    DEEP = [DEEP]  # deeper than a frame may nest: it cannot be sent


def attend(q, k, v, mask=None, return_weights=False):
    q.mul_(2)  # in place: a second call must still get the judge's own q
    made.append("attend")
    return q.clone()


def split_heads(x, heads):
    made.append("split_heads")
    if heads == 0:
        raise ValueError("no heads")
    if heads < 0:
        time.sleep(60)
    return x


def calls_made():
    return list(made)


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, d_model, n_heads, max_len=16):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = torch.nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = torch.nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x, return_weights=False):
        return self.out_proj(x)
'''


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trips")
    (folder / "attention.py").write_text(SOURCE)
    proxy = Student(str(folder), limits=Limits(call_seconds=2.0, submission_seconds=60.0),
                    isolation="process")
    yield proxy
    proxy.close()


def made(student):
    return student.call("calls_made")


def test_the_calls_of_a_request_are_answered_under_consecutive_ids():
    more = [{"op": "call", "args": {}}] * 20 + ["junk"]
    ids = [reply_id for reply_id, _ in worker.calls_of({"id": 7, "op": "call", "more": more})]
    assert ids == list(range(7, 7 + wire.MAX_CALLS))  # at most MAX_CALLS, whatever is asked
    assert worker.calls_of({"id": 3, "op": "new", "more": ["junk"]})[1] == (4, {})
    assert worker.calls_of("junk") == [(None, {})]


def test_a_call_made_twice_gets_its_own_inputs_each_time(student):
    q = torch.arange(6.0).reshape(1, 1, 2, 3)
    first, second = student.attend_twice(q, q, q)
    # attend doubled its q in place: had both calls shared one tensor, the second would be 4q
    assert torch.equal(first, 2 * q) and torch.equal(second, 2 * q)
    assert torch.equal(q, torch.arange(6.0).reshape(1, 1, 2, 3))  # the judge's own is untouched


def test_the_calls_after_one_that_raised_are_never_made(student):
    before = len(made(student))
    x = torch.ones(1, 2, 3)
    calls = [("call", {"fn": "split_heads", "args": [x, 0]}),
             ("call", {"fn": "split_heads", "args": [x, 1]})]
    with pytest.raises(StudentError) as raised:
        student.request_all(calls)
    assert raised.value.call_index == 0 and raised.value.message == "no heads"
    assert made(student)[before:] == ["split_heads"]  # the second was not made
    with pytest.raises(StudentError) as raised:
        student.request_all(calls[::-1])
    assert raised.value.call_index == 1
    assert made(student)[before + 1:] == ["split_heads", "split_heads"]


def test_only_the_first_call_can_name_a_missing_function(student):
    def missing_after_a_call():
        return student.request_all([("call", {"fn": "calls_made"}), ("call", {"fn": "nowhere"})])

    with pytest.raises(StudentError) as raised:
        student._called("nowhere", missing_after_a_call)
    assert raised.value.not_defined is None  # a lookup after another call is no stub
    with pytest.raises(StudentError) as raised:
        student._called("nowhere", lambda: student.request_all([("call", {"fn": "nowhere"})]))
    assert raised.value.not_defined == "nowhere"


def test_the_follow_ups_of_new_address_the_block_it_made(student):
    w = [torch.randn(4, 4) for _ in range(4)]
    block, kind = student.module_then([4, 2, 8], "inject", d_model=4, q=w[0], k=w[1], v=w[2],
                                      o=w[3])
    assert kind == "fused"
    other = student.module(4, 2, 8)  # a later block: its own weights, not the injected ones
    read = block.contract("read", d_model=4)
    assert all(torch.equal(read[p], w[i]) for i, p in enumerate("qkvo"))
    assert not torch.equal(other.contract("read", d_model=4)["o"], w[3])


def test_a_block_and_the_calls_on_it_in_one_round_trip(student):
    x = torch.ones(1, 2, 4)
    trips = student.round_trips
    block, (y,) = student.module_calls([4, 2, 8], [("forward", {"x": x})])
    assert student.round_trips == trips + 1 and tuple(y.shape) == (1, 2, 4)
    with pytest.raises(StudentError) as raised:  # forward of a wrong width raises
        student.module_calls([4, 2, 8], [("forward", {"x": torch.ones(1, 2, 5)}),
                                         ("forward", {"x": x})])
    assert raised.value.call_index == 0  # the first of the calls
    assert tuple(raised.value.block(x).shape) == (1, 2, 4)  # the block it made is still there
    with pytest.raises(StudentError) as raised:
        student.module_calls([4, 2, -1], [("forward", {"x": x})])  # no mask of length -1
    assert raised.value.call_index == -1 and not hasattr(raised.value, "block")


def test_each_constant_is_read_once_and_one_unreadable_name_fails_only_its_own(student):
    trips = student.round_trips
    assert student.constants(["ANSWER"], along=["OTHER"]) == {"ANSWER": 42}
    other = student.constants(["OTHER"])
    assert other == {"OTHER": [1, 2]} and student.round_trips == trips + 1  # kept, not asked
    other["OTHER"].append(3)
    assert student.constants(["OTHER"]) == {"OTHER": [1, 2]}  # a check gets its own copy
    # NEXT asked along with DEEP, which cannot be sent: NEXT is asked again, alone
    assert student.constants(["NEXT"], along=["DEEP"]) == {"NEXT": True}
    assert student.round_trips == trips + 3
    with pytest.raises(StudentError):
        student.constants(["DEEP"])
    assert student.constants(["NOWHERE"]) == {"NOWHERE": {"$missing": True}}


def test_one_function_on_several_arguments_in_one_round_trip(student):
    x = torch.ones(1, 2, 3)
    trips = student.round_trips
    first, second = student.call_each("split_heads", [x, 1], [2 * x, 3])
    assert student.round_trips == trips + 1
    assert torch.equal(first, x) and torch.equal(second, 2 * x)
    with pytest.raises(StudentError) as raised:  # the second raises: the first's answer is kept
        student.call_each("split_heads", [x, 1], [x, 0])
    assert raised.value.call_index == 1 and torch.equal(raised.value.answers[0], x)
    with pytest.raises(StudentError) as raised:  # a name the file lacks is no attempt
        student.call_each("nowhere", [x], [x])
    assert raised.value.not_defined == "nowhere"


def test_a_follow_up_past_the_budget_fails_as_one_asked_then_would(student, monkeypatch):
    real = student._reply

    def reply(timeout, follow_up=False):
        if follow_up:  # the first answer used the budget up
            monkeypatch.setattr(student, "_left", lambda: 0.0)
        return real(timeout, follow_up)

    monkeypatch.setattr(student, "_reply", reply)
    with pytest.raises(WorkerFailure) as failed:
        student.request_all([("call", {"fn": "calls_made"}), ("call", {"fn": "calls_made"})])
    assert failed.value.kind == "budget"
    assert student.worker is None  # its answer to the follow-up can never meet another request


def test_a_hang_poisons_the_kind_of_the_call_that_hung(student):
    x = torch.ones(1, 2, 3)
    with pytest.raises(WorkerFailure) as failed:
        student.request_all([("call", {"fn": "calls_made"}),
                             ("call", {"fn": "split_heads", "args": [x, -1]})])
    assert failed.value.kind == "timeout"
    # the failure names the call waited for, and keeps what the calls before it answered
    assert failed.value.call_index == 1 and len(failed.value.answers) == 1
    assert "call:split_heads" in student.poisoned and "call:calls_made" not in student.poisoned
    assert made(student) == []  # a new worker: the kind that answered still runs
    with pytest.raises(WorkerFailure) as refused:
        student.split_heads(x, 1)  # the kind that hung fails at once, as one by one
    assert not hasattr(refused.value, "call_index")  # refused before anything was sent

