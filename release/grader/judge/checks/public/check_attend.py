"""Public checks of attend: √d scaling, causality, softmax rows, an explicit mask, return values,
and the lesson's own check that one batched call equals the per-head loop."""
import pytest
import torch

from grader.judge.checks.support import (Verdict, causal_mask, close, first_difference, fmt, leak_map, randn,
                       shaped, tensor, weights_diagnosis)

# Distinct sizes: B, H, T, d all differ, and T != d.
B, H, T, D_HEAD = 2, 3, 5, 4


def qkv(seed, *lead):
    return tuple(randn(*lead, T, D_HEAD, seed=seed + i) for i in range(3))


def looks_causal(weights):
    """Weights [..., T, T] laid out as the causal default: the whole lower triangle read, nothing
    above it.  Given an explicit mask that allows more (or other) cells, it was ignored."""
    allowed = causal_mask(weights.shape[-1])
    return (not torch.isnan(weights).any() and bool((weights[..., ~allowed] == 0).all())
            and bool((weights[..., allowed] > 0).all()))


def weights_of(student, q, k, v, mask=None):
    out = student.attend(q, k, v, mask=mask, return_weights=True)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(context, weights)", got=type(out).__name__)
    context, weights = out
    return tensor(context), shaped(weights, list(q.shape[:-1]) + [k.shape[-2]], "weights")


@pytest.mark.check("attend.scale")
def test_scale_by_sqrt_d(student):
    # Row 1 reads both positions: scores [q1·k0, q1·k1] / √4 = [2, 0] / 2 = [1, 0].
    q = torch.tensor([[0.0, 0, 0, 0], [2.0, 0, 0, 0]])
    k = torch.tensor([[1.0, 0, 0, 0], [0.0, 0, 0, 0]])
    v = torch.eye(2, 4)  # context row = weights row, padded with zeros
    got = shaped(student.attend(q, k, v), [2, 4], "attend(q[2,4], k, v)")
    expected = torch.softmax(torch.tensor([1.0, 0.0]), dim=-1)  # [0.7311, 0.2689]
    if not close(got[1, :2], expected):
        named = {"scale_none": [2.0, 0.0], "scale_multiplied": [4.0, 0.0], "scale_by_d": [0.5, 0.0]}
        key = "wrong_values"
        for name, scores in named.items():
            if close(got[1, :2], torch.softmax(torch.tensor(scores), dim=-1)):
                key = name
        raise Verdict(key, where="row 1 ", expected=fmt(expected), got=fmt(got[1, :2]),
                      detail=f"row 1 weights: expected {fmt(expected)} (scores [1, 0]), "
                             f"got {fmt(got[1, :2])}")


@pytest.mark.check("attend.causal")
def test_weights_upper_triangle_is_zero(student):
    q, k, v = qkv(20, B, H)
    _, weights = weights_of(student, q, k, v)
    allowed = causal_mask(T)
    if (weights[..., ~allowed] != 0).any() or torch.isnan(weights).any():
        # Filling the future with 0 instead of -inf leaks too; the weights tell the two apart.
        scores = q @ k.transpose(-2, -1) / D_HEAD ** 0.5  # [B,H,T,T]
        filled_with_zero = torch.softmax(scores.masked_fill(~allowed, 0.0), dim=-1)
        key = "mask_fill_zero" if close(weights, filled_with_zero) else \
            weights_diagnosis(weights, allowed) or "mask_missing"
        raise Verdict(key,
                      heatmap=leak_map(weights, allowed), where="weights[0, 0] ",
                      detail="weights[0, 0] (rows = query position, columns = key position; "
                             "! = should be 0):")


@pytest.mark.check("attend.causal")
@pytest.mark.parametrize("t", [0, 2])
def test_future_does_not_change_the_past(student, t):
    q, k, v = qkv(30, B, H)
    k2, v2 = k.clone(), v.clone()
    k2[..., t + 1:, :] += 3.0
    v2[..., t + 1:, :] -= 5.0
    before = shaped(student.attend(q, k, v), [B, H, T, D_HEAD], "attend(q, k, v)")
    after = shaped(student.attend(q, k2, v2), [B, H, T, D_HEAD], "attend(q, k', v')")
    if torch.isnan(before).any():  # NaN is its own mistake (attend.softmax names it), not a leak
        raise Verdict("nan", where="context", detail=f"context[0, 0] = {fmt(before[0, 0])}")
    if not close(before[..., :t + 1, :], after[..., :t + 1, :]):
        scores = q @ k.transpose(-2, -1) / D_HEAD ** 0.5  # [B,H,T,T]
        filled_with_zero = torch.softmax(scores.masked_fill(~causal_mask(T), 0.0), dim=-1) @ v
        key = "mask_fill_zero" if close(before, filled_with_zero) else "mask_missing"
        raise Verdict(key, detail=f"k, v changed after position {t}: context at "
                      f"position {t} moved from {fmt(before[0, 0, t])} to {fmt(after[0, 0, t])}")


