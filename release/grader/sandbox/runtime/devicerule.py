"""CUDA's rule for devices, for the student's code run on `meta` (placement.py).

A module of its own: a SameDevice runs on the student's thread, where the student's code can
reach its globals; rebinding them changes only the rule the student's own code runs under.
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
# Operations that move values between devices, or index with CPU indices, as CUDA allows.
CROSSES_DEVICES = frozenset({aten.copy_.default, aten._to_copy.default, aten.index.Tensor,
                             aten.index_put_.default, aten._index_put_impl_.default,
                             aten.index_put.default})


class SameDevice(TorchDispatchMode):
    """Every operation's tensors on one device, as CUDA demands, refused in torch's own words:
    some meta kernels do not check (`x @ w` with w on the CPU runs on meta and fails on a GPU).
    A 0-dim CPU tensor mixes with any device on CUDA, where some meta kernels refuse it: it is
    handed to them on meta."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in CROSSES_DEVICES:
            seen = set()
            _devices(args, seen)
            if kwargs:
                _devices(kwargs.values(), seen)
            if len(seen) > 1:
                raise RuntimeError("Expected all tensors to be on the same device, but found at "
                                   f"least two devices, {' and '.join(sorted(seen, reverse=True))}!"
                                   f" (when checking the arguments of {func})")
            if seen == {"meta"}:
                args, kwargs = _on_meta(args), {k: _on_meta(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def _on_meta(item):
    """`item` with every 0-dim CPU tensor in it (lists and tuples followed) moved to meta."""
    if isinstance(item, torch.Tensor):
        return item.to("meta") if item.device.type == "cpu" and item.dim() == 0 else item
    if isinstance(item, (list, tuple)):
        return type(item)(_on_meta(i) for i in item)
    return item


def _devices(items, seen):
    """Add to `seen` the device of every tensor in `items` (containers followed) that counts: one
    of at least one axis, or a 0-dim one off the CPU."""
    for item in items:
        if isinstance(item, torch.Tensor):
            device = item.device.type
            if device != "cpu" or item.dim() > 0:
                seen.add(device)
        elif isinstance(item, (list, tuple)):
            _devices(item, seen)
        elif isinstance(item, dict):
            _devices(item.values(), seen)


def device_rule(device):
    """The contexts the student's code runs under on `device`: SameDevice on meta."""
    return (SameDevice(),) if device == "meta" else ()
