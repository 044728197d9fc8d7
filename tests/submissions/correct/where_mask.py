# style: torch.where(mask, scores, float('-inf')), k.mT, F.softmax
import math

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, heads):
    *lead, width = x.shape
    if heads <= 0 or width % heads:
        raise ValueError(f"cannot split width {width} into {heads} heads")
    return x.unflatten(-1, (heads, width // heads)).transpose(-3, -2)


def merge_heads(x):
    return x.transpose(-3, -2).flatten(-2)


def attend(q, k, v, mask=None, return_weights=False):
    scores = (q @ k.mT) / math.sqrt(q.shape[-1])
    if mask is None:
        n = scores.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril()
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    weights = F.softmax(torch.where(mask, scores, neg_inf), dim=-1)
    out = weights @ v
    return (out, weights) if return_weights else out


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError(f"d_model={d_model}, n_heads={n_heads}")
        self.n_heads, self.max_len = n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        causal = torch.ones(max_len, max_len).tril() > 0
        self.register_buffer("mask", causal)

    def forward(self, x, return_weights=False):
        T = x.shape[-2]
        if T > self.max_len:
            raise ValueError("sequence longer than max_len")
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).tensor_split(3, dim=-1))
        out, weights = attend(q, k, v, mask=self.mask[:T, :T], return_weights=True)
        y = self.out_proj(merge_heads(out))
        return (y, weights) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
