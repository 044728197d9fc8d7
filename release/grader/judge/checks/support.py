"""What every check uses: the Verdict a failing check raises, and small tensor helpers.

A check never asserts with a bare `assert` (pytest would echo its source); it raises Verdict with
a message key from the rubric and the fields that fill it.  Everything here is judge-side.
"""
import math

import torch

from grader.judge.student import StudentError
from grader.sandbox.runtime.wire import Opaque

ATOL, RTOL = 1e-5, 1e-4


class Verdict(Exception):
    """A failed check: `key` names a rubric message (an outcome or a misconception)."""

    def __init__(self, key, detail="", heatmap="", **fields):
        self.key, self.detail, self.heatmap, self.fields = key, detail, heatmap, fields
        super().__init__(key)


def generator(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed):
    return torch.randn(*shape, generator=generator(seed))


def fresh(seed, salt):
    """A generator for inputs drawn fresh for this grading: the submission's seed (the `seed`
    fixture) mixed with a salt of the check's own, so no two checks draw the same tensors."""
    return generator((seed * 1_000_003 + salt) % 2 ** 63)


def fresh_randn(*shape, seed, salt):
    return torch.randn(*shape, generator=fresh(seed, salt))


def describe_value(value):
    if isinstance(value, torch.Tensor):
        return f"Tensor{list(value.shape)}"
    if isinstance(value, tuple):
        return f"tuple of {len(value)}"
    if isinstance(value, Opaque):
        return value.type_name
    return type(value).__name__


def tensor(value, what="a tensor"):
    """The value as an exact torch.Tensor, or a Verdict saying what came back instead."""
    if type(value) is not torch.Tensor:
        raise Verdict("wrong_type", expected=what, got=describe_value(value))
    return value


def shaped(value, shape, what="the result"):
    t = tensor(value)
    if list(t.shape) != list(shape):
        raise Verdict("wrong_shape", expected=list(shape), got=list(t.shape),
                      detail=f"{what}: expected {list(shape)}, got {list(t.shape)}")
    return t


def close(a, b, atol=ATOL, rtol=RTOL):
    """Values equal within tolerance, NaNs never equal; shapes must match exactly."""
    if type(a) is not torch.Tensor or type(b) is not torch.Tensor or a.shape != b.shape:
        return False
    a64, b64 = a.double(), b.double()
    if torch.isnan(a64).any() or torch.isnan(b64).any():
        return False
    return bool(torch.allclose(a64, b64, atol=atol, rtol=rtol))


def fmt(t, digits=4):
    """A compact, language-neutral rendering of a small tensor slice."""
    if type(t) is not torch.Tensor:
        return describe_value(t)
    if t.dtype == torch.bool:
        return str(t.int().tolist())
    values = t.double().tolist()

    def one(v):
        if isinstance(v, list):
            return "[" + ", ".join(one(x) for x in v) + "]"
        if math.isnan(v):
            return "nan"
        return f"{v:.{digits}f}".rstrip("0").rstrip(".") if v == v else "nan"

    return one(values)


def first_difference(got, expected):
    """(index, got value, expected value) of the largest difference, for 'expected vs got'."""
    diff = (got.double() - expected.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    flat, index = int(diff.reshape(-1).argmax()), []
    for size in reversed(diff.shape):  # unravel by hand: torch.unravel_index costs ~2 ms a call
        flat, i = divmod(flat, size)
        index.insert(0, i)
    index = tuple(index)
    return index, got[index].item(), expected[index].item()


def mismatch(got, expected, where, variants=(), key="wrong_values"):
    """Raise a Verdict for values that differ, naming a known mistake when one matches."""
    for name, candidate in variants:
        if close(got, candidate) and not close(got, expected):
            key = name
            break
    index, g, e = first_difference(got, expected)
    detail = f"{where} at index {list(index)}: expected {e:.4f}, got {g:.4f}"
    raise Verdict(key, detail=detail, where=where + " ", expected=f"{e:.4f}", got=f"{g:.4f}")


def expect_close(got, expected, where, variants=()):
    got = shaped(got, expected.shape, where)
    if not close(got, expected):
        mismatch(got, expected, where, variants)
    return got


def heatmap(weights, leaks=None):
    """Weights [T, T] as a small text grid; cells that should be 0 but are not get a '!'."""
    w = weights.double()
    rows = ["      " + " ".join(f"k{j:<4}" for j in range(w.shape[1]))]
    for i in range(w.shape[0]):
        cells = []
        for j in range(w.shape[1]):
            v = w[i, j].item()
            mark = "!" if leaks is not None and bool(leaks[i, j]) and v != 0 else " "
            cells.append("nan  " if math.isnan(v) else f"{v:.2f}{mark}")
        rows.append(f"q{i:<4} " + " ".join(cells))
    return "\n".join(rows)


def expect_student_error(call, case, error="ValueError"):
    """Run `call()`; a Verdict unless the student's code raised `error`."""
    try:
        call()
    except StudentError as exc:
        if exc.not_implemented or exc.during == "import" or exc.memory_limit:
            raise
        if exc.is_a(error):
            return
        raise Verdict("wrong_error", case=case, type=exc.type, message=exc.message) from None
    raise Verdict("no_error", case=case)


def causal_mask(t):
    return torch.ones(t, t, dtype=torch.bool).tril()


def weights_diagnosis(weights, allowed):
    """Name the mask or softmax mistake that weights [..., T, T] show, from their shape alone.

    `allowed` is the bool [T, T] of positions that may be read.  Returns a message key or None.
    """
    w = weights.double().reshape(-1, *weights.shape[-2:])  # [N,T,T]
    t = w.shape[-1]
    nan_rows = torch.isnan(w).any(dim=-1).any(dim=0)  # [T]
    if nan_rows.any():
        return "mask_diagonal" if bool(nan_rows[0]) and not bool(nan_rows[1:].any()) else "nan"
    leaks = (w.abs() > 1e-6) & ~allowed
    if leaks.any():
        lower = torch.ones(t, t, dtype=torch.bool).tril(-1)
        if t > 1 and not (w.abs() > 1e-6)[:, lower].any():
            return "mask_anti_causal"
        if not leaks[:, ~torch.ones(t, t, dtype=torch.bool).tril(1)].any():
            return "mask_off_by_one"
        return "mask_missing"
    row_sums = w.sum(dim=-1)
    if not torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-4):
        col_sums = w.sum(dim=-2)
        if torch.allclose(col_sums, torch.ones_like(col_sums), atol=1e-4):
            return "softmax_dim"
        return "mask_after_softmax"
    return None


def leak_map(weights, allowed):
    """The first [T, T] slice of `weights` as a heatmap, with cells that should be 0 marked."""
    first = weights.reshape(-1, *weights.shape[-2:])[0]
    return heatmap(first, leaks=~allowed)
