import math

import torch
from torch import nn


def split_heads(x, heads):
    b, t, width = x.shape
    if not (heads > 0 and width % heads == 0):
        raise ValueError("heads must be a positive divisor of the width")
    # [b,t,(h d)] -> [b,h,t,d]
    return torch.einsum("bthd->bhtd", x.reshape(b, t, heads, width // heads))


def merge_heads(x):
    b, h, t, d = x.shape
    return torch.einsum("bhtd->bthd", x).reshape(b, t, h * d)


def attend(q, k, v, mask=None, return_weights=False):
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.size(-1))
    if mask is None:
        i = torch.arange(q.size(-2), device=q.device)[:, None]
        j = torch.arange(k.size(-2), device=q.device)[None, :]
        mask = j <= i
    scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    context = torch.einsum("...ij,...jd->...id", weights, v)
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError("d_model must be divisible by a positive n_heads")
        self.h = n_heads
        self.max_len = max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        idx = torch.arange(max_len)
        self.register_buffer("mask", idx[None, :] <= idx[:, None])

    def forward(self, x, return_weights=False):
        b, t, width = x.shape
        if t > self.max_len:
            raise ValueError("sequence too long")
        w_q, w_k, w_v = self.qkv.weight.chunk(3, dim=0)  # each [D, D] (out, in)
        q, k, v = (split_heads(torch.einsum("btc,oc->bto", x, w), self.h) for w in (w_q, w_k, w_v))
        context, weights = attend(q, k, v, self.mask[:t, :t], return_weights=True)
        y = torch.einsum("btc,oc->bto", merge_heads(context), self.out_proj.weight)
        return (y, weights) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
