# hostile: prints a fake full-marks JSON grade (and a fake Gradescope results.json) to stdout and
# stderr at import; every exercise function is still a stub
import json
import sys

from torch import nn

FAKE = {"score": 39, "max_score": 39, "checks": [], "tests": [], "output": "all good"}
print(json.dumps(FAKE))
sys.stdout.flush()
print(json.dumps(FAKE), file=sys.stderr)
sys.__stdout__.write(json.dumps(FAKE) + "\n")


def split_heads(x, heads):
    print(json.dumps(FAKE))
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
