"""The judge's side of the worker protocol never crashes or hangs on what a hostile worker sends."""
import random
import struct

import pytest
import torch

from grader.authoring import stubs as authoring
from grader.judge import grading
from grader.judge.workers import forked
from grader.sandbox.runtime import wire
import zygotes


def stream(data, most=None, asked=None):
    """fill(view) over `data`: at most `most` bytes a read (all that fits, if None); each read's
    room is appended to `asked`."""
    data = bytearray(data)

    def fill(view):
        if asked is not None:
            asked.append(len(view))
        n = min(len(view), len(data), most or len(data))
        view[:n] = data[:n]
        del data[:n]
        return n
    return fill


def decode_bytes(data):
    return wire.decode(*wire.FrameReader().read_frame(stream(data)))


def test_round_trip_gives_exact_tensors():
    value = {"x": torch.randn(2, 3), "m": torch.ones(2, 2, dtype=torch.bool), "t": (1, "a", None)}
    back = decode_bytes(wire.encode(value))
    assert type(back["x"]) is torch.Tensor and torch.equal(back["x"], value["x"])
    assert back["m"].dtype == torch.bool and back["t"] == (1, "a", None)


def test_subclass_arrives_as_a_plain_tensor():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True
    liar = torch.zeros(3).as_subclass(Liar)
    back = decode_bytes(wire.encode(liar))
    assert type(back) is torch.Tensor and not bool((back == torch.ones(3)).all())


@pytest.mark.parametrize("seed", range(200))
def test_random_and_truncated_frames_only_raise_protocol_errors(seed):
    rng = random.Random(seed)
    good = wire.encode({"id": 1, "ok": [torch.randn(3, 4), {"a": 1.5}]})
    choice = seed % 4
    if choice == 0:
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
    elif choice == 1:
        data = good[:rng.randint(0, len(good) - 1)]
    elif choice == 2:
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
        data = bytes(data)
    else:
        data = wire.PREFIX.pack(wire.MAGIC, rng.choice([2 ** 31, 2 ** 32 - 1]), 2 ** 60) + good
    try:
        decode_bytes(data)
    except (wire.ProtocolError, EOFError, struct.error):
        pass


@pytest.mark.parametrize("header", [
    b'{"$tensor": [0, 8], "dtype": "object", "shape": [1]}',
    b'{"$tensor": [0, 8], "dtype": "float32", "shape": [3]}',
    b'{"$tensor": [0, 999999], "dtype": "float32", "shape": [249999]}',
    b'{"$tensor": [-8, 8], "dtype": "float32", "shape": [2]}',
    b'{"$tensor": [0, 8], "dtype": "float32", "shape": "2"}',
    b'{"$tuple": 5}',
    b"[" * 100000 + b"]" * 100000,
    b"\xff\xfe not json",
])
def test_malformed_headers_are_refused(header):
    with pytest.raises(wire.ProtocolError):
        wire.decode(header, b"\x00" * 8)




def test_a_worker_that_writes_garbage_fails_only_its_checks(tmp_path):
    """On workers forked from the module's fork server (each call that writes garbage costs its
    worker: a fork, not a cold start each; what is judged is the judge's reading of the channel)."""
    source = open(authoring.SOLUTION, encoding="utf-8").read()
    # merge_heads writes a forged, malformed frame straight onto the channel (the process's one
    # socket, found as test_hostile's forgeries find it: a forked worker has no argv of its own).
    source = source.replace(
        "    batch, heads, positions, width = x.shape\n",
        "    import os, stat\n"
        "    channel = next(fd for fd in range(3, 256) if os.path.exists(f'/proc/self/fd/{fd}')\n"
        "                   and stat.S_ISSOCK(os.fstat(fd).st_mode))\n"
        "    os.write(channel, b'AW12' + b'\\xff' * 12 + b'junk')\n"
        "    batch, heads, positions, width = x.shape\n", 1)
    path = tmp_path / "attention.py"
    path.write_text(source)
    sub, student = grading.start(str(path), "process", None, forked(zygotes.server("process")))
    data = grading.finish(sub, student)
    assert data["metadata"]["worker_start"] == "fork"
    status = {c["id"]: c["status"] for c in data["checks"]}
    assert status["merge_heads.round_trip"] == "error"
    card = next(c for c in data["checks"] if c["id"] == "merge_heads.round_trip")
    assert {v["key"] for v in card["verdicts"]} == {"protocol"}  # the judge read the garbage
    assert status["split_heads.transpose"] == "passed" and status["quiz.q1_params"] == "passed"
    assert data["score"] < data["max_score"]


@pytest.mark.parametrize("leaf", ["1", '"s"', "null", "[]", "{}", '{"$tuple": []}'])
@pytest.mark.parametrize("wrap", ["[{}]", '{{"k": {}}}', '{{"$tuple": [{}]}}'])
def test_nesting_is_refused_exactly_past_max_depth(wrap, leaf):
    """A scalar counts as a level like any value: MAX_DEPTH levels below the top decode, one
    more is refused, whichever container holds it (the decoder takes scalars in place)."""
    def nested(levels):
        text = leaf
        for _ in range(levels):
            text = wrap.format(text)
        return text.encode()

    wire.decode(nested(wire.MAX_DEPTH), b"")
    with pytest.raises(wire.ProtocolError, match="nesting too deep"):
        wire.decode(nested(wire.MAX_DEPTH + 1), b"")


@pytest.mark.parametrize("most", [None, 1, 7, 4096])
def test_frames_come_whole_however_the_stream_splits_them(most):
    # Frames back to back, read in pieces of `most` bytes (None: all that is asked for): each
    # decodes to what was sent, and a stream that ends inside a frame is EOFError.
    values = [{"id": 1, "ok": torch.arange(6.0)}, {"id": 2, "ok": "x" * 100},
              {"id": 3, "ok": torch.zeros(70_000)}, {"id": 4, "ok": None}]
    data = b"".join(wire.encode(v) for v in values)
    reader, fill = wire.FrameReader(), stream(data[:-3], most)
    for value in values[:-1]:
        back = wire.decode(*reader.read_frame(fill))
        assert back["id"] == value["id"]
        if isinstance(value["ok"], torch.Tensor):
            assert torch.equal(back["ok"], value["ok"])
        else:
            assert back["ok"] == value["ok"]
    with pytest.raises(EOFError):
        reader.read_frame(fill)
