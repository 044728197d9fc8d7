# style: names the source scan must leave to the student (grader/judge/checks/scan.py): the
# Linear classes reached through torch.nn.modules (no sys.modules), a debug argument and a
# variable named inspect, model.eval() on the student's own block, a hand-written helper named
# scaled_dot_product_attention whose error message names it, a comment written as a string
# that mentions F.scaled_dot_product_attention, and a class of the student's own named
# LibraryAttentionDisabled (defined, never raised to the grader)
"""Lesson 12: multi-head attention, with names that only look like forbidden routes."""
import math

import torch
from torch import nn


class LibraryAttentionDisabled(RuntimeError):
    """The student's own marker for a fast path this file never takes."""


def split_heads(x, heads):
    n, t, c = x.size()
    if not heads > 0 or c % heads:
        raise ValueError("cannot cut %d channels into %r heads" % (c, heads))
    return x.view(n, t, heads, c // heads).permute(0, 2, 1, 3)  # [n, heads, t, c/heads]


def merge_heads(x):
    n, h, t, e = x.size()
    return x.permute(0, 2, 1, 3).contiguous().view(n, t, h * e)


def scaled_dot_product_attention(q, k, v, mask):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("scaled_dot_product_attention: q and k must have the same width")
    logits = torch.einsum("...id,...jd->...ij", q, k) * q.shape[-1] ** -0.5
    logits = torch.where(mask, logits, torch.full_like(logits, -math.inf))
    probs = logits.softmax(-1)
    return torch.einsum("...ij,...jd->...id", probs, v), probs


def attend(q, k, v, mask=None, return_weights=False, inspect=False):
    if mask is None:
        rows = torch.arange(q.shape[-2], device=q.device)
        mask = rows[:, None] >= torch.arange(k.shape[-2], device=q.device)[None, :]
    """Written by hand on purpose: F.scaled_dot_product_attention would do this in one call,
    but the exercise forbids it."""
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    if inspect:
        print("weights", tuple(weights.shape))
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if not n_heads > 0 or d_model % n_heads:
            raise ValueError("d_model=%d, n_heads=%r: no whole number of heads" % (d_model, n_heads))
        self.heads, self.limit = n_heads, max_len
        self.qkv = nn.modules.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = torch.nn.modules.linear.Linear(d_model, d_model, bias=False)
        steps = torch.arange(max_len)
        self.register_buffer("mask", steps[:, None] >= steps[None, :])

    def forward(self, x, return_weights=False, inspect=False):
        t = x.size(1)
        if t > self.limit:
            raise ValueError("got %d positions, the block holds at most %d" % (t, self.limit))
        q, k, v = map(lambda part: split_heads(part, self.heads), self.qkv(x).chunk(3, dim=2))
        context, weights = attend(q, k, v, self.mask[:t, :t], True, inspect)
        out = self.out_proj(merge_heads(context))
        if return_weights:
            return out, weights
        return out


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False


if __name__ == "__main__":
    model = CausalSelfAttention(64, 2)
    model.eval()
    inspect = True
    with torch.no_grad():
        y, w = model(torch.randn(1, 5, 64), return_weights=True, inspect=inspect)
    print(y.shape, w.shape)
