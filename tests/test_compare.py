"""The judge's comparison (support.allclose, under close and same): torch.allclose's answer in
every case, its shortcut included (inf, NaN, tolerances at the edge, dtypes torch refuses)."""
import itertools

import pytest
import torch

from grader.judge.checks import support

SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-8, 3e-38, 1e-45, 1e30, 3.4e38, float("inf"), float("-inf"),
           float("nan")]


def both(a, b, **tolerances):
    """support.allclose and torch.allclose on the same arguments: (theirs, ours) or the error
    type each raised."""
    answers = []
    for function in (torch.allclose, support.allclose):
        try:
            answers.append(function(a, b, **tolerances))
        except RuntimeError as exc:
            answers.append(type(exc))
    return answers


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("equal_nan", [False, True])
def test_every_pair_of_special_values_is_judged_as_torch_judges_it(dtype, equal_nan):
    for x, y in itertools.product(SPECIAL, repeat=2):
        a, b = torch.tensor([x], dtype=dtype), torch.tensor([y], dtype=dtype)
        theirs, ours = both(a, b, equal_nan=equal_nan)
        assert ours == theirs, (x, y, dtype)


def test_random_tensors_at_the_edge_of_the_tolerance():
    """Differences drawn around atol + rtol |b|, where one ulp decides; some cells made inf or
    NaN, some tensors broadcast."""
    generator = torch.Generator().manual_seed(0)
    disagreements, yes = [], 0
    for trial in range(3000):
        dtype = (torch.float32, torch.float64)[trial % 2]
        atol, rtol = [(1e-5, 1e-4), (1e-8, 1e-5), (0.0, 0.0), (1e-4, 0.0)][trial % 4]
        b = torch.randn(3, 5, generator=generator, dtype=dtype) * 10 ** (trial % 7 - 3)
        edge = atol + rtol * b.abs()
        wiggle = torch.randint(-2, 3, b.shape, generator=generator).to(dtype)
        a = b + torch.sign(torch.randn(b.shape, generator=generator, dtype=dtype)) * \
            (edge + wiggle * torch.finfo(dtype).eps * edge)
        if trial % 11 == 0:
            a[0, 0] = (float("inf"), float("nan"), b[0, 0])[trial % 3]
        if trial % 13 == 0:
            b = b[:1]  # broadcast over the rows of a
        theirs, ours = both(a, b, atol=atol, rtol=rtol, equal_nan=trial % 2 == 0)
        yes += theirs is True
        if ours != theirs:
            disagreements.append((trial, theirs, ours))
    assert not disagreements, disagreements[:5]
    assert 300 < yes < 2700  # both answers were put to the test, not one side only


def test_what_torch_refuses_is_refused_and_other_dtypes_are_torchs():
    assert both(torch.ones(2), torch.ones(2, dtype=torch.float64)) == [RuntimeError] * 2
    assert both(torch.tensor([1, 2]), torch.tensor([1, 3])) == [False, False]
    assert both(torch.tensor([True]), torch.tensor([True])) == [True, True]
    assert both(torch.ones(0), torch.ones(0)) == [True, True]


def test_close_and_same_keep_their_meaning_for_nan():
    nan = torch.tensor([1.0, float("nan")])
    assert not support.close(nan, nan.clone()) and support.same(nan, nan.clone())
    assert not support.close(torch.ones(2), torch.ones(3))  # shapes must match, never broadcast
    big = torch.randn(support.COMPARE_CHUNK + 5, dtype=torch.float64)
    moved = big.clone()
    moved[-1] += 1e-3  # past the first chunk
    assert support.close(big, big.clone()) and not support.close(big, moved)


def test_finite_values_are_answered_without_torchs_longer_way(monkeypatch):
    """The shortcut is what a right answer takes (the judge's time goes there), and a wrong one
    of finite cells: torch.allclose is reached only where inf or NaN decide."""
    calls = []
    longer = torch.allclose
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: calls.append(1) or longer(*a, **k))
    b = torch.randn(4, 8, dtype=torch.float64)
    assert support.allclose(b + 0.9e-4, b, atol=1e-4, rtol=0.0)
    assert support.allclose(b * (1 + 0.9e-4), b, atol=0.0, rtol=1e-4)
    assert support.close(b.float() + 1e-6, b.float())
    assert not support.allclose(b + 2e-4, b, atol=1e-4, rtol=0.0)
    assert not support.close(b.float() + 1e-3, b.float())
    assert calls == []
    b[1, 2] = float("inf")
    assert support.allclose(b, b.clone()) and calls == [1]  # inf == inf: torch's rule
    b[1, 2] = float("nan")
    assert not support.close(b, b.clone()) and support.same(b, b.clone()) and len(calls) == 3


def test_close_and_same_answer_as_torch_on_float64_copies():
    """close and same compare float32 cells in float64 (numpy's cast where one chunk holds
    them, .double() otherwise): torch.allclose on .double() copies, for differences a few ulps
    either side of the tolerance (where float32 arithmetic would answer otherwise), with inf and
    NaN, whatever the dtype of the pair."""
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

