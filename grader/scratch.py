"""Where the kit's short-lived folders go: a submission's work folder, the fork server's spool of
copies, a spare worker's folder.

A class makes and removes a few of them per submission.  On a disk each is an inode written and
freed, and on ext4 without a journal (the machine the kit is measured on) every new inode is then
looked for past each one freed in the last minute or more (`recently_deleted`, in the inode
allocator): a class of 200 spent 3.8 % of the whole machine's CPU there (perf), finding room for
files that lived a second, and the class's own files in the output folder paid for it too.  A
memory filesystem (Linux's /dev/shm, a tmpfs) has no such cost.  The folders are as private there
as in /tmp (mkdtemp: mode 0700, in a sticky folder), and a sandboxed worker sees neither:
bubblewrap gives it a /dev and a /tmp of its own.

TMPDIR, where it is set, is obeyed: whoever set it chose where temporaries go.
"""
import functools
import os
import tempfile

MEMORY = "/dev/shm"
# Free bytes it must have: a work folder holds one file of at most 2 MiB, a judge a few at once.
ROOM = 64 * 1024 * 1024


def mkdtemp(prefix):
    """A new private folder under root()."""
    return tempfile.mkdtemp(prefix=prefix, dir=root())


@functools.lru_cache(maxsize=1)
def root():
    """/dev/shm where it is a writable tmpfs with room and TMPDIR is not set; else the temp
    folder (tempfile.gettempdir())."""
    if not os.environ.get("TMPDIR") and is_memory(MEMORY) and has_room(MEMORY):
        return MEMORY
    return tempfile.gettempdir()


def is_memory(path):
    """`path` is the mount point of a tmpfs we may write in (Linux: /proc/self/mounts)."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as handle:
            mounts = [line.split() for line in handle]
    except OSError:
        return False
    # the last mount on a point is the one seen there
    types = [fields[2] for fields in mounts if len(fields) > 2 and fields[1] == path]
    return bool(types) and types[-1] == "tmpfs" and os.access(path, os.W_OK | os.X_OK)


def has_room(path, room=ROOM):
    try:
        info = os.statvfs(path)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize >= room
