"""What every check uses: the Verdict a failing check raises, and small tensor helpers.

A check never asserts with a bare `assert` (pytest would echo its source); it raises Verdict with
a message key from the rubric and the fields that fill it.  Everything here is judge-side.
"""
import itertools
import math

import torch

from grader.judge.student import StudentError, WorkerFailure
from grader.rubric import said
from grader.sandbox.runtime.wire import Opaque

ATOL, RTOL = 1e-5, 1e-4


class Verdict(Exception):
    """A failed check: `key` names a rubric message (an outcome or a misconception)."""

    def __init__(self, key, detail="", heatmap="", **fields):
        self.key, self.detail, self.heatmap, self.fields = key, detail, heatmap, fields
        super().__init__(key)


def fresh(seed, salt):
    """A generator for inputs drawn fresh for this grading: the submission's seed (the `seed`
    fixture) mixed with a salt of the check's own, so no two checks draw the same tensors."""
    return torch.Generator().manual_seed((seed * 1_000_003 + salt) % 2 ** 63)


def fresh_randn(*shape, seed, salt):
    return torch.randn(*shape, generator=fresh(seed, salt))


def describe_value(value):
    if isinstance(value, torch.Tensor):
        return f"Tensor{list(value.shape)}"
    if isinstance(value, tuple):
        return f"tuple[{len(value)}]"  # code-like, so it reads the same in zh and en
    if isinstance(value, Opaque):
        return value.type_name
    return type(value).__name__


def tensor(value, what="torch.Tensor"):
    """The value as an exact torch.Tensor, or a Verdict saying what came back instead."""
    if type(value) is not torch.Tensor:
        raise Verdict("wrong_type", expected=what, got=describe_value(value))
    return value


def shaped(value, shape):
    """The value as a torch.Tensor of `shape`, or a Verdict saying what came back instead."""
    t = tensor(value)
    if list(t.shape) != list(shape):
        raise Verdict("wrong_shape", expected=list(shape), got=list(t.shape))
    return t


COMPARE_CHUNK = 1 << 18


def close(a, b, atol=ATOL, rtol=RTOL, equal_nan=False):
    """Values equal within tolerance, NaNs never equal (unless `equal_nan`); shapes must match
    exactly.  Compared in float64 a slice at a time: a reply as large as the wire lets through
    (8 MiB of float32) would otherwise cost the judge several float64 copies of it at once."""
    if type(a) is not torch.Tensor or type(b) is not torch.Tensor or a.shape != b.shape:
        return False
    a, b = a.reshape(-1), b.reshape(-1)
    return all(torch.allclose(a[i:i + COMPARE_CHUNK].double(), b[i:i + COMPARE_CHUNK].double(),
                              rtol=rtol, atol=atol, equal_nan=equal_nan)
               for i in range(0, a.numel(), COMPARE_CHUNK))


def same(a, b, atol=ATOL, rtol=RTOL):
    """`close`, with NaN where the other has NaN counted as equal (a known-wrong variant gives
    NaN in the same cells as the student's code)."""
    return close(a, b, atol, rtol, equal_nan=True)


