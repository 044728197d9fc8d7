"""check_module.injected_steady: inject, then forward twice (module.param_count and
module.mask_buffer rest on it).  A forward that hangs, raises or is random leaves nothing
observed; an inject that fails is nothing observed before a step and the check's own failure
after one (scramble, then inject); after a forward that hung, inject still writes the weights."""
import pytest
import torch

from grader.judge.checks.public.check_module import D, H, fresh_weights, injected_steady
from grader.judge.checks.support import Verdict
from grader.judge.student import Student, StudentError
from grader.judge.workers import forked
from grader.sandbox.launch import Limits
import zygotes

SOURCE = '''
import time

import torch


class CausalSelfAttention(torch.nn.Module):
    """max_len picks a behaviour of forward: 8 right, 7 hangs, 6 raises, 5 random; 4 has no
    contract names to write through (inject refuses it)."""

    def __init__(self, d_model, n_heads, max_len=8):
        super().__init__()
        self.how = max_len
        self.qkv = torch.nn.Linear(d_model, 3 * d_model, bias=False)
        name = "out_proj" if max_len != 4 else "project_out"
        setattr(self, name, torch.nn.Linear(d_model, d_model, bias=False))
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x, return_weights=False):
        if self.how == 7:
            time.sleep(60)
        if self.how == 6:
            raise ValueError("no forward today")
        y = self.out_proj(x)
        if self.how == 5:
            y = y + torch.rand_like(y)
        weights = torch.ones(x.shape[0], 3, x.shape[1], x.shape[1])
        return (y, weights) if return_weights else y
'''


@pytest.fixture
def student(tmp_path):
    """A student whose workers are forked from the module's fork server (zygotes.server), a fresh
    one after a hang, not cold ones: what is judged here is injected_steady, not the worker's
    start."""
    (tmp_path / "attention.py").write_text(SOURCE)
    proxy = Student(str(tmp_path), limits=Limits(call_seconds=1.5, submission_seconds=60.0),
                    workers=forked(zygotes.server("process")))
    yield proxy
    proxy.close()


def inputs(seed=3):
    return fresh_weights(seed, 10), torch.randn(2, 5, D, generator=torch.Generator().manual_seed(seed))


def test_a_steady_forward_answers_after_the_judges_weights(student):
    weights, x = inputs()
    module = student.module(D, H, 8)
    y = injected_steady(module, weights, x)
    assert torch.allclose(y, x @ weights[3].T, atol=1e-6)  # out_proj holds the judge's W_o
    y, w = injected_steady(module, weights, x, return_weights=True, scramble=4)
    assert torch.allclose(y, x @ weights[3].T, atol=1e-6) and list(w.shape) == [2, 3, 5, 5]


@pytest.mark.parametrize("how", [6, 5])
def test_a_forward_that_raises_or_is_random_leaves_nothing_observed(student, how):
    weights, x = inputs()
    module = student.module(D, H, how)
    assert injected_steady(module, weights, x) is None
    assert injected_steady(module, weights, x, scramble=4) is None


def test_a_hang_leaves_nothing_observed_and_inject_still_writes_after_it(student):
    weights, x = inputs()
    assert injected_steady(student.module(D, H, 7), weights, x) is None
    assert "forward:" in student.poisoned
    module = student.module(D, H, 8)  # a right block, after forward hung once
    trips = student.round_trips
    assert injected_steady(module, weights, x, scramble=4) is None  # forward is not asked again
    assert student.round_trips == trips + 2  # scramble, then inject
    read = module.contract("read", d_model=D)
    assert torch.equal(read["o"], weights[3])  # the weights were still written


def test_an_inject_that_cannot_write_is_nothing_observed_before_a_step_and_fails_after(student):
    weights, x = inputs()
    module = student.module(D, H, 4)
    assert injected_steady(module, weights, x) is None
    with pytest.raises(Verdict) as failed:
        injected_steady(module, weights, x, scramble=4)
    assert failed.value.key == "unknown_layout"


def test_a_scramble_that_raises_is_the_checks_failure(student, monkeypatch):
    weights, x = inputs()
    module = student.module(D, H, 8)
    real = module.contract

    def contract(action, **args):  # the worker's scramble refusing, as a student's parameter could
        if action == "scramble":
            raise StudentError({"type": "RuntimeError", "message": "no"})
        return real(action, **args)

    monkeypatch.setattr(module, "contract", contract)
    assert injected_steady(module, weights, x) is not None
    with pytest.raises(StudentError):
        injected_steady(module, weights, x, scramble=4)


def test_module_causal_judges_its_own_weights_where_inject_cannot_write(student):
    """module.causal's block holds the judge's weights where inject writes them, and its own
    where inject raised or hung, now or in an earlier check: a failing inject is
    module.param_count's to judge, never module.causal's."""
    from grader.judge.checks.public.check_module import _holding_judges_weights
    from grader.sandbox.launch import WorkerFailure

    weights = fresh_weights(3, 85)  # what _holding_judges_weights draws for seed 3
    block = _holding_judges_weights(student, 3)
    assert torch.equal(block.contract("read", d_model=D)["o"], weights[3])
    student.poisoned["contract:inject"] = WorkerFailure("timeout", "inject hung before")
    trips = student.round_trips
    block = _holding_judges_weights(student, 3)
    assert student.round_trips == trips + 2  # two blocks: inject is not asked again
    assert not torch.equal(block.contract("read", d_model=D)["o"], weights[3])
    x = torch.randn(2, 5, D)
    assert list(block(x).shape) == [2, 5, D]  # and judged with its own weights
