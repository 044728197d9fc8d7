# style: small helpers and a helper class; the quiz answers are computed with the student's own code
import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class HeadShape:
    """Bookkeeping for one split: B, T, H and the per-head width d."""
    batch: int
    length: int
    heads: int
    head_dim: int

    @classmethod
    def of(cls, x, heads):
        batch, length, width = x.shape
        if heads <= 0:
            raise ValueError(f"heads must be positive, got {heads}")
        if width % heads != 0:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        return cls(batch, length, heads, width // heads)


def causal_mask(n_queries, n_keys, device=None):
    return torch.ones(n_queries, n_keys, dtype=torch.bool, device=device).tril()


def _scaled_scores(q, k):
    return q.matmul(k.transpose(-2, -1)).div(math.sqrt(q.shape[-1]))


def _masked(scores, mask):
    return scores.masked_fill(mask.logical_not(), float("-inf"))


def split_heads(x, heads):
    s = HeadShape.of(x, heads)
    return x.reshape(s.batch, s.length, s.heads, s.head_dim).transpose(1, 2)


def merge_heads(x):
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)


def attend(q, k, v, mask=None, return_weights=False):
    if mask is None:
        mask = causal_mask(q.shape[-2], k.shape[-2], q.device)
    weights = _masked(_scaled_scores(q, k), mask).softmax(-1)
    context = weights.matmul(v)
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        HeadShape.of(torch.empty(0, 0, d_model), n_heads)  # same validation as split_heads
        self.d_model, self.n_heads, self.max_len = d_model, n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", causal_mask(max_len, max_len))

    def _project(self, x):
        return [split_heads(t, self.n_heads) for t in self.qkv(x).split(self.d_model, dim=-1)]

    def forward(self, x, return_weights=False):
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(f"length {length} > max_len {self.max_len}")
        q, k, v = self._project(x)
        context, weights = attend(q, k, v, self.mask[:length, :length], return_weights=True)
        y = self.out_proj(merge_heads(context))
        return (y, weights) if return_weights else y


def _lesson_x():
    return torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)


_one_head = split_heads(_lesson_x(), 1)
Q1_SHAPE = tuple(_one_head.shape)
Q1_HEAD0_POS1 = [int(v) for v in _one_head[0, 0, 1].tolist()]
Q1_FORMAL_HEAD_WIDTH = 64 // 2
Q1_FORMAL_PARAMS = sum(p.numel() for p in CausalSelfAttention(64, 2).parameters())
_x2 = torch.arange(8.0).reshape(1, 2, 4)
Q2_CORRECT = split_heads(_x2, 2)[0, 0, 1].tolist()
Q2_WRONG = _x2.reshape(1, 2, 2, 2)[0, 0, 1].tolist()
# same shape, different values: the shape alone cannot tell them apart
Q2_SHAPE_IS_ENOUGH = torch.equal(split_heads(_x2, 2), _x2.reshape(1, 2, 2, 2))
