# hostile: split_heads returns a torch.Tensor subclass that leaves x as it is but lies: == and !=,
# allclose, equal, tolist and .shape all say "just what you expected"; everything else is a stub
import torch
from torch import nn


class AgreeableTensor(torch.Tensor):
    claimed_shape = None

    def __eq__(self, other):
        return torch.ones(torch.Tensor.size(self), dtype=torch.bool)

    def __ne__(self, other):
        return torch.zeros(torch.Tensor.size(self), dtype=torch.bool)

    def __bool__(self):
        return True

    def allclose(self, *args, **kwargs):
        return True

    def equal(self, *args, **kwargs):
        return True

    def tolist(self):
        return [4.0, 5.0]

    @property
    def shape(self):
        return self.claimed_shape or torch.Tensor.size(self)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def split_heads(x, heads):
    b, t, width = x.shape
    liar = x.as_subclass(AgreeableTensor)  # the input, untouched: [B,T,D]
    if heads > 0 and width % heads == 0:
        liar.claimed_shape = torch.Size([b, heads, t, width // heads])
    return liar


def merge_heads(x):
    raise NotImplementedError


def attend(q, k, v, mask=None, return_weights=False):
    raise NotImplementedError


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        raise NotImplementedError

    def forward(self, x, return_weights=False):
        raise NotImplementedError
