"""The protocol the judge and the worker speak: framed JSON plus raw tensor bytes.

Both sides import this module; it must stay free of anything secret.  The judge treats every
frame as hostile: `decode` rebuilds plain data only (JSON values and exact `torch.Tensor`s made
from raw bytes), never unpickles, and enforces size caps.

Frame: MAGIC (4 bytes) | header length (4, big endian) | payload length (8) | header (UTF-8 JSON)
| payload (the tensors' raw bytes, back to back) [| tag (32 bytes)].  The tag is HMAC-SHA256 of
everything before it under the key the worker draws before the student's import and tells the
judge in its first frame: the student's code can write to the channel but cannot reach the key
(isolation.py), so it cannot forge a reply.
In the header a tensor is {"$tensor": [offset, nbytes], "dtype": "float32", "shape": [...]}, a
tuple {"$tuple": [...]}, anything else {"$object": "TypeName"}; a data key that starts with "$"
gets one more "$", so no data can pass for a marker.  The decoder materialises at most as many
tensor bytes as the payload holds, and `expect_id` checks a reply's id before any tensor is built.
"""
import builtins
import hashlib
import hmac
import json
import struct

# Names are looked up in a copy of the builtins taken at import (in the worker, before any student
# code): what the student's code rebinds in builtins is not seen here.
__builtins__ = dict(vars(builtins))

MAGIC = b"AW12"
PREFIX = struct.Struct(">4sIQ")
# What one frame may carry, sized to the checks (the largest reply of a grading is a 0.7 KiB header
# and a 384 KiB payload) and refused from its prefix above it: two frames (a call made twice) must
# fit under the judge's 350 MiB target.  8 MiB still lets a wrong shape such as [256, 12, 12, 32]
# float32 arrive and be judged.
MAX_HEADER = 256 * 1024
MAX_PAYLOAD = 8 * 1024 * 1024
# The judge's memory for one frame at most: the payload, the tensors built from it (`room`), one
# result a check computes from them, and the header as Python objects (~50 bytes per byte).
JUDGE_FRAME_BYTES = 3 * MAX_PAYLOAD + 50 * MAX_HEADER
MAX_DEPTH = 32
TAG_BYTES = 32
# Dtypes that may cross the boundary, by name; anything else is refused by the judge.
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


class ProtocolError(Exception):
    """A frame that is malformed, oversized or of a kind the protocol does not allow."""


class Opaque:
    """Judge-side stand-in for an object the worker could not send as plain data."""

    def __init__(self, type_name):
        self.type_name = str(type_name)[:80]

    def __repr__(self):
        return f"<{self.type_name}>"


# json.dumps(tree, ensure_ascii=True, allow_nan=True), its encoder made at import: `json.dumps`,
# a name any code can rebind, is not looked up per frame.
_DUMPS = json.JSONEncoder(ensure_ascii=True, allow_nan=True).encode
_TENSORS = []  # [how a tensor becomes bytes], made once (arm)


def arm():
    """Bind how a tensor becomes bytes: TensorBase's C methods, with torch-function and dispatch
    modes off, so neither a patched torch.Tensor method nor a student's mode changes what is sent.
    The worker calls it before the student's import; elsewhere the first tensor sent does."""
    if _TENSORS:
        return _TENSORS[0]
    import torch  # imported lazily: the worker's first frame goes out before torch is loaded

    base = torch._C.TensorBase
    found = {"Tensor": torch.Tensor, "bfloat16": torch.bfloat16, "torch": torch,
             "no_function": torch._C.DisableTorchFunction,
             "no_dispatch": torch._C._DisableTorchDispatch,
             "dtype": base.__dict__["dtype"].__get__, "shape": base.__dict__["shape"].__get__}
    for name in ("detach", "cpu", "as_subclass", "float", "contiguous", "numpy"):
        found[name] = getattr(base, name)
    found["names"] = {getattr(torch, name): name for name in DTYPES}  # the dtypes that may cross
    found["dtypes"] = {name: dtype for dtype, name in found["names"].items()}
    _TENSORS.append(found)
    return found