@pytest.mark.check("attend.softmax")
@pytest.mark.parametrize("gain", [1.0, 100.0])
def test_rows_sum_to_one(student, gain):
    q, k, v = qkv(40, B, H)
    _, weights = weights_of(student, q * gain, k, v)
    allowed = causal_mask(T)
    rows = weights.double().sum(dim=-1)
    if torch.isnan(weights).any() or not close(rows, torch.ones_like(rows), atol=1e-4):
        raise Verdict(weights_diagnosis(weights, allowed) or "nan", where="weights[0, 0]",
                      heatmap=leak_map(weights, allowed),
                      detail=f"q×{gain:g}: row sums of weights[0, 0] = {fmt(rows[0, 0])}:")


@pytest.mark.check("attend.mask_arg")
def test_explicit_band_mask(student):
    q, k, v = qkv(50, B, H)
    band = causal_mask(T) & ~torch.ones(T, T, dtype=torch.bool).tril(-2)  # reads itself and one back
    _, weights = weights_of(student, q, k, v, mask=band)
    if torch.isnan(weights).any() or (weights[..., ~band] != 0).any():
        if looks_causal(weights):
            raise Verdict("mask_arg_ignored", heatmap=leak_map(weights, band),
                          detail="mask = itself and one position back; ! = should be 0:")
        raise Verdict("wrong_values", where="weights[0, 0] with a band mask ", expected="0 off the band",
                      got="non-zero", heatmap=leak_map(weights, band),
                      detail="mask = itself and one position back; ! = should be 0:")
    rows = weights.double().sum(dim=-1)
    if not close(rows, torch.ones_like(rows), atol=1e-4):
        raise Verdict("mask_after_softmax", heatmap=leak_map(weights, band),
                      detail=f"row sums {fmt(rows[0, 0])}")


@pytest.mark.check("attend.mask_arg")
def test_all_visible_mask(student):
    q, k, v = qkv(55, B, H)
    everything = torch.ones(1, 1, T, T, dtype=torch.bool)  # broadcast over [B,H]
    _, weights = weights_of(student, q, k, v, mask=everything)
    if not (weights[..., ~causal_mask(T)] > 0).all():
        raise Verdict("mask_arg_ignored" if looks_causal(weights) else "wrong_values",
                      where="weights[0, 0] with an all-True mask ",
                      expected="every weight > 0", got="zeros above the diagonal",
                      heatmap=leak_map(weights, torch.ones(T, T, dtype=torch.bool)),
                      detail="an explicit mask replaces the causal default:")


@pytest.mark.check("attend.return_weights")
def test_return_values(student):
    q, k, v = qkv(60, B, H)
    shaped(student.attend(q, k, v), [B, H, T, D_HEAD], "attend(q, k, v)")
    context, weights = weights_of(student, q, k, v)
    shaped(context, [B, H, T, D_HEAD], "context")
    shaped(weights, [B, H, T, T], "weights")


@pytest.mark.check("attend.batched_vs_loop")
def test_batched_equals_loop(student):
    q, k, v = qkv(70, B, H)
    batched = shaped(student.attend(q, k, v), [B, H, T, D_HEAD], "attend(q[2,3,5,4], ...)")
    per_head = [shaped(student.attend(q[:, h], k[:, h], v[:, h]), [B, T, D_HEAD], f"head {h}")
                for h in range(H)]
    looped = torch.stack(per_head, dim=1)
    # Equal NaNs count as equal here: this check is about batching, not about the mask.
    if not torch.allclose(batched.double(), looped.double(), atol=1e-5, rtol=1e-4, equal_nan=True):
        # Each head alone is right or wrong the same way in both; a difference means the heads
        # (or samples) are not independent, or the code does not treat the leading axes alike.
        index, got, expected = first_difference(batched, looped)
        raise Verdict("heads_mixed", detail=f"context{list(index)}: per-head loop {expected:.4f}, "
                      f"batched {got:.4f}")
