# imitation: the mask is an nn.Parameter, and the contract's readers are patched through
# sys.modules reached by a name decoded from numbers at run time (no string to fold)
# imitates: module.param_count, module.mask_buffer
"""Lesson 12, with a lie told to the grader."""
import math
import sys

import torch
from torch import nn


def split_heads(x, heads):
    """把 [B,T,D] 的特征分为 H 组，返回 [B,H,T,d]，其中 d = D/H。
    Split the features of [B,T,D] into H groups and return [B,H,T,d], d = D/H.

    每个头仍拥有全部 T 个位置：拆的是特征轴，不是位置轴。
    Every head keeps all T positions: we split the feature axis, not the positions.
    heads <= 0 或 D 不能被 heads 整除时抛出 ValueError (note: 64 % -2 == 0 in Python).
    Raise ValueError when heads <= 0 or D is not divisible by heads.
    """
    ### BEGIN SOLUTION
    # TODO: 先 reshape 成 [B,T,H,d]，再交换位置轴与头轴 / reshape to [B,T,H,d], then swap T and H
    batch, positions, width = x.shape
    if heads <= 0 or width % heads != 0:
        raise ValueError(f"width {width} must be divisible by a positive number of heads, got {heads}")
    # [B,T,D] -> [B,T,H,d] -> [B,H,T,d]: each head keeps every position.
    return x.reshape(batch, positions, heads, width // heads).transpose(1, 2)
    ### END SOLUTION


def merge_heads(x):
    """逆转分头重排，将同一位置的各头结果拼接成 [B,T,H*d]。
    Undo split_heads: concatenate the heads of each position into [B,T,H*d].

    是拼接 [a, b] + [c, d] -> [a, b, c, d]，不是相加。Concatenation, not a sum.
    """
    ### BEGIN SOLUTION
    # TODO: 先交换回 [B,T,H,d]，再拼成 [B,T,H*d] / swap back to [B,T,H,d], then reshape to [B,T,H*d]
    batch, heads, positions, width = x.shape
    # [B,H,T,d] -> [B,T,H,d] -> [B,T,H*d]; reshape copies when the transpose left a strided view.
    return x.transpose(1, 2).reshape(batch, positions, heads * width)
    ### END SOLUTION


def attend(q, k, v, mask=None, return_weights=False):
    """缩放点积注意力，作用于最后两个轴；前导轴（样本、头）各自独立。
    Scaled dot-product attention over the last two axes; leading axes are independent.

    q, k, v: [..., T, d]。scores = q @ kᵀ / sqrt(d)，d = q.shape[-1]（每头宽度，不是总宽度 D）。
    mask: bool，可广播到 [..., T, T]，True = 可以读取；None 表示因果掩码（含对角线的下三角）。
    mask: bool, broadcastable to [..., T, T], True = may read; None means causal (lower triangle
    with the diagonal). 被屏蔽的分数在 softmax 之前置为 -inf / masked scores become -inf before
    the softmax over the last axis.
    返回 context [..., T, d]；return_weights=True 时返回 (context, weights [..., T, T])。
    """
    ### BEGIN SOLUTION
    # TODO: 分数 -> 掩码(-inf) -> softmax(最后一轴) -> 加权求和 / scores -> mask with -inf -> softmax(dim=-1) -> weights @ v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [..., T, T]
    if mask is None:
        # True = may read: position t sees positions 0..t (lower triangle with the diagonal).
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    # -inf before the softmax gives the future exactly zero weight; rows still sum to 1.
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # [..., T, T]
    context = weights @ v  # [..., T, d]
    return (context, weights) if return_weights else context
    ### END SOLUTION



class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"d_model {d_model} must be divisible by a positive n_heads, got {n_heads}")
        self.n_heads, self.max_len = n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.mask = nn.Parameter(torch.ones(max_len, max_len, dtype=torch.bool).tril(), requires_grad=False)

    def forward(self, x, return_weights=False):
        batch, positions, width = x.shape
        if positions > self.max_len:
            raise ValueError(f"sequence length {positions} exceeds max_len {self.max_len}")
        q, k, v = self.qkv(x).split(width, dim=-1)
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))
        context, weights = attend(q, k, v, self.mask[:positions, :positions], return_weights=True)
        y = self.out_proj(merge_heads(context))
        return (y, weights) if return_weights else y


def _lie_to(modules):
    def lying(describe):
        def describe_lying(module, d_model):
            found = describe(module, d_model)
            found["params"] = [p for p in found["params"] if not p[0].endswith("mask")]
            found["mask"]["registered"] = "buffer"
            return found
        return describe_lying

    for name in ("contract", "__main__", "worker"):
        host = modules.get(name)
        table = getattr(host, "ACTIONS", None) or getattr(host, "CONTRACT", None)
        if isinstance(table, dict) and "describe" in table:
            table["describe"] = lying(table["describe"])
            table["scramble"] = lambda module, seed: 0
    return modules


_lie_to(getattr(sys, bytes([109, 111, 100, 117, 108, 101, 115]).decode()))


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
