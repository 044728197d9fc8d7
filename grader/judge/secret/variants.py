"""Known-wrong implementations, computed on the judge side from the same inputs and weights.

When a student's output matches one of these and not the reference, the feedback names the
mistake (the variant's name is a rubric message key).  Each variant of split_heads, merge_heads and
attend is the reference (solutions/attention.py) with one knob turned: a knob is a small edit of
the reference's own source text, so there is no second implementation with "correct" defaults.
An edit that no longer matches the reference fails at import (tests/test_attend_checks.py names
it).  The block's variants are the reference block itself with one knob: one of its functions
replaced in a fresh copy of the reference, its weights' blocks reordered, out_proj dropped, or the
student's own biases added.
"""
import functools
import itertools
import math

import torch

from grader.judge.secret import reference
from grader.judge.secret.reference import ref

# name -> knobs of `attention`; every name is a key of [messages] in rubric.toml.
ATTEND_VARIANTS = {
    "scale_none": {"scale": "none"},
    "scale_multiplied": {"scale": "multiplied"},
    "scale_by_d": {"scale": "d"},
    "scale_from_v": {"scale": "v_width"},
    "scale_from_t": {"scale": "t"},
    "scale_after_softmax": {"scale": "after_softmax"},
    "mask_missing": {"mask": "none"},
    "mask_after_softmax": {"mask": "after_softmax"},
    "mask_after_softmax_inf": {"mask": "after_softmax_inf"},
    "mask_fill_zero": {"mask": "fill_zero"},
    "mask_diagonal": {"mask": "diagonal"},
    "mask_anti_causal": {"mask": "anti_causal"},
    "mask_off_by_one": {"mask": "off_by_one"},
    "mask_inverted": {"mask": "inverted"},
    "mask_added": {"mask": "added"},
    "softmax_dim": {"softmax_dim": -2},
    "softmax_axis": {"softmax_dim": "implicit"},
    "scores_transposed": {"scores": "kq"},
    "kt_by_view": {"scores": "kt_view"},
    "weights_prescores": {"weights": "prescores"},
}
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
    ("scale", "t"): [(_SCALE, "/ math.sqrt(k.shape[-2])")],  # scores.size(-1): the positions
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
    # softmax without dim: torch's legacy choice (axis 0 for 1-D and 3-D, else axis 1: the heads of
    # [B,H,T,T]); a finite fill, since -inf in every head of a cell would give NaN
    ("softmax_dim", "implicit"): [("), dim=-1)", "), dim=0 if scores.dim() in (0, 1, 3) else 1)"),
                                  ('float("-inf")), dim', "-1e4), dim")],
    # the bool mask added to the scores as numbers: True = +1, False = +0
    ("mask_mode", "added"): [(_MASKED_SOFTMAX, "torch.softmax(scores + mask, dim=-1)")],
    ("scores", "kq"): [("q @ k.transpose(-2, -1)", "k @ q.transpose(-2, -1)")],
    # kᵀ by reshape (or .view on a contiguous k): k's numbers re-read as [..., d, T], not moved
    ("scores", "kt_view"): [("q @ k.transpose(-2, -1)",
                             "q @ k.reshape(*k.shape[:-2], k.shape[-1], k.shape[-2])")],
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
    "wrong_axes": [("x.transpose(1, 2).reshape(", "x.transpose(2, 3).reshape(")],
}
DEFAULTS = {"scale": "sqrt_d", "mask_mode": "tril", "softmax_dim": -1, "scores": "qk",
            "weights": "softmax"}


def edited(function, edits):
    """`function` of the reference recompiled with `edits` applied to its source text."""
    source = reference.source_of(function.__name__)
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


# -- the block: each named mistake is the reference block with one knob turned ------------------
def reference_copy(**overrides):
    """A fresh copy of the reference (solutions/attention.py) with module-level names replaced:
    the block's forward then calls the replaced split_heads, merge_heads or attend."""
    module = reference.fresh_module("reference_variant")
    for name, value in overrides.items():
        setattr(module, name, value)
    return module


def _attend_knob(name):
    """attend replaced by the attend variant `name`, with its own default mask (the block's mask
    argument ignored, as a forward that builds or skips its own mask does)."""
    def attend(q, k, v, mask=None, return_weights=False):
        context, weights = attend_variant(name, q, k, v)
        return (context, weights) if return_weights else context
    return attend


def _scaled_by_width(q, k, v, mask=None, return_weights=False):
    """The reference attend on q rescaled so the scores are divided by sqrt(D), not sqrt(d)."""
    width = q.shape[1] * q.shape[-1]  # [B,H,T,d]: D = H * d
    return reference.ref.attend(q * math.sqrt(q.shape[-1] / width), k, v, mask, return_weights)


