# style: additive -inf bias, split by torch.split+stack, merge by cat(unbind), attention via 3-D bmm
import math

import torch
from torch import nn


def split_heads(x, heads):
    if not isinstance(heads, int) or heads <= 0:
        raise ValueError("heads must be a positive int")
    B, T, D = x.shape
    if D % heads != 0:
        raise ValueError("D % heads != 0")
    return torch.stack(x.split(D // heads, dim=-1), dim=1)  # H pieces of [B,T,d] -> [B,H,T,d]


def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)  # [B,T,d] * H -> [B,T,H*d]


def attend(q, k, v, mask=None, return_weights=False):
    lead = q.shape[:-2]
    T, d = q.shape[-2], q.shape[-1]
    q3 = q.reshape(-1, T, d)
    k3 = k.reshape(-1, k.shape[-2], d)
    v3 = v.reshape(-1, v.shape[-2], v.shape[-1])
    scores = torch.bmm(q3, k3.transpose(1, 2)) / math.sqrt(d)       # [N,T,T]
    scores = scores.reshape(*lead, T, k.shape[-2])
    if mask is None:
        mask = torch.ones(T, k.shape[-2], dtype=torch.bool, device=scores.device).tril()
    # An additive float mask: 0 where reading is allowed, -inf elsewhere, made where the scores are.
    bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores + bias, dim=-1)
    context = torch.bmm(weights.reshape(-1, T, k.shape[-2]), v3).reshape(*lead, T, v.shape[-1])
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError("n_heads")
        self.n_heads, self.max_len, self.d_model = n_heads, max_len, d_model
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.ones(max_len, max_len).tril().bool())

    def forward(self, x, return_weights=False):
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError("too long")
        q, k, v = torch.split(self.qkv(x), self.d_model, dim=-1)
        context, weights = attend(split_heads(q, self.n_heads), split_heads(k, self.n_heads),
                                  split_heads(v, self.n_heads), self.mask[:T, :T], return_weights=True)
        y = self.out_proj(merge_heads(context))
        return (y, weights) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4.0, 5.0, 6.0, 7.0]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4.0, 5.0]
Q2_WRONG = [2.0, 3.0]
Q2_SHAPE_IS_ENOUGH = False
