"""Public checks of attend, judged by what attention must give (support.weights_problem), on
inputs drawn fresh for each grading after the lesson's small example.  Shape, row sums and zeros
gate and explain; a point needs weights computed from q·kᵀ.  Every call is sized and asked as
questions.py says."""
import math

import pytest
import torch

from grader.judge.checks import questions
from grader.judge.checks.questions import B, D_HEAD, H, T
from grader.judge.checks.support import (Verdict, causal_mask, close, differing,
                                         fresh_randn, leak_map, num, record_judged, same, shaped,
                                         softmax_axis, weights_factor, weights_problem)


def fresh_qkv(seed, salt, lead=(B, H), d_v=None):
    """q, k [*lead, T, d] and v [*lead, T, d_v], drawn for this grading; d_v from
    questions.v_width unless given (`lead`: docs/building.md's recipe asks a 5-D input)."""
    d_v = questions.v_width(seed, salt) if d_v is None else d_v
    return (fresh_randn(*lead, T, D_HEAD, seed=seed, salt=salt),
            fresh_randn(*lead, T, D_HEAD, seed=seed, salt=salt + 1),
            fresh_randn(*lead, T, d_v, seed=seed, salt=salt + 2))


def attend_judged(student, q, k, v, mask=None, probe=None):
    """attend(q, k, v, mask, return_weights=True) -> (context, weights), shapes checked; the
    weights of a `probe` are the ones the feedback page draws."""
    if probe:
        record_judged(student, probe, q, k, v, mask)
    out = questions.attend(student, q, k, v, mask=mask, return_weights=True)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(context, weights)", got=type(out).__name__)
    context = shaped(out[0], list(q.shape[:-1]) + [v.shape[-1]])
    weights = shaped(out[1], list(q.shape[:-1]) + [k.shape[-2]])
    if probe:
        record_judged(student, probe, q, k, v, mask, weights)
    return context, weights


def named(weights, allowed, q, k, otherwise):
    """A Verdict naming what the weights show (or `otherwise`, what was seen), with the map."""
    return Verdict(weights_problem(weights, allowed, q, k) or otherwise,
                   heatmap=leak_map(weights, allowed, q, k))


def attention_gate(context, weights, q, k, v, allowed, factor=False):
    """No point without attention: the weights follow q·kᵀ (some factor > 0; attend.scale judges
    it) and the context is weights @ v.  `factor`: weights_factor's answer, where known."""
    if factor is False:
        factor = weights_factor(weights, q, k, allowed)
    if factor is None:
        raise named(weights, allowed, q, k, "weights_not_from_scores")
    expected = weights.double() @ v.double()  # [..., T, d_v]
    if bool(torch.isfinite(weights).all()) and not close(context, expected):
        raise Verdict("context_not_weights_v", **differing(context, expected, "context", end=""))


def looks_causal(weights):
    """Weights [..., T, T] laid out as the causal default (given another mask, it was ignored)."""
    allowed = causal_mask(weights.shape[-1])
    return (not torch.isnan(weights).any() and bool((weights[..., ~allowed] == 0).all())
            and bool((weights[..., allowed] > 0).all()))


# A small example first, d = 4 and q = k (so q·kᵀ is symmetric): q0 = [1,0,0,0], q1 = [1,1,0,0];
# row 1 scores [1, 2] / √4 = [0.5, 1], weights softmax([0.5, 1]) = [0.3775, 0.6225].  v is the
# 2×2 identity padded to width 3 (T = 2, d = 4 and v's width 3 all differ, so √T, √d and √(v's
# width) give three different factors): context row 1 = weights row 1, then a 0.
EXAMPLE_Q = torch.tensor([[[[1.0, 0, 0, 0], [1.0, 1.0, 0, 0]]]])  # [1,1,2,4]
EXAMPLE_V = torch.eye(2, 3).reshape(1, 1, 2, 3)
# Factors the scores were multiplied by instead of 1/√d, and the mistake each one is.
WRONG_FACTORS = {"scale_none": lambda d, d_v, t: 1.0,
                 "scale_multiplied": lambda d, d_v, t: math.sqrt(d),
                 "scale_by_d": lambda d, d_v, t: 1 / d,
                 "scale_from_v": lambda d, d_v, t: 1 / math.sqrt(d_v),
                 "scale_from_t": lambda d, d_v, t: 1 / math.sqrt(t)}


