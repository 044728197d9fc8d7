"""Hidden checks of attend and merge_heads against the reference solution; a mismatch is named
when a known-wrong variant (secret/variants.py) gives the student's numbers.

The answers compared are the ones the public checks' questions already got (questions.py), every
form and rank, so no call is asked for the reference alone.  An answer given a mask is compared
where its weights keep to that mask (one that does not is the mask checks' mistake); one asked
without its weights, where it is a tensor (a tuple is attend.return_weights' mistake)."""
import pytest
import torch

from grader.judge.checks import questions
from grader.judge.checks.public import check_attend, check_merge_heads
from grader.judge.secret.reference import ref
from grader.judge.secret.variants import ATTEND_VARIANTS, attend_variant
from grader.judge.checks.public.check_attend import T, fresh_qkv
from grader.judge.checks.support import (Verdict, causal_mask, close, expect_close, first_slice,
                                         fresh_randn, leak_map, observed, tensor)

RANKS = {"2-D": 2, "3-D": 3, "4-D": 4}


def attend_both(student, q, k, v, mask=None, own=None):
    """(context, weights) of attend(q, k, v, mask, return_weights=True), asked once per grading;
    `own`: the hidden check whose own question it is (questions.attend)."""
    return both(questions.attend(student, q, k, v, mask=mask, return_weights=True, own=own))


def both(out):
    """An answer of attend(..., return_weights=True) as (context, weights), or a Verdict."""
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(context, weights)", got=type(out).__name__)
    return tensor(out[0]), tensor(out[1])


def expect_reference(context, weights, q, k, v, mask=None):
    """Context and weights (None: not asked) equal the reference's for this mask, or a Verdict
    naming the variant they equal."""
    def mistakes(part):
        """(name, context or weights: `part` 0 or 1) of every named mistake of attend here."""
        return [(name, attend_variant(name, q, k, v, mask)[part]) for name in ATTEND_VARIANTS]

    expected, expected_w = ref.attend(q, k, v, mask, return_weights=True)
    allowed = causal_mask(q.shape[-2]) if mask is None else first_slice(mask)
    heat = leak_map(weights, allowed, q, k) \
        if weights is not None and weights.shape == expected_w.shape else ""
    try:
        if weights is not None:
            expect_close(weights, expected_w, "weights", lambda: mistakes(1))
        expect_close(context, expected, "context", lambda: mistakes(0))
    except Verdict as verdict:
        verdict.heatmap = heat
        raise


def keeps_to_its_mask(weights, mask):
    """The weights of an answer given `mask` are positive exactly where the mask allows (and
    nowhere NaN): its mask is applied, whatever else is wrong."""
    if weights is None or mask is None:
        return True
    try:
        allowed = mask.expand(weights.shape)
    except RuntimeError:
        return False  # weights of a wrong shape: the mask checks name it
    return not bool(torch.isnan(weights).any()) and bool(((weights > 0) == allowed).all())


def ordinary_answers(student, seed, rank):
    """The kept answers attend gave whose q has `rank` axes, of every form: the drawn questions
    without a mask and with the weights first, the lesson's example after them, every other form
    last.  The drawn questions are asked here where the public checks did not ask them."""
    for q, k, v in check_attend.drawn_questions(seed):
        if q.dim() == rank:
            observed(lambda: questions.attend(student, q, k, v, return_weights=True))
    kept = [e for e in questions.entries(student, "attend", own=None) if e.args[0].dim() == rank]
    example = questions.fingerprint(check_attend.EXAMPLE_Q)
    return sorted(kept, key=lambda e: (e.form["masked"] or not e.form["return_weights"],
                                       questions.fingerprint(e.args[0]) == example))


def expect_ordinary_answers(student, seed, rank, check):
    """Every ordinary answer of this rank equals the reference's, or the first Verdict; each is
    marked compared by `check`."""
    for entry in ordinary_answers(student, seed, rank):
        q, k, v, mask = entry.args
        if not entry.form["return_weights"]:
            if type(entry.answer) is torch.Tensor:
                entry.compared.add(check)
                expect_reference(entry.answer, None, q, k, v, mask)
            continue
        context, weights = both(entry.outcome())
        if keeps_to_its_mask(weights, mask):
            entry.compared.add(check)
            expect_reference(context, weights, q, k, v, mask)


@pytest.mark.check("attend.reference")
@pytest.mark.parametrize("rank", list(RANKS))
def test_matches_reference(student, seed, rank):
    expect_ordinary_answers(student, seed, RANKS[rank], "attend.reference")


ZERO_ROWS = [1, 3]  # queries of zeros: every score in these rows is 0


@pytest.mark.check("attend.zero_scores")
def test_zero_scores(student, seed):
    q, k, v = fresh_qkv(seed, 800)
    q[..., ZERO_ROWS, :] = 0.0
    expected, expected_w = ref.attend(q, k, v, return_weights=True)
    context, weights = attend_both(student, q, k, v, own="attend.zero_scores")
    if not (close(weights, expected_w) and close(context, expected)):
        other_rows = [i for i in range(T) if i not in ZERO_ROWS]
        if weights.shape == expected_w.shape and close(weights[..., other_rows, :],
                                                       expected_w[..., other_rows, :]) \
                and not close(weights[..., ZERO_ROWS, :], expected_w[..., ZERO_ROWS, :]):
            # Right wherever a score is not 0, wrong only where every score is 0.
            raise Verdict("mask_from_values", heatmap=leak_map(weights, causal_mask(T), q, k))
        expect_reference(context, weights, q, k, v)
    # Rows of zeros are a question a submission can recognise: the point needs attend's ordinary
    # answers ([B,H,T,d]) to be the reference's as well.
    expect_ordinary_answers(student, seed, 4, "attend.zero_scores")


@pytest.mark.check("merge_heads.non_contiguous")
def test_non_contiguous_input(student, seed):
    # Sent as [B,T,d,H] and permuted to [B,H,T,d] in the worker: still strided after the
    # student's own transpose(1, 2), so a bare .view fails where .reshape works.
    heads = fresh_randn(questions.B, questions.T, questions.D_HEAD, questions.H, seed=seed,
                        salt=900)
    expected = ref.merge_heads(heads.permute(0, 3, 1, 2))
    try:
        got = questions.merge_heads(student, heads, views=[(0, [0, 3, 1, 2])])
    except Exception as exc:
        message = getattr(exc, "message", "")
        if "view" in message or "contiguous" in message:
            raise Verdict("view_non_contiguous", message=message[:200]) from None
        raise
    expect_close(got, expected, "merge_heads(x)")
    # A strided view is a question a submission can recognise: the point needs merge_heads's
    # ordinary answers (contiguous heads) to be the reference's as well.
    for entry in ordinary_merges(student, seed):
        entry.compared.add("merge_heads.non_contiguous")
        expect_close(entry.outcome(), ref.merge_heads(entry.args[0]), "merge_heads(x)")


def ordinary_merges(student, seed):
    """The kept answers of merge_heads on contiguous heads (asked here where the public checks
    did not ask them)."""
    for x in check_merge_heads.drawn_questions(seed):
        observed(lambda: questions.merge_heads(student, x))
    return questions.entries(student, "merge_heads", strided=False)
