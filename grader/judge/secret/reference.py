"""The reference solution, loaded on the judge side from solutions/attention.py (one source).

Never shipped in release/ and never visible to the worker.
"""
import importlib.util
from grader import paths

SOLUTION = paths.SOLUTION


def _load():
    spec = importlib.util.spec_from_file_location("reference_attention", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ref = _load()
