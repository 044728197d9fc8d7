"""Known-wrong implementations, computed on the judge side from the same inputs and weights.

When a student's output matches one of these and not the reference, the feedback names the
mistake (the variant's name is a rubric message key).  Each variant is the lesson's attention with
one knob turned; the kit's tests prove that each named mistake, written by hand as a student
would, is caught and named.
"""
import itertools
import math

import torch

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
