"""Hidden checks of attend and merge_heads against the reference, with named mistakes."""
import pytest
import torch

from grader.judge.secret.reference import ref
from grader.judge.secret.variants import ATTEND_VARIANTS, attend_variant, merge
from grader.judge.checks.support import (Verdict, causal_mask, close, expect_close, fmt, leak_map, randn, shaped,
                       tensor)

T, D_HEAD = 5, 4
SHAPES = {"2-D": (), "3-D": (2,), "4-D": (2, 3)}


def attend_both(student, q, k, v, mask=None):
    out = student.attend(q, k, v, mask=mask, return_weights=True)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(context, weights)", got=type(out).__name__)
    return tensor(out[0]), tensor(out[1])


@pytest.mark.check("attend.reference")
@pytest.mark.parametrize("rank", list(SHAPES))
def test_matches_reference(student, rank):
    lead = SHAPES[rank]
    q, k, v = (randn(*lead, T, D_HEAD, seed=100 + i) for i in range(3))
    expected, expected_w = ref.attend(q, k, v, return_weights=True)
    context = student.attend(q, k, v)
    got = shaped(context, expected.shape, f"attend on {rank} input {list(q.shape)}")
    if not close(got, expected):
        variants = [(name, attend_variant(name, q, k, v)[0]) for name in ATTEND_VARIANTS]
        try:
            _, weights = attend_both(student, q, k, v)
            heat = leak_map(weights, causal_mask(T)) if weights.shape == expected_w.shape else ""
        except Exception:  # the context is what is graded here; the heatmap is a courtesy
            heat = ""
        try:
            expect_close(got, expected, f"context ({rank})", variants)
        except Verdict as verdict:
            verdict.heatmap = heat
            raise


@pytest.mark.check("attend.reference")
def test_weights_match_reference(student):
    q, k, v = (randn(2, 3, T, D_HEAD, seed=110 + i) for i in range(3))
    _, expected_w = ref.attend(q, k, v, return_weights=True)
    _, weights = attend_both(student, q, k, v)
    variants = [(name, attend_variant(name, q, k, v)[1]) for name in ATTEND_VARIANTS]
    scores = q @ k.transpose(-2, -1) / D_HEAD ** 0.5
    variants.append(("weights_prescores", scores.masked_fill(~causal_mask(T), float("-inf"))))
    expect_close(weights, expected_w, "weights (4-D)", variants)


@pytest.mark.check("attend.zero_scores")
def test_zero_scores(student):
    q = k = torch.zeros(1, 2, T, D_HEAD)
    v = randn(1, 2, T, D_HEAD, seed=120)
    _, weights = attend_both(student, q, k, v)
    expected = causal_mask(T).double() / torch.arange(1, T + 1).double()[:, None]  # 1/(i+1)
    weights = shaped(weights, [1, 2, T, T], "weights")
    if not close(weights, expected.float().expand(1, 2, T, T), atol=1e-5):
        raise Verdict("mask_from_values", heatmap=leak_map(weights, causal_mask(T)),
                      detail=f"q = k = 0: row 1 expected [0.5, 0.5, 0, 0, 0], "
                             f"got {fmt(weights[0, 0, 1])}")


@pytest.mark.check("merge_heads.non_contiguous")
def test_non_contiguous_input(student):
    # Sent as [B,T,d,H] and permuted to [B,H,T,d] in the worker: still strided after the
    # student's own transpose(1, 2), so a bare .view fails where .reshape works.
    heads = randn(2, 5, 4, 3, seed=130)
    expected = merge(heads.permute(0, 3, 1, 2))
    try:
        got = student.call("merge_heads", heads, views=[(0, [0, 3, 1, 2])])
    except Exception as exc:
        message = getattr(exc, "message", "")
        if "view" in message or "contiguous" in message:
            raise Verdict("view_non_contiguous", message=message[:200]) from None
        raise
    expect_close(got, expected, "merge_heads(non-contiguous x)")
