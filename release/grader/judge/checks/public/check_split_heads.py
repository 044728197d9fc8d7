"""Public checks of split_heads, cell by cell: cell [b, h, t, i] of the result is feature h·d + i
of position t (the transpose trap), on the lesson's 0..11 example and on an input drawn fresh for
this grading; ValueError for an invalid number of heads."""
import pytest
import torch

from grader.judge.student import StudentError, WorkerFailure
from grader.judge.checks.questions import B, D_HEAD, H, T
from grader.judge.checks.support import (Verdict, expect_layout, expect_student_error, fmt,
                                         fresh_randn, shaped)

# Where cell [b, h, t, i] of a [B,H,T,d] result comes from in x [B,T,D].
def lesson_rule(b, h, t, i, heads, positions, d):
    return b, t, h * d + i


# The known mistakes, as the cell each one reads instead (named when every cell follows one).
WRONG_RULES = {
    # reshape straight to [B,H,T,d]: cells taken in memory order
    "split_no_transpose": lambda b, h, t, i, heads, positions, d: (
        b, *divmod((h * positions + t) * d + i, heads * d)),
    # the feature axis cut as (d, H): every H-th feature
    "split_head_minor": lambda b, h, t, i, heads, positions, d: (b, t, i * heads + h),
}
# Shapes that name the mistake: [B,T,H,d] stopped before the transpose, [B,T,d,H] and [H,T,B,d]
# swapped other axes.
WRONG_SHAPES = {(B, T, H, D_HEAD): "split_no_transpose", (B, T, D_HEAD, H): "split_wrong_axes",
                (H, T, B, D_HEAD): "split_wrong_axes", (T, B, H, D_HEAD): "split_wrong_axes"}


def expect_cells(got, x, heads):
    """Every cell where the lesson puts it; else a Verdict naming the layout it follows."""
    d = x.shape[2] // heads
    got = shaped(got, [x.shape[0], heads, x.shape[1], d])
    expect_layout(got, x, lesson_rule, WRONG_RULES, "heads", heads, x.shape[1], d)


def expect_rearranged(got, x, shape):
    """The result holds exactly x's numbers, moved (a gate: the shape alone earns nothing)."""
    got = shaped(got, shape)
    if not torch.equal(got.reshape(-1).sort().values, x.reshape(-1).sort().values):
        raise Verdict("values_not_from_input")
    return got


@pytest.mark.check("split_heads.shape")
def test_shape(student, seed):
    x = fresh_randn(B, T, H * D_HEAD, seed=seed, salt=1)
    got = student.split_heads(x, H)
    if type(got) is torch.Tensor and tuple(got.shape) in WRONG_SHAPES:
        raise Verdict(WRONG_SHAPES[tuple(got.shape)], expected=[B, H, T, D_HEAD],
                      got=list(got.shape))
    expect_rearranged(got, x, [B, H, T, D_HEAD])


@pytest.mark.check("split_heads.transpose")
def test_every_cell(student, seed):
    # The lesson's example first: X = 0..11 as [1,3,4], H = 2: heads[0, 0, 1] = [4, 5],
    # heads[0, 1, 1] = [6, 7].
    example = torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)
    got = shaped(student.split_heads(example, 2), [1, 2, 3, 2])
    if got[0, 0, 1].tolist() != [4.0, 5.0] or got[0, 1, 1].tolist() != [6.0, 7.0]:
        try:
            expect_cells(got, example, 2)
        except Verdict as verdict:
            verdict.fields.update(where="heads[0, :, 1] ", expected="[[4, 5], [6, 7]]",
                                  got=fmt(got[0, :, 1]))
            raise
    x = fresh_randn(B, T, H * D_HEAD, seed=seed, salt=2)
    expect_cells(student.split_heads(x, H), x, H)


@pytest.mark.check("split_heads.errors")
@pytest.mark.parametrize("width,heads", [(6, 4), (8, 0), (64, -2)])
def test_invalid_heads(student, seed, width, heads):
    # A valid call first: raising ValueError for every input is not the skill.  Both calls are
    # made, then the valid one is judged first, as it was asked first.
    x = fresh_randn(B, T, H * D_HEAD, seed=seed, salt=3)
    bad = fresh_randn(1, 2, width, seed=seed, salt=4)
    valid = student.split_heads(x, H)
    try:
        student.split_heads(bad, heads)
        raised = None
    except (StudentError, WorkerFailure) as exc:
        raised = exc
    expect_rearranged(valid, x, list(valid.shape) if type(valid) is torch.Tensor else [])
    if isinstance(raised, WorkerFailure):
        raise raised

    def the_bad_call():
        if raised is not None:
            raise raised

    case = f"split_heads(x[1,2,{width}], heads={heads})"
    try:
        expect_student_error(the_bad_call, case)
    except Verdict as verdict:
        # heads=-2 went through the divisibility test: nothing raised, or a later line failed.
        # An AssertionError is a check that is there, written as assert: wrong_error says so.
        if heads < 0 and (verdict.key == "no_error" or verdict.key == "wrong_error"
                          and verdict.fields.get("type") != "AssertionError"):
            raise Verdict("negative_heads") from None
        raise
