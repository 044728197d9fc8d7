"""Known-wrong implementations, computed on the judge side from the same inputs and weights:
where a student's output matches one and not the reference, the feedback names the mistake (the
variant's name is a rubric message key).

attend, split_heads and merge_heads are written once more here as plain code with knobs: a named
mistake is a row {rubric key: {knob: setting}}, and every knob at its default computes exactly
the reference's numbers (tests/test_variants.py).  The block's variants are the reference block
with one knob: a function replaced in a fresh copy of the reference, its weights' blocks
reordered, out_proj dropped, or the student's own biases added.
"""
import functools
import itertools
import math

import torch

from grader.judge.secret import reference


# -- attend: the reference's steps, each knob a setting of one of them ---------------------------
SCORES = {
    "qk": lambda q, k: q @ k.transpose(-2, -1),
    "kq": lambda q, k: k @ q.transpose(-2, -1),  # the scores' transpose
    # kᵀ by reshape (or .view on a contiguous k): k's numbers re-read as [..., d, T], not moved
    "kt_view": lambda q, k: q @ k.reshape(*k.shape[:-2], k.shape[-1], k.shape[-2]),
}
# scale setting -> the scores scaled; "t" is scores.size(-1), the positions; "after_softmax"
# leaves them as they are and divides the weights instead.
SCALES = {
    "sqrt_d": lambda s, q, k, v: s / math.sqrt(q.shape[-1]),
    "none": lambda s, q, k, v: s,
    "multiplied": lambda s, q, k, v: s * math.sqrt(q.shape[-1]),
    "d": lambda s, q, k, v: s / q.shape[-1],
    "v_width": lambda s, q, k, v: s / math.sqrt(v.shape[-1]),
    "t": lambda s, q, k, v: s / math.sqrt(k.shape[-2]),
    "after_softmax": lambda s, q, k, v: s,
}
# mask setting -> the mask built when none is given (True = may read), from all-True [Tq, Tk];
# "inverted" builds the blocked cells (True = blocked) and fills where it is True.
DEFAULT_MASKS = {"tril": lambda ones: ones.tril(), "none": lambda ones: ones,
                 "diagonal": lambda ones: ones.tril(-1), "anti_causal": lambda ones: ones.triu(),
                 "off_by_one": lambda ones: ones.tril(1), "inverted": lambda ones: ones.triu(1)}
# context setting -> the context from the weights [..., T, T] and v [..., T, d]
CONTEXTS = {
    "weights_v": lambda w, v: w @ v,
}
# Every knob of `attention` and its settings, the default (the reference's) first.
ATTEND_KNOBS = {
    "scale": list(SCALES),
    "mask": list(DEFAULT_MASKS) + ["after_softmax", "after_softmax_inf", "fill_zero", "added"],
    # "implicit": softmax without dim, torch's legacy choice (axis 0 for 1-D and 3-D, else axis
    # 1: the heads of [B,H,T,T]), with a finite fill, since -inf in every head of a cell is NaN
    "softmax_dim": [-1, -2, "implicit"],
    "scores": list(SCORES),
    "weights": ["softmax", "prescores"],  # prescores: the masked scores returned as the weights
    "context": list(CONTEXTS),
}


def attention(q, k, v, allowed=None, scale="sqrt_d", mask="tril", softmax_dim=-1, scores="qk",
              weights="softmax", context="weights_v"):
    """The reference's attend(q, k, v, allowed, return_weights=True) with knobs turned: (context,
    weights).  `allowed` is attend's mask argument; `mask` the knob of how a mask is applied."""
    _check_knobs(ATTEND_KNOBS, "attention", scale=scale, mask=mask, softmax_dim=softmax_dim,
                 scores=scores, weights=weights, context=context)
    raw = SCALES[scale](SCORES[scores](q, k), q, k, v)  # [..., T, T]
    if allowed is None:
        ones = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device)
        allowed = DEFAULT_MASKS.get(mask, DEFAULT_MASKS["tril"])(ones)
    blocked = allowed if mask == "inverted" else ~allowed
    dim = softmax_dim
    if softmax_dim == "implicit":
        dim = 0 if raw.dim() in (0, 1, 3) else 1
    if mask == "after_softmax":
        w = torch.softmax(raw, dim=dim).masked_fill(blocked, 0.0)
    elif mask == "after_softmax_inf":
        w = torch.softmax(raw, dim=dim).masked_fill(blocked, float("-inf"))
    elif mask == "added":  # the bool mask added to the scores as numbers: True = +1, False = +0
        w = torch.softmax(raw + allowed, dim=dim)
    else:
        fill = 0.0 if mask == "fill_zero" else -1e4 if softmax_dim == "implicit" else float("-inf")
        w = torch.softmax(raw.masked_fill(blocked, fill), dim=dim)  # [..., T, T]
    if scale == "after_softmax":
        w = w / math.sqrt(q.shape[-1])
    out = CONTEXTS[context](w, v)  # [..., T, d]
    if weights == "prescores":
        w = raw.masked_fill(blocked, float("-inf"))
    return out, w


