"""Worker side of the module contract: the block is reached through the contract's attribute names.

The contract (solutions/attention.py): `qkv` (Linear(D, 3D), [q | k | v]) or `q_proj`/`k_proj`/
`v_proj` (Linear(D, D) each), `out_proj` (Linear(D, D)), all without bias, and the buffer `mask`.
The layout is found through the objects those names point to, never through parameter names;
parameters and buffers are read from torch's own registries, not through the student's
(overridable) methods.  Everything it reports is a claim to the judge.
"""
import builtins
import collections

# Names are looked up in a copy of the builtins taken at import, before any student code: a
# student who rebinds `builtins.dict` changes what their own code sees, not what the readers see.
__builtins__ = dict(vars(builtins))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.utils import parametrize  # noqa: E402

PROJECTIONS = {"fused": ("qkv", "out_proj"), "separate": ("q_proj", "k_proj", "v_proj", "out_proj")}
# The true descriptors, taken before any student code: a class's own namespace and MRO (whatever
# its metaclass says), a module's own __dict__ (whatever its class defines under that name), and
# the lookup torch's own code makes for `self._parameters`.
_CLASS_DICT = type.__dict__["__dict__"].__get__
_MRO = type.__dict__["__mro__"].__get__
_QUALNAME = type.__dict__["__qualname__"].__get__
_NAME = type.__dict__["__name__"].__get__
_INSTANCE_DICT_SLOT = _CLASS_DICT(nn.Module)["__dict__"]
_INSTANCE_DICT = _INSTANCE_DICT_SLOT.__get__
_GETSET = type(_INSTANCE_DICT_SLOT)
_LOOKUP = object.__getattribute__
_OBJECT, _MODULE, _TORCH_TENSOR = object, nn.Module, torch.Tensor
_TENSOR = torch._C.TensorBase
_SHAPE = _TENSOR.__dict__["shape"].__get__  # a tensor's own shape, whatever a subclass overrides
_NO_FUNCTION, _NO_DISPATCH = torch._C.DisableTorchFunction, torch._C._DisableTorchDispatch
# The registries, and the names through which a class could stand in for them: no class of a
# graded block may define one (object's own, and a __dict__ slot CPython made, excepted).
REGISTRIES = ("_parameters", "_buffers", "_modules")
REGISTRY_TYPES = (dict, collections.OrderedDict)
GUARDED = ("__dict__", "__getattribute__", "__class__", "_non_persistent_buffers_set") + REGISTRIES


class LibraryAttentionDisabled(RuntimeError):
    """Raised by torch's fused attention inside the worker: the exercise writes it by hand."""


# aten operators whose name holds one of these are torch's ready-made attention (sdpa and every
# fused kernel behind it, the native multi-head attention, the fused transformer layers).
REFUSED_PARTS = ("attention", "transformer")
# Refused on these keys always, and on every other key that has a kernel of the operator's own
# (torch._C._dispatch_dump): CompositeImplicitAutograd covers each backend without one.
ALWAYS_REFUSED_ON = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CPU", "Meta",
                     "Autograd")


def disable_library_attention(torch_module):
    """Make torch's fused attention raise before any student code is imported: every aten kernel
    of an operator whose name holds attention or transformer, on every dispatch key it has a
    kernel for (a call redispatched to any key lands on a refusal), the functional entry points,
    nn.MultiheadAttention, flex_attention and torch.onnx's reference attention.

    The kernels are registered on a dispatcher handle that no Python object refers to (kept alive
    by one leaked reference): no code in this interpreter can reach it to reset it."""
    import ctypes
    import sys
    import warnings

    def refuse(*_args, **_kwargs):
        raise LibraryAttentionDisabled("torch's fused attention is disabled while grading: "
                                       "write attention by hand")

    handle = torch_module._C._dispatch_library("IMPL", "aten", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        for name, keys in refused_kernels(torch_module):
            for key in keys:
                handle.impl(name, key, refuse, False)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))  # lives as long as the process
    del handle
    functional = torch_module.nn.functional
    functional.scaled_dot_product_attention = refuse
    functional.multi_head_attention_forward = refuse
    torch_module.nn.MultiheadAttention.__init__ = refuse
    torch_module.nn.MultiheadAttention.forward = refuse
    # flex_attention runs eagerly on CPU too: its module refuses, and so does its higher-order op.
    _refusing_module("torch.nn.attention.flex_attention", refuse)
    operators = sys.modules.get("torch._higher_order_ops.flex_attention")
    if operators is not None:
        operators.flex_attention = refuse
    # torch.onnx.ops.attention is a reference attention in Python (torch.onnx still imports).
    _refusing_module("torch.onnx.ops", refuse)


def refused_kernels(torch_module):
    """[(operator name with overload, [dispatch keys])] to refuse."""
    c = torch_module._C
    known = set(c.DispatchKey.__members__)
    found = []
    for full in c._dispatch_get_all_op_names():
        if not full.startswith("aten::") or not any(p in full for p in REFUSED_PARTS):
            continue
        keys = set(ALWAYS_REFUSED_ON)
        for line in c._dispatch_dump(full).splitlines():  # "CPU: registered at ...", "Autograd[alias]: ..."
            key = line.split(":", 1)[0].removesuffix("[alias]")
            if key in known:
                keys.add(key)
        found.append((full.split("::", 1)[1], sorted(keys)))
    return found


