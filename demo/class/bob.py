import math

import torch
from torch import nn


def split_heads(x, heads):
    B, T, D = x.size()
    if heads <= 0 or D % heads != 0:
        raise ValueError("invalid heads")
    return x.contiguous().view(B, T, heads, D // heads).permute(0, 2, 1, 3)


def merge_heads(x):
    B, H, T, d = x.size()
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * d)


def attend(q, k, v, mask=None, return_weights=False):
    T = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if mask is None:
        forbidden = torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), diagonal=1)
    else:
        forbidden = ~mask
    att = att.masked_fill(forbidden, float("-inf"))
    att = torch.nn.functional.softmax(att, dim=-1)
    y = att @ v
    if return_weights:
        return y, att
    return y


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if not n_heads > 0 or d_model % n_heads != 0:
            raise ValueError("n_heads must divide d_model")
        self.n_head, self.n_embd, self.block_size = n_heads, d_model, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x, return_weights=False):
        B, T, C = x.size()
        if T > self.block_size:
            raise ValueError(f"Cannot forward sequence of length {T}, block size is {self.block_size}")
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        q = split_heads(q, self.n_head)
        k = split_heads(k, self.n_head)
        v = split_heads(v, self.n_head)
        y, att = attend(q, k, v, mask=self.mask[:T, :T], return_weights=True)
        y = self.out_proj(merge_heads(y))
        return (y, att) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
