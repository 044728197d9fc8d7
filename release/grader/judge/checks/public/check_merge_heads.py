"""Public checks of merge_heads: the inverse of the lesson's split, concatenation in head order."""
import pytest
import torch

from grader.judge.checks.support import Verdict, expect_close, fmt, randn, shaped
from grader.judge.checks.public.check_split_heads import by_the_lesson

B, T, H, D_HEAD = 2, 5, 3, 4


def wrong_merges(heads):
    """[B,H,T,d] merged the known wrong ways."""
    batch, n_heads, positions, d = heads.shape
    return [
        ("merge_no_transpose", heads.reshape(batch, positions, n_heads * d)),
        ("merge_head_minor", heads.permute(0, 2, 3, 1).reshape(batch, positions, n_heads * d)),
    ]


@pytest.mark.check("merge_heads.round_trip")
def test_round_trip(student):
    x = randn(B, T, H * D_HEAD, seed=11)
    heads = by_the_lesson(x, H).contiguous()  # [B,H,T,d]
    expect_close(student.merge_heads(heads), x, "merge_heads(split(x))", wrong_merges(heads))


@pytest.mark.check("merge_heads.concat")
def test_concatenation(student):
    # One position, two heads: [a, b] = [1, 2] and [c, d] = [10, 20] -> [1, 2, 10, 20].
    heads = torch.tensor([[[[1.0, 2.0]], [[10.0, 20.0]]]])  # [1,2,1,2]
    got = student.merge_heads(heads)
    if type(got) is torch.Tensor and list(got.shape) == [1, 1, 2]:
        raise Verdict("merge_sum", detail=f"merge_heads([1, 2], [10, 20]) gave {fmt(got)}, "
                                          "expected [[[1, 2, 10, 20]]]")
    expect_close(got, torch.tensor([[[1.0, 2.0, 10.0, 20.0]]]), "merge_heads([1, 2], [10, 20])",
                 wrong_merges(heads))


@pytest.mark.check("merge_heads.concat")
def test_shape_distinct_sizes(student):
    heads = randn(B, H, T, D_HEAD, seed=12)
    got = student.merge_heads(heads)
    if type(got) is torch.Tensor and list(got.shape) == [B, T, D_HEAD]:
        raise Verdict("merge_sum", detail=f"merge_heads(x[2,3,5,4]) has shape {list(got.shape)}, "
                                          f"expected [2, 5, 12]")
    shaped(got, [B, T, H * D_HEAD], "merge_heads(x[2,3,5,4])")