def _refusing_module(name, refuse):
    """sys.modules[name] (and the parent's attribute) becomes a module every name of which raises
    but the dunder ones, which stay missing (torch's meta kernels look for every module's __file__
    through inspect, and hasattr only forgives AttributeError)."""
    import sys
    import types

    def getattr_(attr):  # PEP 562: a module's __getattr__
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return refuse()

    stub = types.ModuleType(name)
    stub.__getattr__ = getattr_
    sys.modules[name] = stub
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, stub)


# -- torch's own registries, read past any override of the student's class ----------------------
def _namespace(obj):
    """The instance's own __dict__ (through nn.Module's slot), or None for an object whose true
    type is no nn.Module."""
    if _MODULE not in _MRO(type(obj)):
        return None
    return _INSTANCE_DICT(obj)


def _own(module, table):
    """A registry as a plain dict, read with dict's own methods (a dict subclass cannot answer)."""
    namespace = _namespace(module)
    found = dict.get(namespace, table) if namespace is not None else None
    return dict(dict.items(found)) if isinstance(found, dict) else {}


def tampering(module):
    """What of the block stands between torch's registries and a reader, in short words: a class
    in the MRO of a module of the tree that defines one of GUARDED, a registry that is no plain
    dict, one that torch's own lookup finds elsewhere than in the instance's dict, or a non-module
    among the submodules.  [] for an ordinary block."""
    found = []
    for name, current in walk(module):
        where = f"self.{name}" if name else "self"
        namespace = _namespace(current)
        if namespace is None:
            found.append(f"{where} is no nn.Module")
            continue
        for klass in _MRO(type(current)):
            if klass is _OBJECT:
                continue
            own = _CLASS_DICT(klass)
            for attr in GUARDED:
                if attr in own and not _made_by_python(klass, attr, own[attr]):
                    found.append(f"{str(_QUALNAME(klass))[:60]}.{attr}")
        for table in REGISTRIES:
            value = dict.get(namespace, table)
            if type(value) not in REGISTRY_TYPES:
                found.append(f"{where}.{table} is a {str(_NAME(type(value)))[:40]}")
                continue
            try:
                seen = _LOOKUP(current, table)
            except Exception:  # a lookup that raises is no registry either
                seen = None
            if seen is not value:
                found.append(f"{where}.{table} is read elsewhere")
    return sorted(set(found))[:8]


def _made_by_python(klass, attr, value):
    """A __dict__ slot CPython made for this very class (its bases have none, as under ABC's
    __slots__): it answers with the instance's true dict."""
    return attr == "__dict__" and type(value) is _GETSET and value.__objclass__ is klass


def _shape(t):
    """A tensor's own shape: no subclass override, torch-function or dispatch mode answers."""
    with _NO_FUNCTION(), _NO_DISPATCH():
        return [int(s) for s in _SHAPE(t)]


def _plain(t):
    """A plain copy of a tensor's values (no subclass's detach or clone, no mode, is called)."""
    with _NO_FUNCTION(), _NO_DISPATCH():
        return _TENSOR.as_subclass(_TENSOR.clone(_TENSOR.detach(t)), _TORCH_TENSOR)


def walk(module):
    """(name, module) for the module and every submodule, each object once."""
    seen, stack = set(), [("", module)]
    while stack:
        name, current = stack.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield name, current
        for child_name, child in _own(current, "_modules").items():
            if child is not None:
                stack.append((f"{name}.{child_name}" if name else child_name, child))


def parameters(module, table="_parameters"):
    """[(name, tensor)] of every parameter (or buffer: `table`) torch knows of, each tensor once."""
    found, seen = [], set()
    for name, current in walk(module):
        for own_name, t in _own(current, table).items():
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                found.append((f"{name}.{own_name}" if name else own_name, t))
    return found


# -- the projections, through the contract's names -----------------------------------------------
class Slot:
    """Where a projection's [out, in] matrix lives: a tensor, or a parametrized attribute."""

    def __init__(self, tensor=None, owner=None):
        self.tensor, self.owner = tensor, owner

    def matrix(self):
        return self.owner.weight if self.owner is not None else self.tensor

    def write(self, value):
        with torch.no_grad():
            if self.owner is not None:
                self.owner.weight = value.to(self.owner.weight.dtype)  # through right_inverse
            else:
                self.tensor.copy_(value)


def _candidates(obj, shape):
    """Slots of the given shape inside a contract object (its weight, or a wrapped Linear's)."""
    found = []
    for _, current in walk(obj):
        if parametrize.is_parametrized(current, "weight"):
            if tuple(current.weight.shape) == shape:
                found.append(Slot(owner=current))
            continue
        weight = _own(current, "_parameters").get("weight")
        if isinstance(weight, torch.Tensor) and tuple(weight.shape) == shape:
            found.append(Slot(tensor=weight))
    return found


