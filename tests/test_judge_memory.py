"""The judge gives a large answer's memory back once it is freed (grader/judge/memory.py): a frame
of a hostile worker cannot stay resident in the judge after its check."""
import os
import subprocess
import sys

import pytest

from grader.judge import memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETAINED = """
import sys
sys.path.insert(0, sys.argv[1])
from grader.judge import memory
if sys.argv[2] == "fixed":
    assert memory.return_large_blocks()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
before = rss()
for _ in range(3):
    block = bytearray(8 << 20)  # a frame's payload, zero-filled: every page touched
    small = bytearray(1000)     # allocated after it
    del block
print((rss() - before) / 2 ** 20)
"""


def retained_mib(mode):
    done = subprocess.run([sys.executable, "-c", RETAINED, ROOT, mode], capture_output=True,
                          text=True, check=True)
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or memory._mallopt() is None,
                    reason="glibc's mallopt only")
def test_a_freed_frame_leaves_the_judge():
    assert retained_mib("plain") >= 7  # glibc's own rule keeps it (the test can fail)
    assert retained_mib("fixed") < 1


def test_every_judge_sets_it_before_its_checks(monkeypatch):
    from grader.judge import service

    calls = []
    monkeypatch.setattr(memory, "return_large_blocks", lambda: calls.append(1))
    judge = service.Judge(isolation="process")
    try:
        judge.session(("public",))
        assert calls == [1]
    finally:
        judge.close()
