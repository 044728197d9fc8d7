"""Known-wrong implementations, computed on the judge side from the same inputs and weights.

When a student's output matches one of these and not the reference, the feedback names the
mistake (the variant's name is a rubric message key).  Each variant of split_heads, merge_heads and
attend is the reference (solutions/attention.py) with one knob turned: a knob is a small edit of
the reference's own source text, so there is no second implementation with "correct" defaults.
An edit that no longer matches the reference fails at import (tests/test_variants.py names it).
"""
import functools
import inspect
import itertools
import math

import torch

from grader.judge.secret.reference import ref

# name -> knobs of `attention`; every name is a key of [messages] in rubric.toml.
ATTEND_VARIANTS = {
    "scale_none": {"scale": "none"},
    "scale_multiplied": {"scale": "multiplied"},
    "scale_by_d": {"scale": "d"},
    "scale_from_v": {"scale": "v_width"},
    "scale_after_softmax": {"scale": "after_softmax"},
    "mask_missing": {"mask": "none"},
    "mask_after_softmax": {"mask": "after_softmax"},
    "mask_after_softmax_inf": {"mask": "after_softmax_inf"},
    "mask_fill_zero": {"mask": "fill_zero"},
    "mask_diagonal": {"mask": "diagonal"},
    "mask_anti_causal": {"mask": "anti_causal"},
    "mask_off_by_one": {"mask": "off_by_one"},
    "mask_inverted": {"mask": "inverted"},
    "softmax_dim": {"softmax_dim": -2},
    "scores_transposed": {"scores": "kq"},
    "weights_prescores": {"weights": "prescores"},
}
MODULE_VARIANTS = dict(ATTEND_VARIANTS, **{
    "split_no_transpose": {"split": "no_transpose"},
    "split_head_minor": {"split": "head_minor"},
    "merge_no_transpose": {"merge": "no_transpose"},
    "merge_head_minor": {"merge": "head_minor"},
    "scale_sqrt_D": {"scale": "sqrt_D"},
    "no_out_proj": {"out_proj": False},
    "qkv_order": {"qkv": "interleaved"},
})
# Every other order of the fused [q | k | v] blocks is the same mistake, qkv_order.
QKV_ORDERS = [p for p in itertools.permutations(range(3)) if p != (0, 1, 2)]

# The knobs: (knob, setting) -> edits [(text in the reference, replacement)], each text found
# exactly once in the reference function it edits.
_SCALE = "/ math.sqrt(q.shape[-1])"
_DEFAULT_MASK = "dtype=torch.bool, device=q.device).tril()"
_MASKED_SOFTMAX = 'torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)'
ATTEND_EDITS = {
    ("scale", "none"): [(_SCALE, "")],
    ("scale", "multiplied"): [(_SCALE, "* math.sqrt(q.shape[-1])")],
    ("scale", "d"): [(_SCALE, "/ q.shape[-1]")],
    ("scale", "v_width"): [(_SCALE, "/ math.sqrt(v.shape[-1])")],
    ("scale", "after_softmax"): [(_SCALE, ""), ("context = weights @ v",
                                                "weights = weights / math.sqrt(q.shape[-1])\n"
                                                "    context = weights @ v")],
    ("mask_mode", "none"): [(_DEFAULT_MASK, "dtype=torch.bool, device=q.device)")],
    ("mask_mode", "after_softmax"): [(_MASKED_SOFTMAX,
                                      "torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)")],
    ("mask_mode", "after_softmax_inf"): [(_MASKED_SOFTMAX, "torch.softmax(scores, dim=-1)"
                                                           '.masked_fill(~mask, float("-inf"))')],
    ("mask_mode", "fill_zero"): [('masked_fill(~mask, float("-inf"))', "masked_fill(~mask, 0.0)")],
    ("mask_mode", "diagonal"): [(_DEFAULT_MASK, "dtype=torch.bool, device=q.device).tril(-1)")],
    ("mask_mode", "anti_causal"): [(_DEFAULT_MASK, "dtype=torch.bool, device=q.device).triu()")],
    ("mask_mode", "off_by_one"): [(_DEFAULT_MASK, "dtype=torch.bool, device=q.device).tril(1)")],
    # True = blocked: the default is built as the blocked cells, and the fill keeps what is True.
    ("mask_mode", "inverted"): [(_DEFAULT_MASK, "dtype=torch.bool, device=q.device).triu(1)"),
                                ("masked_fill(~mask,", "masked_fill(mask,")],
    ("softmax_dim", -2): [("), dim=-1)", "), dim=-2)")],
    ("scores", "kq"): [("q @ k.transpose(-2, -1)", "k @ q.transpose(-2, -1)")],
    ("weights", "prescores"): [("return (context, weights)",
                                'return (context, scores.masked_fill(~mask, float("-inf")))')],
}
SPLIT_EDITS = {
    "no_transpose": [("x.reshape(batch, positions, heads, width // heads).transpose(1, 2)",
                      "x.reshape(batch, heads, positions, width // heads)")],
    "head_minor": [("x.reshape(batch, positions, heads, width // heads).transpose(1, 2)",
                    "x.reshape(batch, positions, width // heads, heads).permute(0, 3, 1, 2)")],
}
MERGE_EDITS = {
    "no_transpose": [("x.transpose(1, 2).reshape(", "x.reshape(")],
    "head_minor": [("x.transpose(1, 2).reshape(", "x.permute(0, 2, 3, 1).reshape(")],
}
DEFAULTS = {"scale": "sqrt_d", "mask_mode": "tril", "softmax_dim": -1, "scores": "qk",
            "weights": "softmax"}