def slot(module, name, shape):
    """The Slot behind the contract name `name`, or None (missing, or not one [out, in] matrix)."""
    try:
        obj = getattr(module, name)
    except Exception:  # a missing name, or a property that raises
        return None
    if isinstance(obj, torch.Tensor):
        return Slot(tensor=obj) if tuple(obj.shape) == shape else None
    if not isinstance(obj, nn.Module):
        return None
    found = _candidates(obj, shape)
    return found[0] if len(found) == 1 else None


def layout(module, d_model):
    """('fused' | 'separate', {name: Slot}) or (None, {name: found?}) from the contract's names."""
    shapes = {"qkv": (3 * d_model, d_model)}
    for kind, names in PROJECTIONS.items():
        slots = {n: slot(module, n, shapes.get(n, (d_model, d_model))) for n in names}
        if all(s is not None for s in slots.values()):
            return kind, slots
    return None, {n: slot(module, n, shapes.get(n, (d_model, d_model))) is not None
                  for names in PROJECTIONS.values() for n in names}


def _unblocks(kind, m):
    q, k, v = m["qkv"].chunk(3) if kind == "fused" else (m["q_proj"], m["k_proj"], m["v_proj"])
    return {"q": q, "k": k, "v": v, "o": m["out_proj"]}


# -- what the judge asks ---------------------------------------------------------------------------
def describe(module, d_model):
    """The layout, the parameters and the mask as torch's registries hold them, and `tampered`."""
    kind, slots = layout(module, d_model)
    mask = getattr(module, "mask", None)
    registered = "missing" if mask is None else "attribute"
    if any(b is mask for _, b in parameters(module, "_buffers")):
        registered = "buffer"
    if any(p is mask for _, p in parameters(module)):
        registered = "parameter"
    return {
        "layout": kind,
        "found": {n: s is not None if kind else s for n, s in slots.items()},
        "params": [[n, _shape(p)] for n, p in parameters(module)],
        "mask": {"registered": registered,
                 "value": _plain(mask) if isinstance(mask, _TORCH_TENSOR) else None},
        "tampered": tampering(module),
    }


def inject(module, d_model, q, k, v, o):
    """Write the judge's weights through the contract's names; the layout used, or None."""
    kind, slots = layout(module, d_model)
    if kind is None:
        return None
    blocks = ({"qkv": torch.cat([q, k, v]), "out_proj": o} if kind == "fused"
              else {"q_proj": q, "k_proj": k, "v_proj": v, "out_proj": o})
    for name, value in blocks.items():
        slots[name].write(value)
    return kind


def read(module, d_model):
    """{q, k, v, o}: the matrices behind the contract's names now (e.g. after training), and
    {bias_q, ...} where a contract name holds a Linear with a bias (a named mistake)."""
    kind, slots = layout(module, d_model)
    if kind is None:
        return None
    matrices = _unblocks(kind, {n: s.matrix().detach().clone() for n, s in slots.items()})
    biases = {n: getattr(getattr(module, n), "bias", None) for n in slots}
    if all(isinstance(b, torch.Tensor) and b.dim() == 1 for b in biases.values()):
        matrices.update({"bias_" + p: b for p, b in
                         _unblocks(kind, {n: b.detach().clone() for n, b in biases.items()}).items()})
    return matrices


def grads(module, d_model, x, upstream, *, run):
    """{q, k, v, o}: the gradient each contract matrix receives from sum(forward(x) * upstream),
    forward called through `run` (the worker's isolation.runner: the student's own thread)."""
    kind, slots = layout(module, d_model)
    if kind is None:
        return None
    for _, p in parameters(module):
        p.grad = None
    with parametrize.cached():  # a parametrized weight is computed once: its .grad can be kept
        matrices = {n: s.matrix() for n, s in slots.items()}
        for m in matrices.values():
            if m.requires_grad and m.grad_fn is not None:
                m.retain_grad()
        out = run(module, (x,))  # the student's forward, on the student's thread
        (out * upstream).sum().backward()
    got = {n: (m.grad.detach().clone() if m.grad is not None else None) for n, m in matrices.items()}
    if any(g is None for g in got.values()):
        return {"missing": sorted(n for n, g in got.items() if g is None)}
    return _unblocks(kind, got)


def scramble(module, seed):
    """Fresh random values for every parameter torch knows of (buffers stay); how many."""
    generator = torch.Generator().manual_seed(seed)
    changed = 0
    with torch.no_grad():
        for _, p in parameters(module):
            if p.dtype == torch.bool:
                p.copy_(torch.rand(p.shape, generator=generator) < 0.5)
            elif p.is_floating_point():
                p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype))
            else:
                p.copy_(torch.randint(-3, 4, p.shape, generator=generator))
            changed += 1
    return changed


def train_mode(module, training):
    """nn.Module.train(module, training)."""
    nn.Module.train(module, bool(training))
    return bool(training)


ACTIONS = {"describe": describe, "inject": inject, "read": read, "grads": grads,
           "scramble": scramble, "train_mode": train_mode}