# -- split_heads and merge_heads: the layout of the heads is their one knob ----------------------
SPLITS = {  # layout -> [B,T,D] as [B,H,T,d], from (x, B, T, H, d)
    "head_major": lambda x, b, t, h, d: x.reshape(b, t, h, d).transpose(1, 2),
    "no_transpose": lambda x, b, t, h, d: x.reshape(b, h, t, d),  # read straight as [B,H,T,d]
    "head_minor": lambda x, b, t, h, d: x.reshape(b, t, d, h).permute(0, 3, 1, 2),  # h, h+H, ...
}
MERGES = {  # layout -> [B,H,T,d] ordered as what is read as [B,T,H*d]
    "head_major": lambda x: x.transpose(1, 2),
    "no_transpose": lambda x: x,
    "head_minor": lambda x: x.permute(0, 2, 3, 1),  # the heads' features interleaved
    "wrong_axes": lambda x: x.transpose(2, 3),  # T and d swapped instead of H and T
}
SPLIT_KNOBS, MERGE_KNOBS = {"layout": list(SPLITS)}, {"layout": list(MERGES)}


def split_heads(x, heads, layout="head_major"):
    """The reference's split_heads (for a valid `heads`) with the heads laid out per `layout`."""
    _check_knobs(SPLIT_KNOBS, "split_heads", layout=layout)
    batch, positions, width = x.shape
    return SPLITS[layout](x, batch, positions, heads, width // heads)


def merge_heads(x, layout="head_major"):
    """The reference's merge_heads with the heads laid out per `layout`."""
    _check_knobs(MERGE_KNOBS, "merge_heads", layout=layout)
    batch, heads, positions, width = x.shape
    return MERGES[layout](x).reshape(batch, positions, heads * width)


def _check_knobs(knobs, function, **settings):
    """Raise for a knob or setting `function` does not have: a typo in a table is never the
    reference's numbers under a mistake's name."""
    for knob, setting in settings.items():
        if setting not in knobs.get(knob, ()):
            raise ValueError(f"{function} has no knob {knob}={setting!r} "
                             f"(its knobs: {knobs})")


# -- the named mistakes: rubric key ([messages] in rubric.toml) -> {knob: setting} ----------------
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
SPLIT_VARIANTS = {
    "split_no_transpose": {"layout": "no_transpose"},
    "split_head_minor": {"layout": "head_minor"},
}
MERGE_VARIANTS = {
    "merge_no_transpose": {"layout": "no_transpose"},
    "merge_head_minor": {"layout": "head_minor"},
    "merge_wrong_axes": {"layout": "wrong_axes"},
}


def check_tables():
    """Every row's knobs are its function's: a typo fails the import, not a grading."""
    for table, knobs, function in ((ATTEND_VARIANTS, ATTEND_KNOBS, "attention"),
                                   (SPLIT_VARIANTS, SPLIT_KNOBS, "split_heads"),
                                   (MERGE_VARIANTS, MERGE_KNOBS, "merge_heads")):
        for row in table.values():
            _check_knobs(knobs, function, **row)


check_tables()
# Every other order of the fused [q | k | v] blocks is the same mistake, qkv_order.
QKV_ORDERS = [p for p in itertools.permutations(range(3)) if p != (0, 1, 2)]


def attend_variant(name, q, k, v, mask=None):
    """attend(q, k, v, mask, return_weights=True) with the named mistake: (context, weights)."""
    return attention(q, k, v, mask, **ATTEND_VARIANTS[name])


# -- the block: each named mistake is the reference block with one knob turned ------------------
def reference_copy(**overrides):
    """A fresh copy of the reference with module-level functions replaced (the block's forward
    then calls the replaced split_heads, merge_heads or attend)."""
    module = reference.fresh_module("reference_variant")
    for name, value in overrides.items():
        if not callable(getattr(module, name, None)):  # a renamed function would go unreplaced
            raise ValueError(f"the reference has no function {name!r} for a variant to replace")
        setattr(module, name, value)
    return module


def _attend_knob(name):
    """attend replaced by the attend variant `name` with its own default mask (the block's mask
    ignored, as a forward that builds or skips its own mask does)."""
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
    **{name: {"split_heads": functools.partial(split_heads, **knobs)}
       for name, knobs in SPLIT_VARIANTS.items()},
    **{name: {"merge_heads": functools.partial(merge_heads, **knobs)}
       for name, knobs in MERGE_VARIANTS.items()},
    "scale_sqrt_D": {"attend": _scaled_by_width},
}
# Mistakes the block cannot show, so they are no block variants: an inverted mask convention shows
# only with an explicit mask (the block's own default mask, built and filled inverted, gives the
# reference's numbers), and a scale taken from v's width only where v is narrower or wider than q.
ATTEND_ONLY = {"mask_inverted", "scale_from_v"}
MODULE_VARIANTS = sorted((set(ATTEND_VARIANTS) - ATTEND_ONLY) | set(MODULE_KNOBS)
                         | {"no_out_proj", "qkv_order"})