def num(v):
    """One number as every feedback line writes numbers: up to 4 decimals, no trailing zeros."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    text = f"{v:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt(t):
    """A compact, language-neutral rendering of a small tensor slice (numbers as `num`)."""
    if type(t) is not torch.Tensor:
        return describe_value(t)
    if t.dtype == torch.bool:
        return str(t.int().tolist())

    def one(v):
        if isinstance(v, list):
            return "[" + ", ".join(one(x) for x in v) + "]"
        return num(v)

    return one(t.double().tolist())


def differing(got, expected, where, end=" ", number=num):
    """A Verdict's `where` (got's index after `where`, then `end`), `expected` and `got` at the
    largest difference (a NaN counts as the largest), numbers written by `number`."""
    diff = (got.double() - expected.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    # The flat index unravelled by hand: torch.unravel_index's argument checks import sympy,
    # half a second of the first wrong file's `check`.
    flat, index = int(diff.reshape(-1).argmax()), ()
    for size in reversed(diff.shape):
        flat, at = divmod(flat, size)
        index = (at,) + index
    return {"where": f"{where}{list(index)}{end}", "expected": number(expected[index].item()),
            "got": number(got[index].item())}


def expect_close(got, expected, where, named=None):
    """`got` with expected's shape and values, else a Verdict naming the first known mistake
    (`named()`: [(rubric key, its values)], asked only when the values differ) that `got` is."""
    got = shaped(got, expected.shape)
    if not close(got, expected):
        known = named() if named else []
        key = next((name for name, values in known
                    if same(got, values) and not same(got, expected)), "wrong_values")
        raise Verdict(key, **differing(got, expected, where))
    return got


def expect_layout(got, x, rule, wrong_rules, where, *sizes):
    """Every cell of `got` where `rule` (got's index and `sizes` -> x's index) puts it; else a
    Verdict naming the first of `wrong_rules` ({rubric key: rule}) that every cell follows."""
    def first_off(rule):
        """(index, got's value, x's value) at the first cell not holding x[rule(index)], or None."""
        for index in itertools.product(*map(range, got.shape)):
            value, want = got[index].item(), x[rule(*index, *sizes)].item()
            if value != want:
                return list(index), value, want
        return None

    off = first_off(rule)
    if off is not None:
        key = next((name for name, wrong in wrong_rules.items() if first_off(wrong) is None),
                   "wrong_values")
        index, g, e = off
        raise Verdict(key, where=f"{where}{index} ", expected=num(e), got=num(g))


# What the error that came instead of ValueError says about the code, in a student's words.
WRONG_ERROR_ADVICE = {
    "AssertionError": said(
        "assert 失败时抛出的是 AssertionError（python -O 还会跳过它）：改用 `if …: raise ValueError(…)`。",
        "A failing assert raises AssertionError (and python -O skips it): use `if …: raise "
        "ValueError(…)` instead."),
    "ZeroDivisionError": said(
        "在检查头数之前就除以了它（D // heads 或 D % heads）：先检查头数，不合法就 raise ValueError。",
        "The number of heads is divided by (D // heads or D % heads) before it is checked: "
        "check it first and raise ValueError when it is invalid."),
}
NO_CHECK_ADVICE = said(
    "看起来开头没有检查头数，这个错误是后面的运算抛出的：先检查头数大于 0 且能整除宽度，不合法就 raise ValueError。",
    "It looks like the number of heads is not checked first, and a later operation raised "
    "this: check that it is above 0 and divides the width, and raise ValueError otherwise.")


def for_the_runner(exc):
    """A StudentError the runner names itself (a stub, an error at import, the memory limit)."""
    return exc.not_implemented or exc.during == "import" or exc.memory_limit


def observed(call):
    """call()'s answer, or None where nothing can be observed: the student's code raised (a stub
    too), hung, exited, ran out of memory, or answered something the check cannot use."""
    try:
        return call()
    except (StudentError, WorkerFailure, Verdict):
        return None


def expect_student_error(call, case):
    """Run `call()`; a Verdict unless the student's code raised ValueError."""
    try:
        call()
    except StudentError as exc:
        if for_the_runner(exc):
            raise
        if exc.is_a("ValueError"):
            return
        advice = next((WRONG_ERROR_ADVICE[name] for name in exc.mro if name in WRONG_ERROR_ADVICE),
                      NO_CHECK_ADVICE)
        raise Verdict("wrong_error", case=case, type=exc.type, message=exc.message,
                      advice=advice) from None
    raise Verdict("no_error", case=case)


def causal_mask(t):
    return torch.ones(t, t, dtype=torch.bool).tril()


# -- what attention weights show ------------------------------------------------------------
# Public checks judge attend by its defining relations, not by a second attend: on cells a query
# may read, log w[i,j] - log w[i,j'] == c·(q_i·k_j - q_i·k_j') with c = 1/√d; cells it may not
# read are exactly 0; each row sums to 1; context == weights @ v.
TINY = 1e-30      # a weight at or below this underflowed: it counts as 0
FIT_TOL = 2e-3    # on log-weights: float32 rounding of scores up to a few hundred stays far below
C_MIN = 0.01      # the smallest factor that still counts as weights computed from q·kᵀ


def dot_scores(q, k):
    """q_i·k_j for every query i and key j, unscaled, in float64: [..., Tq, Tk]."""
    return q.double() @ k.double().transpose(-2, -1)