def _tensor_bytes(value, t):
    """(raw bytes, dtype name, shape) of a tensor's own values, or (None, dtype name, None)."""
    with t["no_function"](), t["no_dispatch"]():
        tensor = t["cpu"](t["detach"](value))
        if type(tensor) is not t["Tensor"]:
            tensor = t["as_subclass"](tensor, t["Tensor"])
        dtype = t["dtype"](tensor)
        if dtype is t["bfloat16"]:
            tensor = t["float"](tensor)
            dtype = t["dtype"](tensor)
        name = t["names"].get(dtype)
        if name is None:
            return None, str(dtype).replace("torch.", ""), None
        # TensorBase's own shape getter on an exact Tensor: a torch.Size of ints
        return t["numpy"](t["contiguous"](tensor)).tobytes(), name, list(t["shape"](tensor))


def _tag(key, *parts, sha256=hashlib.sha256):
    """HMAC-SHA256 (RFC 2104) under a key of at most 64 bytes, over the hash bound at import:
    hmac.digest looks its backend up in hmac's module, where the student's code could put a
    function that is handed the key."""
    key = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + b"".join(parts)).digest()
    return sha256(bytes(b ^ 0x5C for b in key) + inner).digest()


def encode(obj, key=None):
    """Turn plain data (and tensors) into one frame of bytes, signed with `key` where given."""
    chunks, offset = [], [0]

    def walk(value, depth):
        if depth > MAX_DEPTH:
            raise ProtocolError("nesting too deep")
        # By type(), which an object cannot fake: isinstance believes a `__class__` property.
        kind = type(value)
        if value is None or issubclass(kind, (bool, int, float, str)):
            return value
        inner = depth + 1
        if issubclass(kind, dict):
            return {k if type(k) is str and k[:1] != "$" else _escape(str(k)): walk(v, inner)
                    for k, v in dict.items(value)}
        if issubclass(kind, list):
            return [walk(v, inner) for v in list.__iter__(value)]
        if issubclass(kind, tuple):
            return {"$tuple": [walk(v, inner) for v in tuple.__iter__(value)]}
        t = arm()
        if kind is t["Tensor"] or issubclass(kind, t["Tensor"]):
            raw, name, shape = _tensor_bytes(value, t)
            if raw is None:
                return {"$object": f"Tensor[{name}]"}
            chunks.append(raw)
            start = offset[0]
            offset[0] += len(raw)
            return {"$tensor": [start, len(raw)], "dtype": name, "shape": shape}
        return {"$object": type(value).__name__}

    header = _DUMPS(walk(obj, 0)).encode()
    payload_len = sum(len(c) for c in chunks)
    if len(header) > MAX_HEADER or payload_len > MAX_PAYLOAD:  # the reader would refuse it
        raise ProtocolError(f"message too large to send ({len(header)} + {payload_len} bytes; "
                            f"at most {MAX_HEADER} + {MAX_PAYLOAD})")
    payload = b"".join(chunks)
    frame = PREFIX.pack(MAGIC, len(header), len(payload)) + header + payload
    return frame + _tag(key, frame) if key is not None else frame


class FrameReader:
    """Frames off one stream, each part read whole into a buffer of its own size."""

    def read_frame(self, fill, key=None):
        """(header, payload) of the next frame; one over the caps is refused from its prefix, and
        with `key` one not signed with it.  `fill(view)` reads at most len(view) bytes into `view`
        and returns how many (0: EOFError)."""
        prefix = _read(PREFIX.size, fill)
        magic, header_len, payload_len = PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise ProtocolError("bad frame magic")
        if header_len > MAX_HEADER or payload_len > MAX_PAYLOAD:
            raise ProtocolError(f"frame too large ({header_len} + {payload_len} bytes)")
        header, payload = bytes(_read(header_len, fill)), _read(payload_len, fill)
        if key is not None and not hmac.compare_digest(bytes(_read(TAG_BYTES, fill)),
                                                       _tag(key, prefix, header, payload)):
            raise ProtocolError("a frame the worker did not sign")
        return header, payload


