# mistake: forward builds a new output Linear on every call instead of using self.out_proj
# expect-fail: module.causal
# expect-fail: module.reference
# expect-key: random_new_weights
# expect-fail: module.dtype
# expect-key: dtype_forced
# the new Linear is made on the CPU: on a GPU `x @ w` fails (on meta too, under CUDA's rule)
# expect-fail: module.device
# expect-key: forward_tensor_on_cpu
# the same mistake, seen by two more checks: out_proj never gets a gradient, and the trained block
# is no attention (its output layer is new and random on every call)
# expect-fail: module.gradients
# expect-fail: module.learns
"""Lesson 12: multi-head attention (a compact hand-written version)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, heads):
    b, t, width = x.shape
    if heads <= 0 or width % heads:
        raise ValueError(f"cannot split {width} features into {heads} heads")
    return x.reshape(b, t, heads, width // heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def attend(q, k, v, mask=None, return_weights=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is None:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    weights = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    context = weights @ v
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}")
        self.n_heads, self.max_len = n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    def forward(self, x, return_weights=False):
        b, t, width = x.shape
        if t > self.max_len:
            raise ValueError(f"T={t} is longer than max_len={self.max_len}")
        q, k, v = (split_heads(part, self.n_heads) for part in self.qkv(x).split(width, dim=-1))
        context, weights = attend(q, k, v, self.mask[:t, :t], return_weights=True)
        y = nn.Linear(width, width, bias=False)(merge_heads(context))
        return (y, weights) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