def fitted_factor(weights, scores, cells, axis=-1, strict=True):
    """The c with log w = c·scores + (a constant per line along `axis`) on `cells`, in float64.

    None when no such c exists: a cell that is NaN or negative, a residual above FIT_TOL, nothing
    to fit.  `strict`: a cell that underflowed to 0 must be one the fit puts below 1e-20 (one-hot
    "attention" on a single cell per row fits nothing)."""
    w = weights.double()
    cells = cells.expand_as(w)
    chosen = w[cells]
    if bool(torch.isnan(chosen).any()) or bool((chosen < 0).any()):
        return None
    live = cells & (w > TINY)
    s = scores.double().expand_as(w)
    y = torch.where(live, w.clamp_min(TINY).log(), torch.zeros_like(w))
    n = live.sum(axis, keepdim=True).clamp_min(1)
    y_mean, s_mean = (y * live).sum(axis, keepdim=True) / n, (s * live).sum(axis, keepdim=True) / n
    y_c, s_c = (y - y_mean) * live, (s - s_mean) * live
    spread = float((s_c * s_c).sum())
    if spread < 1e-9:
        return None
    c = float((y_c * s_c).sum()) / spread
    if float((y_c - c * s_c).abs().max()) > FIT_TOL * (1 + abs(c)):
        return None
    dead = cells & ~live
    if strict and bool(dead.any()) and \
            bool(((y_mean + c * (s - s_mean))[dead] > math.log(1e-20)).any()):
        return None
    return c


def weights_factor(weights, q, k, allowed):
    """The factor c of the first relation the weights follow, or None: rows over the readable
    cells, rows over every cell that got weight (another mask), columns, rows of k·qᵀ, or lines
    along the heads or the batch (a softmax over that axis): a named mistake keeps its scale
    judged."""
    scores, w = dot_scores(q, k), weights.double()
    finite_rows = ~torch.isnan(w).any(dim=-1, keepdim=True)  # a NaN row says nothing of the scale
    relations = [(scores, allowed & finite_rows, -1), (scores, (w > TINY) & finite_rows, -1),
                 (scores, allowed, -2)]
    if scores.shape[-1] == scores.shape[-2]:
        relations.append((scores.transpose(-2, -1), allowed & finite_rows, -1))
    softmax = softmax_axis(w)
    if softmax is not None and softmax < w.dim() - 2:  # over the heads or the batch
        relations.append((scores, allowed & ~torch.isnan(w), softmax))
    for s, cells, axis in relations:
        c = fitted_factor(w, s, cells, axis, strict=False)
        if c is not None and c > C_MIN:
            return c
    return None


def _pattern(w, cells):
    """Weight exactly on `cells` (positive there, 0 elsewhere) in every row that is not NaN."""
    rows = ~torch.isnan(w).any(dim=-1, keepdim=True)
    positive = w > 0
    return bool(rows.any()) and bool(positive.any()) and \
        bool(((positive == cells) | ~rows).all())


def _mask_mistake(w, allowed):
    """Which wrong mask the weights w (float64) show by where they sit alone."""
    t_q, t_k = allowed.shape[-2:]
    nan = torch.isnan(w)
    if t_q == t_k and not bool(nan.any()):
        below = causal_mask(t_q)
        if bool((allowed == below).all()):
            if _pattern(w, below.T):
                return "mask_anti_causal"
            if _pattern(w, torch.ones(t_q, t_k, dtype=torch.bool).tril(1)):
                return "mask_off_by_one"
    # True read as "blocked": weight exactly where the mask says no; a row with nothing blocked
    # is then all -inf, NaN after the softmax.
    nan_rows = nan.any(dim=-1)  # [..., T]
    if bool((~nan_rows | ~(~allowed).any(dim=-1)).all()) and _pattern(w, ~allowed):
        return "mask_inverted"
    return None


def weights_problem(weights, allowed, q=None, k=None):
    """What weights [..., Tq, Tk] show, as a rubric key, or None when they are a softmax of some
    positive multiple of q·kᵀ over the `allowed` cells (the scale is attend.scale's to judge).

    Without q and k (the module's weights) only what the weights show alone is named; where the
    evidence names no mistake, the key says what was seen (weights_leak, nan, rows_not_one)."""
    w = weights.double()
    blocked = ~allowed.expand_as(w)
    d = q.shape[-1] if q is not None else None
    scores = dot_scores(q, k) if q is not None else None
    axis = softmax_axis(w)  # before any mask diagnosis: the softmax's axis decides every cell
    if axis is not None:
        return "softmax_dim" if axis == w.dim() - 2 else "softmax_axis"
    if bool(blocked.any()) and bool(torch.isneginf(w[blocked]).all()) and (
            bool((w[~blocked] < 0).any()) if scores is None else
            torch.allclose(w[~blocked], (scores / math.sqrt(d))[~blocked], atol=1e-4)):
        return "weights_prescores"  # -inf where blocked, raw scores (negative too) elsewhere
    if bool(torch.isneginf(w).any()):
        return "mask_after_softmax_inf" if bool(torch.isneginf(w[blocked]).all()) else "nan"
    mask_mistake = _mask_mistake(w, allowed)
    if mask_mistake:
        return mask_mistake
    nan_rows = torch.isnan(w).any(dim=-1).reshape(-1, w.shape[-2]).any(dim=0)  # [Tq]
    if nan_rows.any():
        diagonal = bool(nan_rows[0]) and not bool(nan_rows[1:].any()) and w.shape[-2] > 1 \
            and bool((torch.diagonal(w, dim1=-2, dim2=-1)[..., 1:] == 0).all())
        return "mask_diagonal" if diagonal else "nan"
    if bool((w[blocked] != 0).any()):
        return _leak_mistake(w, scores, allowed)
    return _normalisation_mistake(w, scores, allowed, d, q, k)


