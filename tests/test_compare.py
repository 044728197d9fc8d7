"""The judge's comparison (support.close and same): torch.allclose on float64 copies, a slice
at a time, in every case (inf, NaN, tolerances at the edge, the dtypes of a pair)."""
import torch

from grader.judge.checks import support


def test_close_and_same_keep_their_meaning_for_nan():
    nan = torch.tensor([1.0, float("nan")])
    assert not support.close(nan, nan.clone()) and support.same(nan, nan.clone())
    assert not support.close(torch.ones(2), torch.ones(3))  # shapes must match, never broadcast
    big = torch.randn(support.COMPARE_CHUNK + 5, dtype=torch.float64)
    moved = big.clone()
    moved[-1] += 1e-3  # past the first chunk
    assert support.close(big, big.clone()) and not support.close(big, moved)


def test_close_and_same_answer_as_torch_on_float64_copies():
    """close and same compare float32 cells in float64: torch.allclose on .double() copies, for
    differences a few ulps either side of the tolerance (where float32 arithmetic would answer
    otherwise), with inf and NaN, whatever the dtype of the pair."""
    generator = torch.Generator().manual_seed(1)
    disagreements, yes = [], 0
    for trial in range(3000):
        dtype = (torch.float32, torch.float64, torch.float16)[trial % 3]
        b = (torch.randn(2, 3, 4, generator=generator) * 10 ** (trial % 5 - 2)).to(dtype)
        edge = support.ATOL + support.RTOL * b.double().abs()
        sign = torch.sign(torch.randn(b.shape, generator=generator)).double()
        a = (b.double() + sign * edge).to(dtype)  # the nearest cell of the dtype to the edge
        a = (a, torch.nextafter(a, a + 1), torch.nextafter(a, a - 1))[trial // 3 % 3]
        a = torch.where(torch.rand(b.shape, generator=generator) < 0.1, a, b)  # a few cells
        if trial % 7 == 0:
            a[0, 0, 0] = b[0, 0, 0] = (float("inf"), float("nan"), float("-inf"))[trial % 3]
        for ours, equal_nan in ((support.close, False), (support.same, True)):
            theirs = torch.allclose(a.double(), b.double(), atol=support.ATOL, rtol=support.RTOL,
                                    equal_nan=equal_nan)
            yes += theirs
            if ours(a, b) != theirs:
                disagreements.append((trial, ours.__name__, theirs))
    assert not disagreements, disagreements[:5]
    assert 100 < yes < 5900


def test_close_decides_a_cell_at_the_tolerance_in_float64():
    """Cells of float32 whose difference lies within an ulp of the tolerance, picked where
    float32 arithmetic and float64 answer differently: close answers as torch.allclose on the
    .double() copies (float64), cell by cell and inside a larger tensor."""
    generator = torch.Generator().manual_seed(2)
    b = torch.randn(200_000, generator=generator) * 10.0 ** torch.randint(-2, 3, (200_000,),
                                                                           generator=generator)
    edge = support.ATOL + support.RTOL * b.double().abs()
    a = (b.double() + edge).float()
    a = torch.cat([a, torch.nextafter(a, a + 1), torch.nextafter(a, a - 1)])
    b = torch.cat([b, b, b])
    in_float32 = (a - b).abs() - (b.abs() * support.RTOL + support.ATOL) <= 0
    in_float64 = (a.double() - b.double()).abs() - (b.double().abs() * support.RTOL
                                                    + support.ATOL) <= 0
    picked = (in_float32 != in_float64).nonzero().flatten()[:40]
    assert len(picked) >= 10  # the cells where the arithmetic decides exist, and are tried
    for i in picked.tolist():
        x, y = a[i:i + 1], b[i:i + 1]
        expected = bool(in_float64[i])
        assert support.close(x, y) == support.same(x, y) == expected, i
        inside_x, inside_y = torch.zeros(2, 3, 4), torch.zeros(2, 3, 4)
        inside_x[1, 2, 3], inside_y[1, 2, 3] = x[0], y[0]
        assert support.close(inside_x, inside_y) == expected, i

