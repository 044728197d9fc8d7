# hostile: makes torch.allclose / torch.equal / torch.testing.assert_close (and friends) always agree,
# at import; every exercise function is still a stub
import torch
import torch.testing
from torch import nn


def _always_true(*args, **kwargs):
    return True


def _never_raises(*args, **kwargs):
    return None


torch.allclose = _always_true
torch.equal = _always_true
torch.Tensor.allclose = _always_true
torch.Tensor.equal = _always_true
torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
torch.testing.assert_close = _never_raises
torch.testing.assert_allclose = _never_raises


def split_heads(x, heads):
    raise NotImplementedError


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
