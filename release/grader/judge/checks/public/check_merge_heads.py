"""Public checks of merge_heads, cell by cell: feature h·d + i of position t is cell [b, h, t, i]
of the heads (concatenation in head order, the inverse of the lesson's split), on the lesson's
small example and on inputs drawn fresh for this grading (questions.merge_heads)."""
import pytest
import torch

from grader.judge.checks import questions
from grader.judge.checks.questions import B, D_HEAD, H, T
from grader.judge.checks.support import Verdict, expect_layout, fmt, fresh_randn, shaped


# Where feature j of position t of the merged [B,T,H*d] comes from in heads [B,H,T,d].
def lesson_rule(b, t, j, heads, positions, d):
    return b, j // d, t, j % d


WRONG_RULES = {
    # reshape straight from [B,H,T,d]: one head's positions glued together
    "merge_no_transpose": lambda b, t, j, heads, positions, d: (
        b, (t * heads * d + j) // (positions * d), (t * heads * d + j) // d % positions, j % d),
    # permuted to [B,T,d,H] first: the heads' features interleaved
    "merge_head_minor": lambda b, t, j, heads, positions, d: (b, j % heads, t, j // heads),
    # the last two axes swapped to [B,H,d,T] first: positions and features re-read together
    "merge_wrong_axes": lambda b, t, j, heads, positions, d: (
        b, *_from_flat(t * heads * d + j, positions, d)),
}


def _from_flat(flat, positions, d):
    """(h, t, i) of flat index `flat` in the [H, d, T] layout."""
    return flat // (d * positions), flat % positions, flat % (d * positions) // positions


def expect_merged(got, x):
    """Every feature where the lesson puts it; else a Verdict naming the layout it follows."""
    batch, heads, positions, d = x.shape
    if type(got) is torch.Tensor and list(got.shape) == [batch, positions, d]:
        raise Verdict("merge_sum", expected=[batch, positions, heads * d], got=list(got.shape))
    got = shaped(got, [batch, positions, heads * d])
    expect_layout(got, x, lesson_rule, WRONG_RULES, "merged", heads, positions, d)


EXAMPLE = torch.tensor([[[[1.0, 2.0]], [[10.0, 20.0]]]])  # [1,2,1,2]: one position, two heads


def drawn_questions(seed):
    """The heads the public checks merge: [B,H,T,d] and [B,H,1,d] drawn for this grading."""
    return [fresh_randn(B, H, T, D_HEAD, seed=seed, salt=11),
            fresh_randn(B, H, 1, D_HEAD, seed=seed, salt=12)]


@pytest.mark.check("merge_heads.round_trip")
def test_round_trip(student, seed):
    heads = drawn_questions(seed)[0]  # [B,H,T,d]
    expect_merged(questions.merge_heads(student, heads), heads)


@pytest.mark.check("merge_heads.concat")
def test_concatenation(student, seed):
    # One position, two heads: [a, b] = [1, 2] and [c, d] = [10, 20] -> [1, 2, 10, 20].
    got = questions.merge_heads(student, EXAMPLE)
    try:
        expect_merged(got, EXAMPLE)
    except Verdict as verdict:
        verdict.fields.update(where="merge_heads([1, 2], [10, 20]) ", expected="[[[1, 2, 10, 20]]]",
                              got=fmt(got))
        raise
    # Then one position of heads drawn fresh (B, H, d distinct): concatenation in head order.
    heads = drawn_questions(seed)[1]  # [B,H,1,d]
    expect_merged(questions.merge_heads(student, heads), heads)
