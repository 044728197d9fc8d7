"""One call, one round trip (Student.request, worker.answering): each call gets its own copy of
its inputs, a name the file lacks is no attempt, a block is addressed by its handle, a hang
poisons the kind of the call that hung, and each constant is read once."""
import pytest
import torch

from grader.sandbox.launch import Limits, WorkerFailure
from grader.judge.student import Student, StudentError
from grader.sandbox.runtime import worker

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


def test_the_worker_answers_each_request_under_its_own_id():
    sent = []
    answer = worker.answering({"echo": lambda value: value}, sent.append, ValueError, "x.py",
                              None, describe=lambda exc, *_: type(exc).__name__)
    answer({"id": 3, "op": "echo", "args": {"value": 1}})
    answer({"id": 4, "op": "nowhere"})
    answer("junk")
    assert sent == [{"id": 3, "ok": 1}, {"id": 4, "error": "ValueError"},
                    {"id": None, "error": "ValueError"}]


def test_a_call_made_twice_gets_its_own_inputs_each_time(student):
    q = torch.arange(6.0).reshape(1, 1, 2, 3)
    first, second = student.attend(q, q, q), student.attend(q, q, q)
    # attend doubled its q in place: had both calls shared one tensor, the second would be 4q
    assert torch.equal(first, 2 * q) and torch.equal(second, 2 * q)
    assert torch.equal(q, torch.arange(6.0).reshape(1, 1, 2, 3))  # the judge's own is untouched


def test_a_missing_function_is_no_attempt(student):
    with pytest.raises(StudentError) as raised:
        student.call("nowhere")
    assert raised.value.not_defined == "nowhere"


def test_each_block_is_addressed_by_its_handle(student):
    w = [torch.randn(4, 4) for _ in range(4)]
    block = student.module(4, 2, 8)
    assert block.contract("inject", d_model=4, q=w[0], k=w[1], v=w[2], o=w[3]) == "fused"
    other = student.module(4, 2, 8)  # a later block: its own weights, not the injected ones
    read = block.contract("read", d_model=4)
    assert all(torch.equal(read[p], w[i]) for i, p in enumerate("qkvo"))
    assert not torch.equal(other.contract("read", d_model=4)["o"], w[3])
    with pytest.raises(StudentError):  # forward of a wrong width raises; the block stays
        block(torch.ones(1, 2, 5))
    assert tuple(block(torch.ones(1, 2, 4)).shape) == (1, 2, 4)


def test_each_constant_is_read_once_and_one_unreadable_name_fails_only_its_own(student):
    trips = student.round_trips
    assert student.constants(["ANSWER", "OTHER"]) == {"ANSWER": 42, "OTHER": [1, 2]}
    other = student.constants(["OTHER"])
    assert other == {"OTHER": [1, 2]} and student.round_trips == trips + 1  # kept, not asked
    other["OTHER"].append(3)
    assert student.constants(["OTHER"]) == {"OTHER": [1, 2]}  # a check gets its own copy
    assert student.constants(["NEXT"]) == {"NEXT": True}
    assert student.round_trips == trips + 2
    with pytest.raises(StudentError):
        student.constants(["DEEP"])
    assert student.constants(["NOWHERE"]) == {"NOWHERE": {"$missing": True}}


def test_a_hang_poisons_the_kind_of_the_call_that_hung(student):
    x = torch.ones(1, 2, 3)
    with pytest.raises(WorkerFailure) as failed:
        student.split_heads(x, -1)
    assert failed.value.kind == "timeout"
    # the worker told where the call was while it ran: the timeout names the student's line
    assert failed.value.fields["where"].endswith("time.sleep(60)")
    assert "call:split_heads" in student.poisoned and "call:calls_made" not in student.poisoned
    assert made(student) == []  # a new worker: the kind that did not hang still runs
    trips = student.round_trips
    with pytest.raises(WorkerFailure):
        student.split_heads(x, 1)  # the kind that hung fails at once
    assert student.round_trips == trips  # refused before anything was sent
