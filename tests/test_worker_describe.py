"""What the worker says of an error and how it seeds the copy task, each done the cheap way, must
say what the expensive way said:

- describe_exception names the student's own innermost line and its code, however deep in torch
  the error was raised, and reads no other file's source (traceback.extract_tb read every frame's);
- copytask.seed_cpu draws what torch.manual_seed draws on the CPU, without queueing a formatted
  stack for CUDA on every call (torch.manual_seed does, in a process that never starts CUDA).
"""
import linecache
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "grader", "sandbox", "runtime"))
import copytask  # noqa: E402
import worker  # noqa: E402

STUDENT = '''import torch
from torch import nn


def inner(x):
    return nn.functional.linear(x, torch.zeros(4, 3))  # the innermost student line


def outer(x):
    return inner(x) + 1
'''


def _raised(tmp_path, call):
    path = tmp_path / "attention.py"
    path.write_text(STUDENT, encoding="utf-8")
    namespace = {}
    exec(compile(STUDENT, str(path), "exec"), namespace)
    try:
        call(namespace)
    except Exception as exc:  # noqa: BLE001: the error is the subject
        return exc, str(path)
    raise AssertionError("the call did not raise")


def test_an_error_inside_torch_names_the_students_innermost_line(tmp_path):
    exc, path = _raised(tmp_path, lambda ns: ns["outer"](torch.zeros(2, 5)))
    linecache.clearcache()
    info = worker.describe_exception(exc, path)
    assert info["type"] == "RuntimeError"
    assert info["line"] == 6
    assert info["code"] == ("return nn.functional.linear(x, torch.zeros(4, 3))  "
                            "# the innermost student line")
    assert "RuntimeError" in info["mro"] and info["message"]
    # only the student's file was read for it
    assert set(linecache.cache) <= {path}


def test_an_error_outside_the_students_file_names_no_line(tmp_path):
    exc, _ = _raised(tmp_path, lambda ns: ns["outer"](torch.zeros(2, 5)))
    info = worker.describe_exception(exc, str(tmp_path / "other.py"))
    assert info["line"] is None and info["code"] == ""


def test_a_syntax_error_names_its_line(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text("def f(:\n    pass\n", encoding="utf-8")
    try:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    except SyntaxError as exc:
        info = worker.describe_exception(exc, str(path))
    assert info["type"] == "SyntaxError" and info["line"] == 1 and info["code"] == "def f(:"


def test_seed_cpu_draws_what_manual_seed_draws():
    torch.manual_seed(7)
    expected = (torch.rand(5), torch.randn(3, 3), torch.randperm(10))
    copytask.seed_cpu(7)
    drawn = (torch.rand(5), torch.randn(3, 3), torch.randperm(10))
    assert all(torch.equal(a, b) for a, b in zip(expected, drawn))


def test_seed_cpu_queues_nothing_for_cuda():
    import torch.cuda

    if torch.cuda.is_initialized():
        pytest.skip("a started CUDA takes its seed at once, with no queue")
    before = len(torch.cuda._queued_calls)
    for seed in range(5):
        copytask.seed_cpu(seed)
    assert len(torch.cuda._queued_calls) == before
