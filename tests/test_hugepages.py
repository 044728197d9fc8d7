"""The fork server's memory into huge pages (grader/sandbox/runtime/hugepages.py): which ranges,
in what order, when it gives up, and that a range really becomes one huge page here."""
import ctypes
import errno
import subprocess
import sys
import textwrap

import pytest

from grader import paths
from grader.sandbox.runtime import hugepages

MIB = 1024 * 1024
MAPS = """\
55d0a0000000-55d0a0201000 r-xp 00000000 fd:01 1234   /usr/bin/python3.11
55d0a1000000-55d0a1800000 rw-p 00000000 00:00 0      [heap]
7f0000100000-7f0000700000 rw-p 00000000 00:00 0
7f0001000000-7f0001400000 rw-p 00000000 fd:01 99     /usr/lib/libtorch_cpu.so
7f0002000000-7f0002400000 rw-s 00000000 00:01 7      /dev/zero (deleted)
7f0003000000-7f0003400000 r--p 00000000 00:00 0
7f0004000000-7f0004400000 rw-p 00000000 00:00 0      [stack]
7f0005000000-7f0005100000 rw-p 00000000 00:00 0
"""


def test_ranges_are_the_whole_2mib_of_private_anonymous_writable_memory(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(MAPS, encoding="ascii")
    heap, anon = 0x55d0a1000000, 0x7f0000100000
    assert hugepages.ranges(str(maps)) == [
        (heap + n * 2 * MIB, heap + (n + 1) * 2 * MIB) for n in range(4)] + [
        (0x7f0000200000, 0x7f0000400000), (0x7f0000400000, 0x7f0000600000)]
    assert anon % (2 * MIB) and 0x7f0000700000 % (2 * MIB)  # its ragged ends are left out
    assert hugepages.ranges(str(tmp_path / "absent")) == []


class Madvise:
    """madvise as the kernel answers: `refuse` {start: errno} fails those ranges (`busy` {start:
    n}: with EAGAIN, the first n times only)."""

    def __init__(self, refuse=None, everything=None, busy=None):
        self.calls, self.refuse, self.everything = [], refuse or {}, everything
        self.busy = dict(busy or {})

    def __call__(self, start, length, advice):
        self.calls.append((start, length, advice))
        if self.busy.get(start):
            self.busy[start] -= 1
            ctypes.set_errno(errno.EAGAIN)
            return -1
        code = self.everything or self.refuse.get(start)
        if code:
            ctypes.set_errno(code)
            return -1
        return 0


def chunks(n):
    return [(k * 2 * MIB, (k + 1) * 2 * MIB) for k in range(1, n + 1)]


def test_each_step_collapses_one_range_in_address_order():
    madvise = Madvise(refuse={4 * MIB: errno.EINVAL, 6 * MIB: errno.ENOMEM})
    collapser = hugepages.Collapser(lambda: chunks(12), madvise)
    assert collapser.pending()
    steps = 0
    while collapser.pending():
        collapser.step()
        steps += 1
    assert steps == 12 and (collapser.done, collapser.failed, collapser.reason) == (10, 2, None)
    assert madvise.calls == [(a, 2 * MIB, hugepages.MADV_COLLAPSE) for a, _ in chunks(12)]


def test_a_busy_range_is_tried_again_after_the_others():
    madvise = Madvise(busy={4 * MIB: 2, 8 * MIB: 99})  # one busy twice, one busy for good
    collapser = hugepages.Collapser(lambda: chunks(5), madvise)
    while collapser.pending():
        collapser.step()
    starts = [start // MIB for start, _, _ in madvise.calls]
    assert starts == [2, 4, 6, 8, 10, 4, 8, 4, 8, 8]  # TRIES = 4 for the one that stays busy
    assert (collapser.done, collapser.failed) == (4, 1)


@pytest.mark.parametrize("code", sorted(hugepages.GIVE_UP))
def test_a_kernel_that_cannot_collapse_is_asked_only_a_few_times(code):
    madvise = Madvise(everything=code)
    collapser = hugepages.Collapser(lambda: chunks(200), madvise)
    while collapser.pending():
        collapser.step()
    assert len(madvise.calls) == hugepages.FIRST_TRIES and collapser.reason == errno.errorcode[code]


def test_empty_ranges_after_a_collapse_are_no_reason_to_stop():
    refused = {a: errno.EINVAL for a, _ in chunks(40)[1:]}  # all but the first: ranges of no page
    madvise = Madvise(refuse=refused)
    collapser = hugepages.Collapser(lambda: chunks(40), madvise)
    while collapser.pending():
        collapser.step()
    assert len(madvise.calls) == 40 and collapser.done == 1 and collapser.reason is None


def test_a_range_becomes_one_huge_page_where_the_kernel_can():
    """In a process of its own: 8 MiB of touched anonymous memory, then the collapser."""
    script = textwrap.dedent(f"""
        import mmap, sys
        sys.path.insert(0, {paths.RUNTIME!r})
        import hugepages
        memory = mmap.mmap(-1, 12 * 1024 * 1024, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        memory.write(b"x" * len(memory))  # every page there, none huge (no madvise asked)
        def huge_kb():
            with open("/proc/self/smaps_rollup") as handle:
                return next(int(l.split()[1]) for l in handle if l.startswith("AnonHugePages:"))
        before = huge_kb()
        collapser = hugepages.Collapser()
        while collapser.pending():
            collapser.step()
        print(before, huge_kb(), collapser.done, collapser.reason)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=True)
    before, after, done, reason = result.stdout.split()
    if reason != "None" and done == "0":
        pytest.skip(f"this kernel collapses nothing ({reason})")
    assert int(after) - int(before) >= 8 * 1024  # the 12 MiB hold at least four whole 2 MiB
