"""The reference solution, loaded on the judge side from solutions/attention.py; never shipped,
never visible to the worker.  The source is read once, at import: the Gradescope autograder
removes solutions/ before any student code runs, so every later copy is compiled from this text.
"""
import types

from grader import paths

with open(paths.SOLUTION, encoding="utf-8") as _handle:
    SOURCE = _handle.read()
_CODE = compile(SOURCE, paths.SOLUTION, "exec")


def fresh_module(name="reference_attention"):
    """A new module object running the reference's code: its globals are its own to replace."""
    module = types.ModuleType(name)
    module.__file__ = paths.SOLUTION
    exec(_CODE, module.__dict__)
    return module


ref = fresh_module()
