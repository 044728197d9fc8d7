"""A uid of its own for every running worker (when the grader is root), so that RLIMIT_NPROC, which
the kernel counts per real uid, is one worker's budget: one submission that fills it cannot stop
another student's worker from starting.

A slot is an exclusive flock on a file named after its uid; the lock dies with its process, so a
killed judge never leaks a slot.  The uids are numbers no account uses.
"""
import contextlib
import fcntl
import os
import random
import tempfile

FIRST_UID, SLOTS = 231_072, 4096  # above the usual 65536 subuid ranges' start, below 2**31


def _lock_dir():
    for base in ("/run/lock", tempfile.gettempdir()):
        folder = os.path.join(base, "attn-grader-uids")
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            if os.stat(folder).st_uid == os.geteuid():
                return folder
        except OSError:
            continue
    raise RuntimeError("no folder for the worker uid locks")


class Slot:
    """One claimed uid; release() (or the death of this process) frees it."""

    def __init__(self, uid, handle):
        self.uid, self.handle = uid, handle

    def release(self):
        with contextlib.suppress(OSError):
            self.handle.close()  # closing the file drops the flock (a second close does nothing)


def claim():
    """A free uid, from a random slot: a just-freed uid (whose processes the kernel may still be
    tearing down) is seldom the next one."""
    folder = _lock_dir()
    start = random.randrange(SLOTS)
    for step in range(SLOTS):
        uid = FIRST_UID + (start + step) % SLOTS
        handle = open(os.path.join(folder, str(uid)), "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return Slot(uid, handle)
    raise RuntimeError(f"all {SLOTS} worker uids are in use")
