"""Public checks of split_heads: shape, where every cell goes (the transpose trap), ValueError."""
import pytest
import torch

from grader.judge.checks.support import Verdict, expect_close, expect_student_error, fmt, randn, shaped

# Sizes that all differ (B, T, H, d): a swapped axis changes the shape or the values.
B, T, H, D_HEAD = 2, 5, 3, 4


def by_the_lesson(x, heads):
    """Head h, position t takes features h*d .. (h+1)*d of position t: written cell by cell."""
    batch, positions, width = x.shape
    d = width // heads
    return torch.stack([x[:, :, h * d:(h + 1) * d] for h in range(heads)], dim=1)  # [B,H,T,d]


def wrong_splits(x, heads):
    """Known mistakes: the student's output is compared with each to name it."""
    batch, positions, width = x.shape
    d = width // heads
    return [
        ("split_no_transpose", x.reshape(batch, heads, positions, d)),
        ("split_head_minor", x.reshape(batch, positions, d, heads).permute(0, 3, 1, 2)),
    ]


# Shapes that name the mistake: [B,T,H,d] stopped before the transpose, [B,T,d,H] and [H,T,B,d]
# swapped other axes.
WRONG_SHAPES = {(B, T, H, D_HEAD): "split_no_transpose", (B, T, D_HEAD, H): "split_wrong_axes",
                (H, T, B, D_HEAD): "split_wrong_axes", (T, B, H, D_HEAD): "split_wrong_axes"}


@pytest.mark.check("split_heads.shape")
def test_shape(student):
    x = randn(B, T, H * D_HEAD, seed=1)
    got = student.split_heads(x, H)
    if type(got) is torch.Tensor and tuple(got.shape) in WRONG_SHAPES:
        raise Verdict(WRONG_SHAPES[tuple(got.shape)],
                      detail=f"split_heads(x[2,5,12], 3): shape {list(got.shape)}, "
                             f"expected [B,H,T,d] = {[B, H, T, D_HEAD]}")
    shaped(got, [B, H, T, D_HEAD], "split_heads(x[2,5,12], 3)")


@pytest.mark.check("split_heads.transpose")
def test_lesson_example(student):
    x = torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)
    got = shaped(student.split_heads(x, 2), [1, 2, 3, 2], "split_heads(0..11, 2)")
    for head, expected in ((0, [4.0, 5.0]), (1, [6.0, 7.0])):
        if got[0, head, 1].tolist() != expected:
            key = "split_no_transpose" if got[0, 0, 1].tolist() == [2.0, 3.0] else "wrong_values"
            key = "split_head_minor" if got[0, 0, 1].tolist() == [4.0, 6.0] else key
            raise Verdict(key, where=f"heads[0, {head}, 1] ", expected=expected,
                          got=fmt(got[0, head, 1]),
                          detail=f"x = arange(12).reshape(1,3,4), H=2: heads[0,{head},1] "
                                 f"expected {expected}, got {fmt(got[0, head, 1])}")


@pytest.mark.check("split_heads.transpose")
def test_random_input(student):
    x = randn(B, T, H * D_HEAD, seed=2)
    got = student.split_heads(x, H)
    expect_close(got, by_the_lesson(x, H), "split_heads(x[2,5,12], 3)", wrong_splits(x, H))


@pytest.mark.check("split_heads.errors")
@pytest.mark.parametrize("width,heads", [(6, 4), (8, 0), (64, -2)])
def test_invalid_heads(student, width, heads):
    x = randn(1, 2, width, seed=3)
    case = f"split_heads(x[1,2,{width}], heads={heads})"
    try:
        expect_student_error(lambda: student.split_heads(x, heads), case)
    except Verdict as verdict:
        if heads < 0 and verdict.key in ("no_error", "wrong_error"):
            raise Verdict("negative_heads") from None
        raise
