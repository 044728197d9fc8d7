"""The fork server's memory made into huge pages, one 2 MiB range at a time, while it waits.

A fork copies one page-table entry for every 4 KiB page of the fork server's private memory
(about 180 MiB once torch is imported), and a worker's exit undoes as many; a range of 2 MiB
held as one huge page is one entry for both.  glibc puts the fork server's malloc heap in huge
pages as it grows (forkserver.ZYGOTE_ENV), but not Python's own object arenas nor torch's other
mappings, and not the parts of the heap filled before it was a whole 2 MiB.  Linux 6.1's
madvise(MADV_COLLAPSE) copies such a range into one huge page on demand: measured here with a
torch-loaded fork server, per fork 2.6 -> 1.4 ms of the fork server's CPU (6 alternating runs of
40 forks), its huge pages 96 -> 154 MiB of its 184 MiB, and its resident memory 0.5 MiB more.

It costs the fork server ~0.16 s of CPU once (114 ranges, 78 collapsed; a range of no page at
all is refused), which ~100 forks pay back on the fork server's side alone.  So it is done only
once AFTER_WORKERS workers were asked for (a `watch` saved that often, a class; never a
`grade`), and between requests: Zygote.run asks for one range whenever no judge is waiting, and
a request that comes meanwhile waits for that range alone (at most 5.5 ms here; most take none,
being huge already).  A range whose pages are busy a moment (a child forking or exiting) is
tried again after the others.  A worker that later writes to a huge page is given a 4 KiB copy
as before (the kernel splits the entry first).  Where the kernel lacks MADV_COLLAPSE, or
transparent huge pages are off, the first FIRST_TRIES ranges say so and nothing more is tried.

A fork server shared by a batch's judges serves a class for sure: it collapses all of it at once,
before it says it is ready (Zygote.run), while no child shares a page with it.  Once children
do, a range many of whose pages they share is refused (EAGAIN, however often it is tried): mid-
batch, 33 MiB outside the heap ended in huge pages; before the first fork, 37 MiB (25 MiB once
the fork server's own writes while serving had split some).  The bench's class of 200, the
collapse between requests from the first worker against all of it before the first: medians of
6 alternating rounds 15.19 -> 14.86 s and 15.31 -> 14.83 s.

Standard library only: it runs inside the sandbox.
"""
import ctypes
import errno

HUGE = 2 * 1024 * 1024
AFTER_WORKERS = 16
MADV_COLLAPSE = 25
# Errors that, on the first FIRST_TRIES ranges with none collapsed, say none will collapse here:
# an older kernel (EINVAL), THP compiled out or set to "never" (EINVAL), madvise itself filtered
# (EPERM, ENOSYS).  A range with no page in it fails with EINVAL too, so one is not enough.
FIRST_TRIES = 8
TRIES = 4  # of one range that meets EAGAIN
GIVE_UP = frozenset({errno.EINVAL, errno.EPERM, errno.ENOSYS})


def ranges(maps="/proc/self/maps"):
    """The whole 2 MiB-aligned ranges [start, end) of this process's private anonymous writable
    memory: the malloc heap and unnamed mappings (Python's arenas, torch's allocations), never a
    file's, the stack or a mapping shared with another process."""
    found = []
    try:
        with open(maps, encoding="ascii", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 5 or not fields[1].startswith("rw") or fields[1][3:4] != "p":
            continue
        name = fields[5].strip() if len(fields) > 5 else ""
        if name not in ("", "[heap]") or fields[4] != "0":  # inode 0: no file behind it
            continue
        low, _, high = fields[0].partition("-")
        try:
            start, end = int(low, 16), int(high, 16)
        except ValueError:
            continue
        start = -(-start // HUGE) * HUGE  # up to the next 2 MiB boundary
        end = end // HUGE * HUGE
        found.extend((at, at + HUGE) for at in range(start, end, HUGE))
    return found


def _madvise():
    libc = ctypes.CDLL(None, use_errno=True)
    madvise = libc.madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise


class Collapser:
    """Collapse this process's memory a range at a time: step() does one, pending() says whether
    any is left.  The ranges are read on the first step (after the warm-up, when the fork
    server's memory is what every fork will copy)."""

    def __init__(self, read_ranges=ranges, madvise=None):
        self._read_ranges, self._madvise = read_ranges, madvise
        self.todo, self.done, self.failed, self.reason = None, 0, 0, None
        self._tries = {}  # start -> tries that met EAGAIN

    def pending(self):
        return self.todo is None or bool(self.todo)

    def step(self):
        """Collapse the next range; never raises."""
        if self.todo is None:
            self.todo = list(reversed(self._read_ranges()))
            try:
                self._madvise = self._madvise or _madvise()
            except (OSError, AttributeError) as exc:  # no libc to ask (not Linux)
                self.todo, self.reason = [], type(exc).__name__
        if not self.todo:
            return
        start, end = self.todo.pop()
        if self._madvise(start, end - start, MADV_COLLAPSE) == 0:
            self.done += 1
            return
        code = ctypes.get_errno()
        # EAGAIN: a page of the range was busy (a child forking or exiting holds it a moment;
        # a third of the ranges on a first pass during a batch here): tried again after the rest.
        if code == errno.EAGAIN and self._tries.get(start, 0) < TRIES - 1:
            self._tries[start] = self._tries.get(start, 0) + 1
            self.todo.insert(0, (start, end))
            return
        self.failed += 1
        if code in GIVE_UP and not self.done and self.failed >= FIRST_TRIES:
            self.todo, self.reason = [], errno.errorcode.get(code, str(code))
        # Otherwise that range stays as it is and the next is tried: ENOMEM (no huge page free),
        # EAGAIN a last time, EINVAL once one worked (a range with no page in it at all: torch
        # and glibc reserve such; or one unmapped since).
