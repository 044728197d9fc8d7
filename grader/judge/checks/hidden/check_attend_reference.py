"""Hidden checks of attend and merge_heads against the reference solution (grader/judge/secret/reference.py),
on inputs drawn fresh for this grading; a mismatch is named when a known-wrong variant (the
reference with one knob turned, grader/judge/secret/variants.py) gives the student's numbers."""
import pytest

from grader.judge.secret.reference import ref
from grader.judge.secret.variants import ATTEND_VARIANTS, attend_variant
from grader.judge.checks.public.check_attend import T, fresh_qkv
from grader.judge.checks.support import (Verdict, attend_any_rank, causal_mask, close,
                                         expect_close, fresh_randn, leak_map, tensor)

SHAPES = {"2-D": (), "3-D": (2,), "4-D": (2, 3)}


def attend_both(student, q, k, v, mask=None):
    out = attend_any_rank(student, q, k, v, mask=mask, return_weights=True)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(context, weights)", got=type(out).__name__)
    return tensor(out[0]), tensor(out[1])


def attend_mistakes(q, k, v, part):
    """(name, context or weights: `part` 0 or 1) of every named mistake of attend on q, k, v."""
    return [(name, attend_variant(name, q, k, v)[part]) for name in ATTEND_VARIANTS]


def expect_reference(context, weights, q, k, v):
    """Context and weights equal the reference's, or a Verdict naming the variant they equal."""
    expected, expected_w = ref.attend(q, k, v, return_weights=True)
    heat = leak_map(weights, causal_mask(T), q, k) if weights.shape == expected_w.shape else ""
    try:
        expect_close(weights, expected_w, "weights", lambda: attend_mistakes(q, k, v, 1))
        expect_close(context, expected, "context", lambda: attend_mistakes(q, k, v, 0))
    except Verdict as verdict:
        verdict.heatmap = heat
        raise


@pytest.mark.check("attend.reference")
@pytest.mark.parametrize("rank", list(SHAPES))
def test_matches_reference(student, seed, rank):
    q, k, v = fresh_qkv(seed, 700 + 10 * len(SHAPES[rank]), SHAPES[rank])
    context, weights = attend_both(student, q, k, v)
    expect_reference(context, weights, q, k, v)


ZERO_ROWS = [1, 3]  # queries of zeros: every score in these rows is 0


@pytest.mark.check("attend.zero_scores")
def test_zero_scores(student, seed):
    q, k, v = fresh_qkv(seed, 800, (1, 2))
    q[..., ZERO_ROWS, :] = 0.0
    expected, expected_w = ref.attend(q, k, v, return_weights=True)
    context, weights = attend_both(student, q, k, v)
    if close(weights, expected_w) and close(context, expected):
        return
    other_rows = [i for i in range(T) if i not in ZERO_ROWS]
    if weights.shape == expected_w.shape and close(weights[..., other_rows, :],
                                                   expected_w[..., other_rows, :]) \
            and not close(weights[..., ZERO_ROWS, :], expected_w[..., ZERO_ROWS, :]):
        # Right wherever a score is not 0, wrong only where every score is 0.
        raise Verdict("mask_from_values", heatmap=leak_map(weights, causal_mask(T), q, k))
    expect_reference(context, weights, q, k, v)


@pytest.mark.check("merge_heads.non_contiguous")
def test_non_contiguous_input(student, seed):
    # Sent as [B,T,d,H] and permuted to [B,H,T,d] in the worker: still strided after the
    # student's own transpose(1, 2), so a bare .view fails where .reshape works.
    heads = fresh_randn(2, 5, 4, 3, seed=seed, salt=900)
    expected = ref.merge_heads(heads.permute(0, 3, 1, 2))
    try:
        got = student.call("merge_heads", heads, views=[(0, [0, 3, 1, 2])])
    except Exception as exc:
        message = getattr(exc, "message", "")
        if "view" in message or "contiguous" in message:
            raise Verdict("view_non_contiguous", message=message[:200]) from None
        raise
    expect_close(got, expected, "merge_heads(x)")
