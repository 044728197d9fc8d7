"""The reference solution, loaded on the judge side from solutions/attention.py (one source).

Never shipped in release/ and never visible to the worker.
"""
import importlib.util
import os

SOLUTION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "solutions", "attention.py")


def _load():
    spec = importlib.util.spec_from_file_location("reference_attention", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ref = _load()