def softmax_axis(w):
    """The axis other than the last that the weights sum to 1 over, when the rows do not (a
    softmax over dim=0 or 1, or without dim: torch picks the heads of 4-D scores), else None.
    NaN (a cell masked in every head, normalised over the heads) is left out."""
    w = w.double()
    finite = ~torch.isnan(w)
    if w.dim() < 2 or not bool(finite.any()) or not bool((w[finite] >= 0).all()):
        return None
    rows = finite.all(dim=-1)
    if bool(rows.any()) and _sum_to_one(w.sum(dim=-1)[rows]):
        return None
    for axis in range(w.dim() - 1):
        lines = finite.all(dim=axis)
        if w.shape[axis] > 1 and bool(lines.any()) and \
                _sum_to_one(torch.nan_to_num(w).sum(dim=axis)[lines]):
            return axis
    return None


def _sum_to_one(sums):
    return torch.allclose(sums, torch.ones_like(sums), atol=1e-4)


def _leak_mistake(w, scores, allowed):
    if scores is not None:
        everywhere = torch.ones_like(allowed)
        if fitted_factor(w, scores, everywhere) is not None:
            return "mask_missing"
        if fitted_factor(w, scores.masked_fill(~allowed, 0.0), everywhere) is not None:
            return "mask_fill_zero"
        # the bool mask added as numbers: log w = c·scores + 1 where readable + a row constant
        if fitted_factor(w * torch.exp(-allowed.double()), scores, everywhere) is not None:
            return "mask_added"
    else:
        # Masked scores set to 0: every blocked cell of a row gets the same weight, exp(0)/Z.
        blocked = ~allowed.expand_as(w)
        fill = torch.where(blocked, w, torch.full_like(w, float("nan")))
        row_max = torch.where(blocked, fill, torch.full_like(w, -1.0)).amax(dim=-1, keepdim=True)
        if bool(((w - row_max).abs()[blocked] < 1e-6).all()) and allowed.shape[-1] > 2:
            return "mask_fill_constant"  # 0, -1 or any one number: the weights alone cannot tell
    return "weights_leak"


def _normalisation_mistake(w, scores, allowed, d, q, k):
    rows_ok = _sum_to_one(w.sum(dim=-1))
    if not rows_ok and w.shape[-1] == w.shape[-2] and _sum_to_one(w.sum(dim=-2)):
        return "softmax_dim"
    c = fitted_factor(w, scores, allowed) if scores is not None else None
    if scores is not None and (c is None or c <= C_MIN):
        if rows_ok and scores.shape[-1] == scores.shape[-2] and \
                (fitted_factor(w, scores.transpose(-2, -1), allowed) or 0) > C_MIN:
            return "scores_transposed"
        # q @ (k's numbers re-read as [..., d, T]): what a kᵀ made by .view or .reshape gives
        k_viewed = k.double().reshape(*k.shape[:-2], k.shape[-1], k.shape[-2])
        if rows_ok and (fitted_factor(w, q.double() @ k_viewed, allowed) or 0) > C_MIN:
            return "kt_by_view"
        return "weights_not_from_scores"
    if rows_ok:
        return None
    # Rows that do not sum to 1: which normalisation went wrong.
    sums = w.sum(dim=-1)  # [..., T]
    if scores is None:
        # A mask applied after the softmax leaves rows that block nothing summing to 1 and every
        # other row short of 1.
        free = ~(~allowed).any(dim=-1)  # rows where nothing is blocked
        after = bool(free.any()) and bool((~free).any()) and \
            bool((sums[..., free] - 1).abs().max() < 1e-4) and \
            bool((sums[..., ~free] < 1 - 1e-4).all())
    else:
        every = torch.softmax(c * scores, dim=-1)  # normalised over every cell, the future included
        after = torch.allclose(sums, (every * allowed).sum(dim=-1), atol=1e-4)
        if not after and torch.allclose(sums, torch.full_like(sums, 1 / math.sqrt(d)), atol=1e-4):
            return "scale_after_softmax"
    return "mask_after_softmax" if after else "rows_not_one"


