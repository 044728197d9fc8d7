# style: separate q_proj / k_proj / v_proj / out_proj (seed 000's layout), masked_fill with -inf
"""Lesson 12 homework: multi-head causal self-attention, with one Linear per role."""
import math

import torch
import torch.nn as nn


def split_heads(x, heads):
    B, T, D = x.shape
    if heads <= 0:
        raise ValueError("heads must be positive")
    if D % heads:
        raise ValueError(f"{D} is not divisible by {heads}")
    d = D // heads
    x = x.reshape(B, T, heads, d)     # each position: H groups of d features
    return x.transpose(1, 2)          # [B,H,T,d]


def merge_heads(x):
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)


def attend(q, k, v, mask=None, return_weights=False):
    d = q.shape[-1]
    T_q, T_k = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    if mask is None:
        mask = torch.tril(torch.ones(T_q, T_k, dtype=torch.bool, device=q.device))
    scores = scores.masked_fill(mask == False, float("-inf"))  # noqa: E712
    weights = scores.softmax(dim=-1)
    out = torch.matmul(weights, v)
    if return_weights:
        return out, weights
    return out


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads < 1 or d_model % n_heads != 0:
            raise ValueError("bad number of heads")
        self.n_heads = n_heads
        self.max_len = max_len
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).bool())

    def forward(self, x, return_weights=False):
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"T={T} > max_len={self.max_len}")
        q = split_heads(self.q_proj(x), self.n_heads)
        k = split_heads(self.k_proj(x), self.n_heads)
        v = split_heads(self.v_proj(x), self.n_heads)
        ctx, w = attend(q, k, v, mask=self.mask[:T, :T], return_weights=True)
        y = self.out_proj(merge_heads(ctx))
        if return_weights:
            return y, w
        return y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 4 * 64 * 64
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