def block(name, wq, wk, wv, wo, heads, max_len, biases=None):
    """A new reference block, or its variant `name`, holding the given [out, in] weights;
    `biases` ({q, k, v, o} -> [out]) is the knob of the mistake `bias`."""
    width = wq.shape[1]
    built = reference_for(name).CausalSelfAttention(width, heads, max_len)
    if biases is not None:
        built.qkv.bias = torch.nn.Parameter(torch.zeros(3 * width))
        built.out_proj.bias = torch.nn.Parameter(torch.zeros(width))
    with torch.no_grad():
        built.qkv.weight.copy_(torch.cat([wq, wk, wv]))
        built.out_proj.weight.copy_(wo)
        if biases is not None:
            built.qkv.bias.copy_(torch.cat([biases[p] for p in "qkv"]))
            built.out_proj.bias.copy_(biases["o"])
    if name == "no_out_proj":
        built.out_proj = torch.nn.Identity()
    return built


def reference_for(name):
    """The reference itself, or a new copy of it with that variant's functions."""
    knobs = MODULE_KNOBS.get(name) or ({"attend": _attend_knob(name)} if name in ATTEND_VARIANTS
                                       else None)
    return reference_copy(**knobs) if knobs else reference.ref


def module_variant_blocks(wq, wk, wv, wo, heads, max_len, biases=None):
    """(name, block) for every named mistake of the block: `bias` first where the student's
    block holds biases, then the other orders of the q|k|v blocks, then the rest."""
    named = [("bias", block("bias", wq, wk, wv, wo, heads, max_len, biases))] if biases else []
    orders = [[(wq, wk, wv)[i] for i in order] for order in QKV_ORDERS]
    orders.append(_per_head(wq, wk, wv, heads))
    named += [("qkv_order", block("qkv_order", *blocks, wo, heads, max_len)) for blocks in orders]
    named += [(name, block(name, wq, wk, wv, wo, heads, max_len)) for name in MODULE_VARIANTS
              if name != "qkv_order"]
    return named


def module_candidates(x, wq, wk, wv, wo, heads, max_len, biases=None):
    """(name, (y, weights)) of every named mistake of the block on x (module_variant_blocks)."""
    with torch.no_grad():
        return [(name, built(x, return_weights=True))
                for name, built in module_variant_blocks(wq, wk, wv, wo, heads, max_len, biases)]


def _per_head(wq, wk, wv, heads):
    """The fused weight's rows regrouped as a forward that cuts qkv(x) per head as [B,T,H,3d]
    reads them as q, k and v."""
    fused = torch.cat([wq, wk, wv])  # [3D, D]
    width = wq.shape[0]
    d = width // heads
    per_head = fused.reshape(heads, 3, d, -1)  # row h*3d + j*d + i is head h, block j, row i
    return tuple(per_head[:, j].reshape(width, -1) for j in range(3))
