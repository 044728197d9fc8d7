"""Worker side of the device and dtype checks: the judge's inputs (and a block, through
`nn.Module.to`) are moved to a device or a float dtype, the student's code runs (on `meta` under
CUDA's rule for devices: devicerule.py), and a plain description of every result comes back.
"""
import torch
from torch import nn


def devices():
    """The devices other than the CPU this worker can try: `meta` always, `cuda` where torch here
    can make a tensor on one."""
    found = ["meta"]
    try:
        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")
            found.append("cuda")
    except Exception:  # a driver that cannot start is no device to judge on
        pass
    return found


def warm_meta():
    """Load torch's meta kernels before the student's code, never inside a student's call, whose
    /tmp and time it would spend."""
    x = torch.ones(2, 2, device="meta")
    x + x  # meta's kernels load now, and torch._dynamo, which wraps its Python ones


def _dtype(name):
    return getattr(torch, name) if name else None


def _place(value, device, dtype):
    """A tensor moved to `device`; a floating one also cast to `dtype` (a bool mask stays bool)."""
    if not isinstance(value, torch.Tensor):
        return value
    return value.to(device=device, dtype=dtype if value.is_floating_point() else None)


def describe(value):
    """{device, dtype, shape, value} of a tensor (value None on `meta`), a list of those for a
    tuple, {type} for anything else."""
    if isinstance(value, tuple):
        return {"items": [describe(v) for v in value]}
    if not isinstance(value, torch.Tensor):
        return {"type": type(value).__name__}
    tensor = value.detach()
    return {"device": tensor.device.type, "dtype": str(tensor.dtype).replace("torch.", ""),
            "shape": list(tensor.shape),
            "value": None if tensor.device.type == "meta" else tensor.to("cpu").clone()}


def call_on(fn, device, dtype=None, args=(), kwargs=None, *, run, rule):
    """`fn` on the judge's arguments moved to `device` (`dtype`), through `run` (the student's
    thread) under the contexts of `rule(device)`."""
    dtype = _dtype(dtype)
    args = [_place(a, device, dtype) for a in args]
    kwargs = {k: _place(v, device, dtype) for k, v in (kwargs or {}).items()}
    return describe(run(fn, args, kwargs, contexts=rule(device)))


def _mask(block):
    mask = getattr(block, "mask", None)
    if not isinstance(mask, torch.Tensor):
        return None
    return {"device": mask.device.type, "dtype": str(mask.dtype).replace("torch.", "")}


def place(block, device=None, dtype=None):
    """block.to(device) or block.to(dtype) as nn.Module defines it; its mask before and after,
    and the tensors that .to() left on another device (`left`)."""
    before = _mask(block)
    nn.Module.to(block, device=device, dtype=_dtype(dtype))
    return {"mask_before": before, "mask": _mask(block),
            "left": _left_behind(block, device) if device else []}


def _left_behind(block, device):
    """Names of the tensors of at least one axis (a 0-dim one mixes with any device) not on
    `device`, held as plain attributes of the block's modules or globals of its module."""
    import sys

    def stayed(value):
        return isinstance(value, torch.Tensor) and value.dim() > 0 and value.device.type != device

    names = []
    for prefix, module in block.named_modules():
        for attr, value in vars(module).items():  # registries are dicts, never listed here
            if stayed(value):
                names.append(f"self.{prefix + '.' if prefix else ''}{attr}")
    home = sys.modules.get(type(block).__module__)
    for attr, value in (vars(home).items() if home is not None else ()):
        if stayed(value):
            names.append(attr)
    return names[:8]


def forward_on(block, x, device, dtype=None, *, run, rule):
    """forward(x, return_weights=True) on x moved to `device` (`dtype`), without gradients."""
    x = _place(x, device, _dtype(dtype))
    return describe(run(block, (x,), {"return_weights": True},
                        contexts=(torch.no_grad(),) + rule(device)))


BLOCK_ACTIONS = {"place": place, "forward_on": forward_on}  # reached through the worker's op_contract