def judge_scale(context, weights, q, k, v, example=False):
    """The factor the weights show is 1/√d.  On the two-position example only one row can show
    it: weights with another mistake there are left to the fresh input."""
    allowed = causal_mask(q.shape[-2])
    problem = weights_problem(weights, allowed, q, k)
    factor = weights_factor(weights, q, k, allowed)
    if example and (problem is not None or factor is None):
        return
    if problem in ("scale_after_softmax", "weights_prescores"):
        raise Verdict(problem, heatmap=leak_map(weights, allowed, q, k))
    if factor is None:
        raise named(weights, allowed, q, k, "weights_not_from_scores")
    d, d_v = q.shape[-1], v.shape[-1]
    if not math.isclose(factor, 1 / math.sqrt(d), rel_tol=1e-3):
        key = next((name for name, wrong in WRONG_FACTORS.items()
                    if math.isclose(factor, wrong(d, d_v, k.shape[-2]), rel_tol=1e-3)),
                   "scale_wrong")
        raise Verdict(key, expected=num(1 / math.sqrt(d)), got=num(factor), d=d)
    attention_gate(context, weights, q, k, v, allowed, factor)


@pytest.mark.check("attend.scale")
def test_scale_by_sqrt_d(student, seed):
    context, weights = attend_judged(student, EXAMPLE_Q, EXAMPLE_Q, EXAMPLE_V)
    q, k, v = fresh_qkv(seed, 100)
    try:
        judge_scale(context, weights, EXAMPLE_Q, EXAMPLE_Q, EXAMPLE_V, example=True)
    except Verdict as on_example:
        # The example has one head and one batch: a factor from another axis (1/√H, say) reads
        # as "not scaled" there.  Its small numbers are shown only where the fresh input, whose
        # sizes all differ, names the same mistake; otherwise the fresh input's verdict.
        try:
            judge_scale(*attend_judged(student, q, k, v), q, k, v)
        except Verdict as on_fresh:
            if on_fresh.key != on_example.key:
                raise on_fresh from None
        raise
    judge_scale(*attend_judged(student, q, k, v), q, k, v)


@pytest.mark.check("attend.causal")
@pytest.mark.parametrize("t", [None, 0, 2])
def test_causal(student, seed, t):
    """t = None: the weights' upper triangle is exactly 0.  t: k and v changed after position t
    leave the context at positions <= t as it was."""
    q, k, v = fresh_qkv(seed, 200 + 10 * (t or 0))
    allowed = causal_mask(T)
    context, weights = attend_judged(student, q, k, v, probe="causal" if t is None else None)
    if torch.isnan(weights).any() or (weights[..., ~allowed] != 0).any():
        raise named(weights, allowed, q, k, "weights_leak")
    attention_gate(context, weights, q, k, v, allowed)
    if t is None:
        return
    k2, v2 = k.clone(), v.clone()
    k2[..., t + 1:, :] += 3.0
    v2[..., t + 1:, :] -= 5.0
    after, weights2 = attend_judged(student, q, k2, v2)
    past, past_after = context[..., :t + 1, :], after[..., :t + 1, :]
    if not close(past, past_after):
        raise Verdict(weights_problem(weights2, allowed, q, k2) or "future_changes_past",
                      heatmap=leak_map(weights2, allowed, q, k2), t=t,
                      **differing(past_after, past, "context", end=""))


@pytest.mark.check("attend.softmax")
@pytest.mark.parametrize("gain", [1.0, 100.0])
def test_rows_sum_to_one(student, seed, gain):
    q, k, v = fresh_qkv(seed, 300)
    allowed = causal_mask(T)
    context, weights = attend_judged(student, q, k, v)
    sharp = weights if gain == 1.0 else attend_judged(student, q * gain, k, v)[1]
    rows = sharp.double().sum(dim=-1)
    if not bool(torch.isfinite(sharp).all()) or not close(rows, torch.ones_like(rows), atol=1e-4):
        # At gain 100 the weights are nearly one-hot: a mistake is named from gain 1 if it shows.
        key = weights_problem(weights, allowed, q, k) or \
            weights_problem(sharp, allowed, q * gain, k) or "rows_not_one"
        raise Verdict(key, heatmap=leak_map(sharp, allowed, q * gain, k))
    attention_gate(context, weights, q, k, v, allowed)


BAND = causal_mask(T) & ~torch.ones(T, T, dtype=torch.bool).tril(-2)  # itself and one back
EVERYTHING = torch.ones(1, 1, T, T, dtype=torch.bool)  # broadcast over [B,H]


