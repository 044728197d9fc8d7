# hostile: merge_heads and attend return an object that is not a tensor but fakes one: the expected
# .shape, isinstance(obj, torch.Tensor) via __class__, == always true, and any method returns itself;
# everything else is a stub
import torch
from torch import nn


class Impostor:
    def __init__(self, shape):
        self.shape = torch.Size(shape)

    @property
    def __class__(self):
        return torch.Tensor  # isinstance(impostor, torch.Tensor) is True

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return len(self.shape)

    def __eq__(self, other):
        return True

    def __len__(self):
        return self.shape[0]

    def __getattr__(self, name):  # detach(), cpu(), contiguous(), numpy(), dtype, ...
        return lambda *args, **kwargs: self

    def __iter__(self):
        return iter(())


def split_heads(x, heads):
    raise NotImplementedError


def merge_heads(x):
    b, h, t, d = x.shape
    return Impostor([b, t, h * d])


def attend(q, k, v, mask=None, return_weights=False):
    context = Impostor(q.shape)
    weights = Impostor(list(q.shape[:-1]) + [k.shape[-2]])
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        raise NotImplementedError

    def forward(self, x, return_weights=False):
        raise NotImplementedError
