import math

import torch
from torch import nn


def split_heads(x, heads):
    batch, length, width = x.shape
    if heads <= 0:
        raise ValueError("need at least one head")
    if width % heads != 0:
        raise ValueError("width not divisible by heads")
    head_width = width // heads
    return x.reshape(batch, length, heads, head_width.transpose(1, 2)


def merge_heads(x):
    batch, heads, length, head_width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_width)


def stable_softmax(scores):
    """exp(s - max) / sum: the row max is finite because every row may read itself."""
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=-1, keepdim=True)


def attend(q, k, v, mask=None, return_weights=False):
    scores = q @ k.transpose(-2, -1)
    scores = scores / math.sqrt(q.shape[-1])
    if mask is None:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
    scores = scores.masked_fill(torch.logical_not(mask), float("-inf"))
    weights = stable_softmax(scores)
    context = weights @ v
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError("bad n_heads")
        self.d_model = d_model
        self.n_heads = n_heads
        self.max_len = max_len
        self.qkv = nn.Linear(d_model, d_model * 3, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).tril(), persistent=True)

    def forward(self, x, return_weights=False):
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError("too long")
        fused = self.qkv(x)
        q = fused[..., : self.d_model]
        k = fused[..., self.d_model: 2 * self.d_model]
        v = fused[..., 2 * self.d_model:]
        q, k, v = split_heads(q, self.n_heads), split_heads(k, self.n_heads), split_heads(v, self.n_heads)
        context, weights = attend(q, k, v, self.mask[:length, :length], return_weights=True)
        y = self.out_proj(merge_heads(context))
        if return_weights:
            return y, weights
        return y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