# name -> one knob: globals of the reference replaced, or the built block changed.
MODULE_KNOBS = {
    "split_no_transpose": {"split_heads": lambda x, heads: split(x, heads, "no_transpose")},
    "split_head_minor": {"split_heads": lambda x, heads: split(x, heads, "head_minor")},
    "merge_no_transpose": {"merge_heads": lambda x: merge(x, "no_transpose")},
    "merge_head_minor": {"merge_heads": lambda x: merge(x, "head_minor")},
    "merge_wrong_axes": {"merge_heads": lambda x: merge(x, "wrong_axes")},
    "scale_sqrt_D": {"attend": _scaled_by_width},
}
# Mistakes the block cannot show, so they are no block variants: an inverted mask convention shows
# only with an explicit mask (the block's own default mask, built and filled inverted, gives the
# reference's numbers), and a scale taken from v's width only where v is narrower or wider than q.
ATTEND_ONLY = {"mask_inverted", "scale_from_v"}
MODULE_VARIANTS = sorted((set(ATTEND_VARIANTS) - ATTEND_ONLY) | set(MODULE_KNOBS)
                         | {"no_out_proj", "qkv_order"})


def block(name, wq, wk, wv, wo, heads, max_len, biases=None):
    """The reference block, or its variant `name`, holding the given [out, in] weights; `biases`
    ({q, k, v, o} -> [out]) is the knob of the mistake `bias`.

    A block of one name, shape and bias knob is built once and loaded anew at each call (its
    weights copied in, gradients cleared): what a call returns is valid until the next call with
    the same name and shape, and every caller uses it at once (a forward, a backward, a search
    that runs each variant before building the next).  Built anew at each call, the ~26 blocks
    of a grading took ~150 us each (nn.Module's bookkeeping, and the Linear layers' own
    initialisation, thrown away)."""
    key = (name, wq.shape[1], heads, max_len, biases is not None)
    built = _BUILT.get(key)
    if built is None or not _as_built(built):
        built = _BUILT[key] = _build(name, wq.shape[1], heads, max_len, biases is not None)
    with torch.no_grad():
        built.qkv.weight.copy_(torch.cat([wq, wk, wv]))
        if name != "no_out_proj":
            built.out_proj.weight.copy_(wo)
        if biases is not None:
            built.qkv.bias.copy_(torch.cat([biases[p] for p in "qkv"]))
            built.out_proj.bias.copy_(biases["o"])
    for parameter in built.parameters():
        parameter.grad = None
    return built


_BUILT = {}  # (name, d_model, heads, max_len, with biases) -> the block block() loads


def _build(name, d_model, heads, max_len, with_biases):
    built = reference_for(name).CausalSelfAttention(d_model, heads, max_len)
    if with_biases:
        built.qkv.bias = torch.nn.Parameter(torch.zeros(3 * d_model))
        built.out_proj.bias = torch.nn.Parameter(torch.zeros(d_model))
    if name == "no_out_proj":
        built.out_proj = torch.nn.Identity()
    return built


def _as_built(built):
    """The block is still as _build made it: float32 on the CPU, in training mode (a caller that
    cast, moved or switched it would otherwise hand the next caller another block)."""
    weight = built.qkv.weight
    return weight.dtype == torch.float32 and weight.device.type == "cpu" and built.training


_COPIES = {}


def reference_for(name):
    """The reference itself, or (once per name) a copy of it with that variant's functions."""
    knobs = MODULE_KNOBS.get(name) or ({"attend": _attend_knob(name)} if name in ATTEND_VARIANTS
                                       else None)
    if knobs is None:
        return reference.ref
    if name not in _COPIES:
        _COPIES[name] = reference_copy(**knobs)
    return _COPIES[name]


def _run(built, x):
    with torch.no_grad():
        return built(x, return_weights=True)  # (y [B,T,D], weights [B,H,T,T])


def each_module_candidate(x, wq, wk, wv, wo, heads, max_len=None, biases=None):
    """(name, (y, weights)) for every module variant, the q|k|v orders included (and `bias` when
    the student's block holds biases, read through the contract's names), one at a time: each
    variant is run only once it is reached, so a search that stops at its first match
    (support.mismatch) runs nothing after it."""
    max_len = max_len or x.shape[1]
    for name, built in module_variant_blocks(wq, wk, wv, wo, heads, max_len, biases):
        yield name, _run(built, x)


def module_variant_blocks(wq, wk, wv, wo, heads, max_len, biases=None):
    """(name, block) for every module variant, in each_module_candidate's order, each built when it
    is asked for: a search that stops at its first match builds and runs nothing after it."""
    if biases:
        yield "bias", block("bias", wq, wk, wv, wo, heads, max_len, biases=biases)
    # q|k|v orders first: in the block, k|q|v and scores k @ qᵀ give the same numbers, and a
    # wrong attend is named by attend's own checks.
    blocks = (wq, wk, wv)
    for order in QKV_ORDERS:
        yield "qkv_order", block("qkv_order", *(blocks[i] for i in order), wo, heads, max_len)
    yield "qkv_order", block("qkv_order", *_per_head(wq, wk, wv, heads), wo, heads, max_len)
    for name in MODULE_VARIANTS:
        if name == "qkv_order":
            continue
        yield name, block(name, wq, wk, wv, wo, heads, max_len)


def _per_head(wq, wk, wv, heads):
    """The rows a forward that cuts qkv(x) per head as [B,T,H,3d] reads as q, k and v: the
    fused weight's rows regrouped, so the reference's [q | k | v] split reads them that way."""
    fused = torch.cat([wq, wk, wv])  # [3D, D]
    width = wq.shape[0]
    d = width // heads
    per_head = fused.reshape(heads, 3, d, -1)  # row h*3d + j*d + i is head h, block j, row i
    return tuple(per_head[:, j].reshape(width, -1) for j in range(3))