def edited(function, edits):
    """`function` of the reference recompiled with `edits` applied to its source text."""
    source = inspect.getsource(function)
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"variant edit of {function.__name__}: {old!r} is not found exactly "
                             "once in the reference")
        source = source.replace(old, new)
    namespace = dict(vars(ref))
    exec(compile(source, f"<variant of {function.__name__}>", "exec"), namespace)  # noqa: S102
    return namespace[function.__name__]


@functools.lru_cache(maxsize=None)
def _attend_with(knobs):
    edits = [edit for knob in knobs for edit in ATTEND_EDITS[knob]]
    return edited(ref.attend, edits) if edits else ref.attend


def attention(q, k, v, mask=None, scale="sqrt_d", mask_mode="tril", softmax_dim=-1,
              scores="qk", weights="softmax", width=None, **_):
    """The reference's attend with knobs turned; returns (context, weights)."""
    settings = {"scale": scale, "mask_mode": mask_mode, "softmax_dim": softmax_dim,
                "scores": scores, "weights": weights}
    if scale == "sqrt_D":  # √D instead of √d: the same as q scaled by √d/√D first
        q, settings["scale"] = q * math.sqrt(q.shape[-1] / width), "sqrt_d"
    knobs = tuple(sorted((k_, v_) for k_, v_ in settings.items() if DEFAULTS[k_] != v_))
    return _attend_with(knobs)(q, k, v, mask=mask, return_weights=True)


def attend_variant(name, q, k, v, mask=None):
    knobs = dict(ATTEND_VARIANTS[name])
    knobs["mask_mode"] = knobs.pop("mask", "tril")
    return attention(q, k, v, mask=mask, **knobs)


_SPLITS = {mode: edited(ref.split_heads, edits) for mode, edits in SPLIT_EDITS.items()}
_MERGES = {mode: edited(ref.merge_heads, edits) for mode, edits in MERGE_EDITS.items()}
# Every knob must apply to today's reference: checked once, at import.
for _knob in ATTEND_EDITS:
    _attend_with((_knob,))


def split(x, heads, mode="ok"):
    return ref.split_heads(x, heads) if mode == "ok" else _SPLITS[mode](x, heads)  # [B,H,T,d]


def merge(x, mode="ok"):
    return ref.merge_heads(x) if mode == "ok" else _MERGES[mode](x)  # [B,T,D]


def module_forward(x, wq, wk, wv, wo, heads, split_mode="ok", merge_mode="ok", out_proj=True,
                   qkv="ordered", **attend_knobs):
    """The block's forward with knobs; weights are [out, in] like nn.Linear.  -> (y, weights)."""
    b, t, width = x.shape
    if qkv == "interleaved":  # qkv(x) viewed as [B,T,H,3d] and cut per head
        fused = (x @ torch.cat([wq, wk, wv]).T).reshape(b, t, heads, 3, width // heads)
        q, k, v = (fused[..., i, :].transpose(1, 2) for i in range(3))  # [B,H,T,d]
    else:
        q, k, v = (split(x @ w.T, heads, split_mode) for w in (wq, wk, wv))
    context, weights = attention(q, k, v, width=width, **attend_knobs)
    merged = merge(context, merge_mode)
    return (merged @ wo.T if out_proj else merged), weights


def module_variant(name, x, wq, wk, wv, wo, heads):
    knobs = dict(MODULE_VARIANTS[name])
    knobs["mask_mode"] = knobs.pop("mask", "tril")
    knobs["split_mode"] = knobs.pop("split", "ok")
    knobs["merge_mode"] = knobs.pop("merge", "ok")
    return module_forward(x, wq, wk, wv, wo, heads, **knobs)


def module_candidates(x, wq, wk, wv, wo, heads):
    """[(name, (y, weights))] for every module variant, the q|k|v orders included."""
    # q|k|v orders first: in the block, k|q|v and scores k @ qᵀ give the same numbers, and a
    # wrong attend is named by attend's own checks.
    blocks = (wq, wk, wv)
    out = [("qkv_order", module_forward(x, *(blocks[i] for i in order), wo, heads))
           for order in QKV_ORDERS]
    return out + [(name, module_variant(name, x, wq, wk, wv, wo, heads))
                  for name in MODULE_VARIANTS]
