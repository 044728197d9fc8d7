"""The attend / split_heads / merge_heads checks' own parts, without a worker (the variants
themselves: tests/test_variants.py): the evidence functions name what they see and nothing else,
the public checks hold no drop-in implementation, the page's heatmaps are the judged weights, and
the rubric has every key the checks raise and describes the inputs they use."""
import inspect
import re
from pathlib import Path

import pytest
import torch

from grader.batch import judge
from grader import rubric
from grader.judge.secret import variants
from grader.judge.checks import questions, support
from grader.judge.secret.reference import ref

from grader.judge.checks.hidden import check_attend_reference as hidden_attend
from grader.judge.checks.public import check_attend as test_attend
from grader.judge.checks.public import check_merge_heads as test_merge_heads
from grader.judge.checks.public import check_split_heads as test_split_heads

RUBRIC = rubric.load()
CHECKS = Path(support.__file__).parent
T = test_attend.T
CAUSAL = support.causal_mask(T)


def qkv(seed=0, d_v=6):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 3, T, 4, generator=g), torch.randn(2, 3, T, 4, generator=g),
            torch.randn(2, 3, T, d_v, generator=g))


# -- evidence: a name only where the weights show it ------------------------------------------
SHOWN_BY_WEIGHTS = ["mask_missing", "mask_after_softmax", "mask_after_softmax_inf", "mask_fill_zero",
                    "mask_diagonal", "mask_anti_causal", "mask_off_by_one", "softmax_dim",
                    "scores_transposed", "weights_prescores", "scale_after_softmax"]


@pytest.mark.parametrize("name", SHOWN_BY_WEIGHTS)
def test_weights_problem_names_the_variant_it_sees(name):
    q, k, v = qkv(1)
    _, weights = variants.attend_variant(name, q, k, v)
    assert support.weights_problem(weights, CAUSAL, q, k) == name


@pytest.mark.parametrize("name,factor", [("scale_none", 1.0), ("scale_multiplied", 2.0),
                                         ("scale_by_d", 0.25), ("scale_from_v", 6 ** -0.5)])
def test_a_scale_mistake_is_a_factor_not_a_mask_problem(name, factor):
    q, k, v = qkv(2)
    _, weights = variants.attend_variant(name, q, k, v)
    assert support.weights_problem(weights, CAUSAL, q, k) is None
    assert support.weights_factor(weights, q, k, CAUSAL) == pytest.approx(factor, rel=1e-4)


def test_the_reference_shows_no_problem_and_the_factor_one_over_sqrt_d():
    q, k, v = qkv(3)
    for gain in (1.0, 100.0):
        _, weights = ref.attend(q * gain, k, v, return_weights=True)
        assert support.weights_problem(weights, CAUSAL, q * gain, k) is None
    _, weights = ref.attend(q, k, v, return_weights=True)
    assert support.weights_factor(weights, q, k, CAUSAL) == pytest.approx(0.5, rel=1e-4)


def test_an_inverted_mask_is_named_from_where_the_weights_sit():
    q, k, v = qkv(4)
    _, weights = variants.attend_variant("mask_inverted", q, k, v, mask=test_attend.BAND)
    assert support.weights_problem(weights, test_attend.BAND, q, k) == "mask_inverted"
    assert support.weights_problem(torch.zeros(2, 3, T, T), torch.ones(T, T, dtype=torch.bool)) \
        != "mask_inverted"  # no weight anywhere is no evidence of an inversion


@pytest.mark.parametrize("fake", ["uniform", "random", "one_hot"])
def test_weights_not_computed_from_scores_have_no_factor(fake):
    q, k, v = qkv(5)
    allowed = CAUSAL.expand(2, 3, T, T).double()
    if fake == "uniform":
        weights = allowed / allowed.sum(-1, keepdim=True)
    elif fake == "random":
        weights = torch.rand(2, 3, T, T, generator=torch.Generator().manual_seed(0)) * allowed
        weights = weights / weights.sum(-1, keepdim=True)
    else:
        scores = (q @ k.transpose(-2, -1)).masked_fill(~CAUSAL, float("-inf"))
        weights = torch.nn.functional.one_hot(scores.argmax(-1), T).double()
    assert support.weights_factor(weights, q, k, CAUSAL) is None
    assert support.weights_problem(weights, CAUSAL, q, k) == "weights_not_from_scores"


def test_weights_factor_tries_the_softmax_axis_last():
    """A softmax over the heads fits no relation of the rows: its factor is the heads' line's."""
    q, k, v = qkv(3)
    scores = (q @ k.transpose(-2, -1)) / 2  # d = 4
    weights = torch.softmax(scores.masked_fill(~CAUSAL, float("-inf")), dim=1)
    assert support.softmax_axis(weights.double()) == 1
    assert support.weights_factor(weights, q, k, CAUSAL) == pytest.approx(0.5, rel=1e-6)


# -- public checks: expectations as data, never a drop-in implementation ----------------------
def public_functions():
    for module in (test_split_heads, test_merge_heads, test_attend, support):
        # a copy: a function called here that warns adds __warningregistry__ to its module
        for name, fn in list(vars(module).items()):
            if inspect.isfunction(fn) and fn.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", fn