def per_grading(student, name, make):
    """What the checks keep for one grading, on the student proxy as `name`: made afresh by
    `make()` when the proxy is graded again (another seed)."""
    seed = getattr(student, "seed", None)
    kept = getattr(student, name, None)
    if kept is None or kept[0] != seed:
        kept = (seed, make())
        setattr(student, name, kept)
    return kept[1]


def judged_maps(student):
    """The attention maps the checks judged, by probe name, for the feedback page's heatmaps."""
    return per_grading(student, "judged_maps", dict)


def first_slice(t):
    """The first [T, T] (or [T, d]) slice of a tensor with any leading axes."""
    return t.reshape(-1, *t.shape[-2:])[0]


def record_judged(student, probe, q, k, v, mask, weights=None):
    """Keep one [T, T] slice of inputs and judged weights for the page (the first one wins)."""
    maps = judged_maps(student)
    if probe in maps and maps[probe].get("weights") is not None:
        return
    if mask is not None:
        mask = first_slice(mask.expand(*q.shape[:-1], k.shape[-2]))
    maps[probe] = {"q": first_slice(q), "k": first_slice(k), "v": first_slice(v), "mask": mask,
                   "weights": None if weights is None else first_slice(weights).detach().clone()}


def same_answer(a, b):
    """Two answers to one call agree: tensors of one shape equal to rounding (NaN where the other
    has NaN), tuples of such; other values are not compared (another check's to judge)."""
    if type(a) is torch.Tensor and type(b) is torch.Tensor:
        return a.shape == b.shape and same(a, b, atol=1e-6, rtol=1e-5)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(same_answer(x, y) for x, y in zip(a, b))
    return True


def steady_call(call):
    """Randomness first: `call()` made twice; the first answer when both agree, else a Verdict
    naming the randomness (no other cause is drawn from a random answer)."""
    first, second = call(), call()
    if not same_answer(first, second):
        raise Verdict("random_output")
    return first


def attend_any_rank(student, q, k, v, **kwargs):
    """student.attend on q of any rank, made steadily (steady_call); when it raises for fewer than
    4 axes and the same data with leading axes of 1 goes through, the Verdict names code written
    for [B,H,T,d] only."""
    try:
        return steady_call(lambda: student.attend(q, k, v, **kwargs))
    except StudentError as exc:
        if q.dim() >= 4 or for_the_runner(exc):
            raise
        lead = (1,) * (4 - q.dim())
        try:
            student.attend(*(t.reshape(*lead, *t.shape) for t in (q, k, v)), **kwargs)
        except StudentError:
            raise exc from None
        raise Verdict("attend_only_4d", rank=q.dim(), type=exc.type, message=exc.message) from None


class Heat(str):
    """A verdict's heatmap text with the judged call it was drawn from (`call`: first slices of q,
    k, the allowed cells and the weights), so the feedback page draws the numbers the card shows."""
    call = None


def leak_map(weights, allowed, q=None, k=None):
    """The first [T, T] slice of `weights` as a small text grid, a '!' on each cell that should be
    0 but is not; given q and k, it carries the call for the page."""
    w = first_slice(weights).double()
    rows = ["      " + " ".join(f"k{j:<4}" for j in range(w.shape[1]))]
    w, ok = w.tolist(), allowed.tolist()  # Python numbers: one conversion, not one a cell
    for i, row in enumerate(w):
        cells = []
        for j, v in enumerate(row):
            mark = "!" if not ok[i][j] and v != 0 else " "
            cells.append("nan  " if math.isnan(v) else f"{v:.2f}{mark}")
        rows.append(f"q{i:<4} " + " ".join(cells))
    heat = Heat("\n".join(rows))
    if q is not None and k is not None:
        heat.call = {"q": first_slice(q), "k": first_slice(k), "mask": allowed,
                     "weights": first_slice(weights).detach().clone()}
    return heat


def note(record_note, key, **fields):
    """On a check that passes: what it could not judge on this machine (a rubric outcome key),
    said beside the points and costing none of them."""
    record_note("kit_note", {"key": key, "fields": {k: str(v) for k, v in fields.items()}})
