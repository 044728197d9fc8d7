# hostile: at import, writes a fake full-marks results.json (Gradescope's file) next to itself, in
# its parent folder and in the working directory; every exercise function is still a stub
import json
import os

from torch import nn

FAKE = {"score": 39, "max_score": 39, "tests": [], "output": "all good"}
here = os.path.dirname(os.path.abspath(__file__))
for folder in {here, os.path.dirname(here), os.getcwd(), os.path.dirname(os.getcwd()),
               "/autograder/results"}:
    if not os.path.isdir(folder):
        continue
    try:
        with open(os.path.join(folder, "results.json"), "w") as handle:
            json.dump(FAKE, handle)
    except OSError:
        pass


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