def test_no_public_function_computes_what_the_student_must_write():
    x = torch.randn(2, 5, 12)
    q, k, v = qkv(6)
    targets = [((x, 3), ref.split_heads(x, 3)), ((ref.split_heads(x, 3),), x),
               ((q, k, v), ref.attend(q, k, v))]
    found = []
    for name, fn in public_functions():
        for args, expected in targets:
            try:
                out = fn(*args)
            except Exception:  # noqa: BLE001 (a function that does not take these is no copy)
                continue
            outs = out if isinstance(out, tuple) else (out,)
            if any(type(o) is torch.Tensor and support.same(o, expected) for o in outs):
                found.append(name)
    assert found == []


# -- the page's heatmaps are the weights a check judged ---------------------------------------
class _Judged:
    """A student proxy stand-in with no worker: any call into it would fail the test."""


def test_attention_maps_are_the_recorded_judged_weights():
    student = _Judged()
    q, k, v = qkv(7)
    _, leaking = variants.attend_variant("mask_missing", q, k, v)
    support.record_judged(student, "causal", q, k, v, None)
    support.record_judged(student, "causal", q, k, v, None, leaking)
    support.record_judged(student, "causal", q, k, v, None, torch.zeros_like(leaking))  # later: kept out
    support.record_judged(student, "band", q, k, v, test_attend.BAND)  # no weights came back
    maps = judge.attention_maps(student)
    assert maps["causal"]["student"] == judge._grid(leaking[0, 0])
    assert sum(map(sum, maps["causal"]["leaks"])) == T * (T - 1) // 2
    assert maps["band"]["allowed"] == test_attend.BAND.tolist() and "error" in maps["band"]
    assert judge.PROBE_T == T


# -- the rubric holds every word --------------------------------------------------------------
def keys_in_checks():
    keys = set()
    for path in [CHECKS / "support.py", *sorted(CHECKS.glob("*/check_attend*.py")),
                 CHECKS / "public" / "check_split_heads.py", CHECKS / "public" / "check_merge_heads.py"]:
        text = path.read_text(encoding="utf-8")
        keys |= set(re.findall(r'Verdict\(\s*"(\w+)"', text))
        keys |= set(re.findall(r'return "([a-z_]+)"', text))
        keys |= set(re.findall(r'named\([^)]*"(\w+)"\)', text))
        keys |= set(re.findall(r'or "([a-z_]+)"(?! in)', text))
    keys |= set(test_attend.WRONG_FACTORS) | set(test_split_heads.WRONG_RULES)
    keys |= set(test_split_heads.WRONG_SHAPES.values()) | set(test_merge_heads.WRONG_RULES)
    return keys | set(variants.ATTEND_VARIANTS)


def test_every_key_the_checks_raise_is_in_the_rubric():
    keys = keys_in_checks()
    assert {"weights_not_from_scores", "attend_only_4d", "mask_inverted"} <= keys
    assert sorted(k for k in keys if k not in RUBRIC.messages) == []


def test_checks_pass_no_prose():
    for path in [CHECKS / "support.py", *sorted(CHECKS.glob("*/check_attend*.py")),
                 CHECKS / "public" / "check_split_heads.py", CHECKS / "public" / "check_merge_heads.py"]:
        assert not re.search(r"Verdict\([^)]*detail=", path.read_text(encoding="utf-8")), path.name


def test_rubric_texts_describe_the_inputs_the_checks_use():
    text = {c.id: c.checked["en"] + c.checked["zh"] for c in RUBRIC.checks}
    _, weights = ref.attend(test_attend.EXAMPLE_Q, test_attend.EXAMPLE_Q, test_attend.EXAMPLE_V,
                            return_weights=True)
    row = support.fmt(weights[0, 0, 1])  # the example's numbers, as the rubric prints them
    assert row.replace(" ", "") in text["attend.scale"].replace(" ", "")
    assert "all-visible" not in text["attend.scale"] and "全可见" not in text["attend.scale"]
    shape_qk = f"[{test_attend.B},{test_attend.H},{T},{test_attend.D_HEAD}]"
    shape_v = f"[{test_attend.B},{test_attend.H},{T},d_v]"
    widths = ", ".join(map(str, questions.V_WIDTHS[:-1])) + f" and {questions.V_WIDTHS[-1]}"
    for check in ("attend.scale", "attend.causal", "attend.return_weights", "attend.device"):
        assert shape_qk in text[check] and shape_v in text[check], check
    assert widths in text["attend.scale"]
    assert "v of width " + widths.replace(" and ", " or ") in text["attend.reference"]
    assert f"rows {hidden_attend.ZERO_ROWS[0]} and {hidden_attend.ZERO_ROWS[1]}" in \
        text["attend.zero_scores"]
    for check in RUBRIC.checks:
        if check.exercise in ("attend", "split_heads", "merge_heads"):
            assert "drawn for this grading" in check.checked["en"], check.id
