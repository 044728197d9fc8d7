# style: folder submission; qkv(x) viewed as [B,T,3,H,d] and unbound, the mask as a non-persistent buffer
import math

import torch
from torch import nn
from torch.nn import functional as F


def split_heads(x, heads):
    B, T, D = x.shape
    if heads <= 0 or D % heads != 0:
        raise ValueError(f"D={D} cannot be split into {heads} heads")
    return x.reshape(B, T, heads, -1).permute(0, 2, 1, 3)


def merge_heads(x):
    B, H, T, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, -1)


def attend(q, k, v, mask=None, return_weights=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is None:
        mask = torch.ones_like(scores[..., :, :], dtype=torch.bool).tril()
    weights = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    out = weights @ v
    return (out, weights) if return_weights else out


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError("n_heads must be a positive divisor of d_model")
        self.n_heads, self.head_dim, self.max_len = n_heads, d_model // n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).tril(),
                             persistent=False)

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        if T > self.max_len:
            raise ValueError("T exceeds max_len")
        # [B,T,3D] -> [B,T,3,H,d] -> [3,B,H,T,d]: the three blocks are q | k | v
        q, k, v = self.qkv(x).reshape(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        out, weights = attend(q, k, v, self.mask[:T, :T], return_weights=True)
        y = self.out_proj(merge_heads(out))
        return (y, weights) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
