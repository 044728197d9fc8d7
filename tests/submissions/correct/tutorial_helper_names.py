# style: the tutorials' helper names for hand-written attention: a function
# scaled_dot_product_attention, a method scaled_dot_product, a variable holding the helper, and
# separate q/k/v projections; nothing of torch's ready-made attention is used
"""Lesson 12: multi-head attention, written the way many tutorials name things."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, heads):
    b, t, width = x.shape
    if heads <= 0 or width % heads:
        raise ValueError("heads must be a positive divisor of the width")
    return x.view(b, t, heads, width // heads).permute(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d)


def scaled_dot_product_attention(query, key, value, allowed):
    """softmax(q kᵀ / √d) v over the last two axes; `allowed` is True where a query may read."""
    logits = torch.matmul(query, key.transpose(-1, -2)) * (1.0 / math.sqrt(query.size(-1)))
    logits = logits.masked_fill(allowed.logical_not(), float("-inf"))
    probabilities = F.softmax(logits, dim=-1)
    return torch.matmul(probabilities, value), probabilities


def attend(q, k, v, mask=None, return_weights=False):
    if mask is None:
        mask = torch.tril(torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device))
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    if return_weights:
        return context, weights
    return context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError("n_heads must be a positive divisor of d_model")
        self.n_heads, self.max_len = n_heads, max_len
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).bool())
        self.scaled_dot_product_attention = scaled_dot_product_attention

    def scaled_dot_product(self, q, k, v, t):
        return self.scaled_dot_product_attention(q, k, v, self.mask[:t, :t])

    def forward(self, x, return_weights=False):
        t = x.size(1)
        if t > self.max_len:
            raise ValueError(f"sequence of {t} positions is longer than max_len={self.max_len}")
        q, k, v = (split_heads(proj(x), self.n_heads)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        context, weights = self.scaled_dot_product(q, k, v, t)
        y = self.out_proj(merge_heads(context))
        return (y, weights) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