@pytest.mark.check("attend.mask_arg")
def test_explicit_band_mask(student, seed):
    q, k, v = fresh_qkv(seed, 400)
    context, weights = attend_judged(student, q, k, v, mask=BAND, probe="band")
    if torch.isnan(weights).any() or (weights[..., ~BAND] != 0).any():
        if looks_causal(weights):
            raise Verdict("mask_arg_ignored", heatmap=leak_map(weights, BAND, q, k))
        raise named(weights, BAND, q, k, "weights_leak")
    attention_gate(context, weights, q, k, v, BAND)


@pytest.mark.check("attend.mask_arg")
def test_all_visible_mask(student, seed):
    q, k, v = fresh_qkv(seed, 410)
    everything = torch.ones(T, T, dtype=torch.bool)
    context, weights = attend_judged(student, q, k, v, mask=EVERYTHING)
    if torch.isnan(weights).any() or not bool((weights > 0).all()):
        if looks_causal(weights):
            raise Verdict("mask_arg_ignored", heatmap=leak_map(weights, everything, q, k))
        key = weights_problem(weights, everything, q, k) or "weights_blocked"
        if torch.isnan(weights).all():  # nothing read at all: a band mask tells why
            _, band_weights = attend_judged(student, q, k, v, mask=BAND)
            key = "mask_inverted" if weights_problem(band_weights, BAND) == "mask_inverted" else key
        raise Verdict(key, heatmap=leak_map(weights, everything, q, k))
    attention_gate(context, weights, q, k, v, everything)


@pytest.mark.check("attend.return_weights")
def test_return_values(student, seed):
    q, k, v = fresh_qkv(seed, 500)
    plain = questions.attend(student, q, k, v)
    if type(plain) is not torch.Tensor:
        raise Verdict("wrong_type", expected="context", got=type(plain).__name__)
    shaped(plain, [B, H, T, v.shape[-1]])
    context, weights = attend_judged(student, q, k, v)
    attention_gate(context, weights, q, k, v, causal_mask(T))
    if not same(plain, context):
        raise Verdict("wrong_values", **differing(plain, context, "attend(q, k, v)"))


def batched_questions(seed):
    """attend.batched_vs_loop's two questions, the second's v on the other side of q's width from
    the first's, so the lower ranks its loops ask hold a v narrower than q and one wider."""
    first = fresh_qkv(seed, 600)
    return [first, fresh_qkv(seed, 610, d_v=questions.other_side(seed, 610, first[2].shape[-1]))]


def heads_of(q, k, v):
    """Each head's [B,T,·] inputs (q[:, h], ...), in head order."""
    return [tuple(t[:, h] for t in (q, k, v)) for h in range(q.shape[1])]


def cells_of(q, k, v):
    """Each (sample, head)'s [T,·] inputs (q[b, h], ...), samples then heads."""
    return [tuple(t[b, h] for t in (q, k, v)) for b in range(q.shape[0]) for h in range(q.shape[1])]


def drawn_questions(seed):
    """The drawn (q, k, v) the public checks ask attend with mask=None and return_weights=True,
    lower ranks included: the hidden checks compare their answers with the reference."""
    asked = [fresh_qkv(seed, salt) for salt in (100, 200, 220, 300, 500)]
    for q, k, v in batched_questions(seed):
        asked += [(q, k, v), *heads_of(q, k, v), *cells_of(q, k, v)]
    return asked


def looped(student, pieces, shape):
    """attend on each piece (heads_of or cells_of), the contexts stacked back into `shape`."""
    return torch.stack([attend_judged(student, *piece)[0] for piece in pieces]).reshape(shape)


@pytest.mark.check("attend.batched_vs_loop")
def test_batched_equals_loop(student, seed):
    for q, k, v in batched_questions(seed):
        context, weights = attend_judged(student, q, k, v)
        by_head = looped(student, heads_of(q, k, v), (H, B, T, v.shape[-1])).transpose(0, 1)
        by_cell = looped(student, cells_of(q, k, v), context.shape)  # [B,H,T,d_v]
        # Equal NaNs count as equal here: this check is about batching, not about the mask.
        for loop in (by_head, by_cell):
            if not same(context, loop):
                # The heads (or samples) are not independent; a softmax over the heads' axis, the
                # commonest way, is named as what it is.
                if softmax_axis(weights.double()) is not None:
                    raise named(weights, causal_mask(T), q, k, "heads_mixed")
                raise Verdict("heads_mixed", **differing(context, loop, "context", end=""))
        attention_gate(context, weights, q, k, v, causal_mask(T))
