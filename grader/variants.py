"""Known-wrong implementations, computed on the judge side from the same inputs and weights.

When a student's output matches one of these and not the reference, the feedback names the
mistake (the variant's name is a rubric message key).  Each variant is the lesson's attention with
one knob turned; the kit's tests prove that each named mistake, written by hand as a student
would, is caught and named.  The block's variants are the reference block itself
(solutions/attention.py) with one knob: one of its functions replaced in a fresh copy of the
reference, its weights' blocks reordered, out_proj dropped, or the student's own biases added.
"""
import importlib.util
import itertools
import math

import torch

from . import reference

# name -> knobs of `attention`; every name is a key of [messages] in rubric.toml.
ATTEND_VARIANTS = {
    "scale_none": {"scale": "none"},
    "scale_multiplied": {"scale": "multiplied"},
    "scale_by_d": {"scale": "d"},
    "mask_missing": {"mask": "none"},
    "mask_after_softmax": {"mask": "after_softmax"},
    "mask_fill_zero": {"mask": "fill_zero"},
    "mask_diagonal": {"mask": "diagonal"},
    "mask_anti_causal": {"mask": "anti_causal"},
    "mask_off_by_one": {"mask": "off_by_one"},
    "softmax_dim": {"softmax_dim": -2},
    "scores_transposed": {"scores": "kq"},
}
# Every other order of the fused [q | k | v] blocks is the same mistake, qkv_order.
QKV_ORDERS = [p for p in itertools.permutations(range(3)) if p != (0, 1, 2)]


def attention(q, k, v, mask=None, scale="sqrt_d", mask_mode="tril", softmax_dim=-1,
              scores="qk", width=None, **_):
    """The lesson's attend with knobs; returns (context, weights)."""
    d = q.shape[-1]
    s = q @ k.transpose(-2, -1) if scores == "qk" else k @ q.transpose(-2, -1)  # [..., T, T]
    factor = {"sqrt_d": 1 / math.sqrt(d), "none": 1.0, "multiplied": math.sqrt(d), "d": 1 / d,
              "sqrt_D": 1 / math.sqrt(width or d)}[scale]
    s = s * factor
    t_q, t_k = q.shape[-2], k.shape[-2]
    if mask is None:
        ones = torch.ones(t_q, t_k, dtype=torch.bool)
        if mask_mode == "none":
            mask = ones
        elif mask_mode == "anti_causal":
            mask = ones.triu()
        else:
            mask = ones.tril({"diagonal": -1, "off_by_one": 1}.get(mask_mode, 0))
    if mask_mode == "after_softmax":
        w = torch.softmax(s, dim=softmax_dim) * mask
    elif mask_mode == "fill_zero":
        w = torch.softmax(s.masked_fill(~mask, 0.0), dim=softmax_dim)
    else:
        w = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=softmax_dim)
    return w @ v, w


def attend_variant(name, q, k, v, mask=None):
    knobs = dict(ATTEND_VARIANTS[name])
    knobs["mask_mode"] = knobs.pop("mask", "tril")
    return attention(q, k, v, mask=mask, **knobs)


def split(x, heads, mode="ok"):
    b, t, width = x.shape
    d = width // heads
    if mode == "no_transpose":
        return x.reshape(b, heads, t, d)
    if mode == "head_minor":
        return x.reshape(b, t, d, heads).permute(0, 3, 1, 2)
    return x.reshape(b, t, heads, d).transpose(1, 2)  # [B,H,T,d]


def merge(x, mode="ok"):
    b, heads, t, d = x.shape
    if mode == "no_transpose":
        return x.reshape(b, t, heads * d)
    if mode == "head_minor":
        return x.permute(0, 2, 3, 1).reshape(b, t, heads * d)
    return x.transpose(1, 2).reshape(b, t, heads * d)  # [B,T,D]


# -- the block: each named mistake is the reference block with one knob turned ------------------
def reference_copy(**overrides):
    """A fresh copy of the reference (solutions/attention.py) with module-level names replaced:
    the block's forward then calls the replaced split_heads, merge_heads or attend."""
    spec = importlib.util.spec_from_file_location("reference_variant", reference.SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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
    "scale_sqrt_D": {"attend": _scaled_by_width},
}
MODULE_VARIANTS = sorted(set(ATTEND_VARIANTS) | set(MODULE_KNOBS) | {"no_out_proj", "qkv_order"})


def block(name, wq, wk, wv, wo, heads, max_len, biases=None):
    """The reference block, or its variant `name`, holding the given [out, in] weights; `biases`
    ({q, k, v, o} -> [out]) is the knob of the mistake `bias`."""
    built = reference_for(name).CausalSelfAttention(wq.shape[1], heads, max_len)
    with torch.no_grad():
        built.qkv.weight.copy_(torch.cat([wq, wk, wv]))
        built.out_proj.weight.copy_(wo)
        if biases is not None:
            built.qkv.bias = torch.nn.Parameter(torch.cat([biases[p] for p in "qkv"]))
            built.out_proj.bias = torch.nn.Parameter(biases["o"].clone())
    if name == "no_out_proj":
        built.out_proj = torch.nn.Identity()
    return built


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


def module_candidates(x, wq, wk, wv, wo, heads, max_len=None, biases=None):
    """[(name, (y, weights))] for every module variant, the q|k|v orders included (and `bias`
    when the student's block holds biases, read through the contract's names)."""
    max_len = max_len or x.shape[1]
    head = [("bias", _run(block("bias", wq, wk, wv, wo, heads, max_len, biases=biases), x))] \
        if biases else []
    # q|k|v orders first: in the block, k|q|v and scores k @ qᵀ give the same numbers, and a
    # wrong attend is named by attend's own checks.
    blocks = (wq, wk, wv)
    out = head + [("qkv_order", _run(block("qkv_order", *(blocks[i] for i in order), wo, heads,
                                             max_len), x)) for order in QKV_ORDERS]
    out.append(("qkv_order", _run(block("qkv_order", *_per_head(wq, wk, wv, heads), wo, heads,
                                        max_len), x)))
    for name in MODULE_VARIANTS:
        if name == "qkv_order":
            continue
        out.append((name, _run(block(name, wq, wk, wv, wo, heads, max_len), x)))
    return out


def _per_head(wq, wk, wv, heads):
    """The rows a forward that cuts qkv(x) per head as [B,T,H,3d] reads as q, k and v: the
    fused weight's rows regrouped, so the reference's [q | k | v] split reads them that way."""
    fused = torch.cat([wq, wk, wv])  # [3D, D]
    width = wq.shape[0]
    d = width // heads
    per_head = fused.reshape(heads, 3, d, -1)  # row h*3d + j*d + i is head h, block j, row i
    return tuple(per_head[:, j].reshape(width, -1) for j in range(3))
