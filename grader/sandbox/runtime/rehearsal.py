"""A class's fork server serves once before its first fork: every kind of request a grading
makes, answered on a block and functions of its own.

A worker forked from the fork server runs code the fork server never ran: the wire's decoding and
encoding, the contract's readers, the placement's moves, nn.Module's call path, the copy task's
training, each kernel of torch on the CPU.  Each of them pays, in every fork again, what a first
run pays: Python specialising the bytecode in place (a write: a copy of its page), torch filling
its dispatch caches and C++ statics, glibc's malloc carving the heap.  Done once here, before the
fork, every worker finds it done (~2 ms of a worker's ~70 here).  Only a fork server that
serves a class does it (zygote.py): its ~30 ms are paid back after some fifteen workers.

Nothing here is the lesson's attention: the block mixes positions with the operations a
student's block uses (Linear, views, matmul, masked_fill, softmax), with its scores unscaled and
its mask wrong on purpose (a position reads itself and the later ones, never an earlier one).
Being that close to the exercise's answer, it stays out of the student bundle (release.py).
What the rehearsal leaves behind (the CPU's generator) is put back as it was
(worker.rehearse_serving).
"""
import torch
from torch import nn


class Mixer(nn.Module):
    """The contract's names (qkv, out_proj, mask) on a block that is not attention."""

    def __init__(self, d_model, n_heads, max_len=16):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ValueError("n_heads must divide d_model")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).triu())

    def forward(self, x, return_weights=False):
        b, t, width = x.shape  # [B,T,D]
        parts = self.qkv(x).split(width, dim=-1)  # 3 x [B,T,D]
        a, c, e = (split(p, self.n_heads) for p in parts)  # 3 x [B,H,T,d]
        y, w = mix(a, c, e, self.mask[:t, :t], return_weights=True)
        y = self.out_proj(merge(y))  # [B,T,D]
        return (y, w) if return_weights else y


CausalSelfAttention = Mixer  # the name the worker makes blocks by (worker.block_operations)


def split(x, heads):
    b, t, width = x.shape
    if heads <= 0 or width % heads:
        raise ValueError("heads must divide the width")
    return x.view(b, t, heads, width // heads).transpose(1, 2)  # [B,H,T,d]


def merge(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)  # [B,T,H*d]


def mix(a, c, e, mask=None, return_weights=False):
    if mask is None:
        mask = torch.ones(a.shape[-2], c.shape[-2], dtype=torch.bool, device=a.device).triu()
    scores = a @ c.transpose(-2, -1)  # [...,T,T]
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # [...,T,T]
    return (w @ e, w) if return_weights else w @ e


def requests(d_model=12, n_heads=3, positions=5):
    """The requests, as the judge sends them: {id, op, args, more}."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, positions, d_model, generator=generator)  # [B,T,D]
    h = torch.randn(2, n_heads, positions, d_model // n_heads, generator=generator)  # [B,H,T,d]
    q, k, v, o = torch.randn(4, d_model, d_model, generator=generator)  # 4 x [D,D]
    mask = torch.ones(positions, positions, dtype=torch.bool).tril()  # [T,T]
    new = ("new", {"args": [d_model, n_heads, 8]})

    def contract(action, **args):
        return "contract", dict(args, action=action)

    asked = [  # the second split and the last new refuse, as a student's code does
        [("call", {"fn": "split", "args": [x, n_heads]}),
         ("call", {"fn": "split", "args": [x, 0]})],
        [("call", {"fn": "merge", "args": [h], "views": [[0, 2, 3]]})],
        [("call", {"fn": "mix", "args": [h, h, h],
                   "kwargs": {"mask": mask, "return_weights": True}}),
         ("call", {"fn": "mix", "args": [h, h, h]})],
        [("devices", {}), ("call_on", {"fn": "mix", "device": "meta", "args": [h, h, h],
                                       "kwargs": {"return_weights": True}})],
        [("call_on", {"fn": "mix", "device": "cpu", "dtype": "float64", "args": [h, h, h]})],
        [new, contract("describe", d_model=d_model),
         contract("inject", d_model=d_model, q=q, k=k, v=v, o=o), ("forward", {"x": x}),
         ("forward", {"x": x, "return_weights": True}), contract("read", d_model=d_model)],
        [new, contract("scramble", seed=1), contract("grads", d_model=d_model, x=x, upstream=x),
         contract("train_mode", training=False)],
        [new, contract("forward_on", x=x, device="cpu"), contract("place", dtype="float64"),
         contract("forward_on", x=x, device="cpu", dtype="float64")],
        [new, contract("place", dtype="bfloat16"),
         contract("forward_on", x=x, device="cpu", dtype="bfloat16")],
        [new, contract("place", device="meta"), contract("forward_on", x=x, device="meta")],
        [("new", {"args": [d_model, 5]})],
        [("constants", {"names": ["n_heads", "missing"]})],
    ]
    wide = torch.randn(2, positions, 32, generator=generator)  # [B,T,D] of the copy task's D
    trained = [("train_copy", {"seed": 0, "n_heads": 4}), ("new", {"args": [32, 4, 12]}),
               ("load", {"state": {"qkv.weight": torch.zeros(96, 32)}}), ("forward", {"x": wide})]
    for number, calls in enumerate(asked + [trained]):
        (op, args), more = calls[0], [{"op": o, "args": a} for o, a in calls[1:]]
        yield {"id": 8 * number + 1, "op": op, "args": args, "more": more}
