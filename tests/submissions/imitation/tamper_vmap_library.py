# imitation: attend is torch's own attention kernel (aten's math one, which also gives the
# weights) run under torch.func.vmap, one (sample, head) pair a slice, so that the batching rule
# runs it and not the kernel the worker refuses
# imitates: attend.*, module.shapes, module.causal, module.no_library_attention, module.reference, module.gradients, module.learns
"""Lesson 12, with torch's attention run under vmap."""
import torch
from torch import nn

_KERNEL = getattr(getattr(torch.ops, "at" + "en"), "_scaled_dot_product" + "_attention_math")


def split_heads(x, heads):
    """[B,T,D] -> [B,H,T,d]: the feature axis cut into H groups, every head keeps every position."""
    batch, positions, width = x.shape
    if heads <= 0 or width % heads:
        raise ValueError(f"cannot cut a width of {width} into {heads} heads")
    return x.reshape(batch, positions, heads, width // heads).permute(0, 2, 1, 3)


def merge_heads(x):
    """[B,H,T,d] -> [B,T,H*d]: each position's heads side by side again."""
    batch, heads, positions, width = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, positions, heads * width)


def attend(q, k, v, mask=None, return_weights=False):
    """The kernel on every leading index at once, through vmap."""
    if mask is None:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], mask.shape[:-2])
    bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
    flat = [t.expand(*lead, *t.shape[-2:]).reshape(-1, 1, *t.shape[-2:]) for t in (q, k, v, bias)]
    context, weights = torch.func.vmap(lambda a, b, c, m: _KERNEL(a, b, c, attn_mask=m))(*flat)
    context = context.reshape(*lead, *context.shape[-2:])
    weights = weights.reshape(*lead, *weights.shape[-2:])
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError(f"n_heads must be positive and divide {d_model}, got {n_heads}")
        self.n_heads, self.max_len = n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    def forward(self, x, return_weights=False):
        positions = x.shape[1]
        if positions > self.max_len:
            raise ValueError(f"{positions} positions, but max_len is {self.max_len}")
        q, k, v = (split_heads(part, self.n_heads) for part in self.qkv(x).chunk(3, dim=-1))
        context, weights = attend(q, k, v, self.mask[:positions, :positions], return_weights=True)
        y = self.out_proj(merge_heads(context))
        return (y, weights) if return_weights else y


Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