def _read(n, fill):
    """Exactly n bytes of the stream, in a memoryview of a buffer of their own."""
    view, got = memoryview(bytearray(n)), 0
    while got < n:
        count = fill(view[got:])
        if not count:
            raise EOFError
        got += count
    return view


def _escape(key):
    return "$" + key if key.startswith("$") else key


_NO_ID = object()
MARKERS = {"$tensor": {"$tensor", "dtype", "shape"}, "$tuple": {"$tuple"}, "$object": {"$object"}}


def decode(header, payload, expect_id=_NO_ID):
    """Rebuild plain data from a frame's header and payload; raise ProtocolError on anything odd.
    With `expect_id`, the frame must be a dict whose "id" is that, checked before decoding on."""
    try:
        tree = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"header is not JSON: {type(exc).__name__}") from None
    if expect_id is not _NO_ID and not (isinstance(tree, dict) and tree.get("id") == expect_id):
        raise ProtocolError("reply out of order or malformed")
    return _rebuild(tree, payload, 0, [len(payload)])


# What json.loads makes of a scalar (exact types only: it makes no subclasses).
_SCALARS = frozenset((str, int, float, bool, type(None)))


def _rebuild(value, payload, depth, room):
    """`room`: tensor bytes that may still be materialised (the payload's size, once)."""
    if depth > MAX_DEPTH:
        raise ProtocolError("nesting too deep")
    kind = type(value)
    if kind in _SCALARS:
        return value
    inner = depth + 1
    if kind is list:
        return [_rebuild(v, payload, inner, room) for v in value]
    if kind is not dict:
        raise ProtocolError("unexpected JSON value")
    for marker, keys in MARKERS.items():
        if marker not in value:
            continue
        if value.keys() != keys:
            raise ProtocolError(f"bad {marker[1:]} marker")
        if marker == "$tensor":
            return _tensor(value, payload, room)
        if marker == "$object":
            return Opaque(value["$object"])
        if type(value["$tuple"]) is not list:
            raise ProtocolError("bad tuple")
        return tuple(_rebuild(value["$tuple"], payload, depth, room))  # its items one level down
    out = {}
    for key, item in value.items():
        if key[:1] == "$":
            if key[:2] != "$$":
                raise ProtocolError("a reserved key in data")
            key = key[1:]
        out[key] = _rebuild(item, payload, inner, room)
    return out


def _tensor(spec, payload, room):
    """A tensor marker (exactly its three keys: _rebuild made sure) -> an exact Tensor."""
    span, dtype_name, shape = spec["$tensor"], spec["dtype"], spec["shape"]
    t = arm()
    dtype = t["dtypes"].get(dtype_name) if type(dtype_name) is str else None
    if dtype is None:
        raise ProtocolError(f"dtype not allowed: {str(dtype_name)[:20]}")
    if not (type(span) is list and len(span) == 2 and _counts(span)):
        raise ProtocolError("bad tensor span")
    if not (type(shape) is list and len(shape) <= 8 and _counts(shape)):
        raise ProtocolError("bad tensor shape")
    start, nbytes = span
    numel = 1
    for n in shape:
        numel *= n
    if start + nbytes > len(payload) or numel * dtype.itemsize != nbytes:
        raise ProtocolError("tensor bytes do not match its shape")
    room[0] -= nbytes
    if room[0] < 0:
        raise ProtocolError("tensors claim more bytes than the frame carries")
    if nbytes == 0:
        return t["torch"].zeros(shape, dtype=dtype)
    # bytearray copies the bytes once (a memoryview slice is no copy), so the tensor owns writable
    # memory; the result is an exact Tensor.
    raw = bytearray(memoryview(payload)[start:start + nbytes])
    return t["torch"].frombuffer(raw, dtype=dtype).reshape(shape)


def _counts(numbers):
    """Every item an int from 0 to MAX_PAYLOAD (by exact type: True is no count)."""
    for n in numbers:
        if type(n) is not int or not 0 <= n <= MAX_PAYLOAD:
            return False
    return True
