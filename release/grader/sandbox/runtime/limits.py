"""The sandbox's limits and how a process applies them, shared by launch.py and zygote.py so a cold
worker and a forked one get the same box.  Standard library only.
"""
import glob
import os
import resource
import stat

UNPRIVILEGED = 65534  # nobody: the uid of a worker without a uid of its own (uidpool.py)
TMP_BYTES = 32 * 1024 ** 2  # a worker's /tmp is RAM: it must have a size
SANDBOX_FAILED = 70  # the exit status of a worker whose sandbox could not be set up
CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
CLONE_NEWIPC, CLONE_NEWNET = 0x08000000, 0x40000000


def accelerator_nodes():
    """The NVIDIA device nodes of this machine, which a worker that may use CUDA needs."""
    nodes = []
    for path in sorted(glob.glob("/dev/nvidia*")):
        try:
            if stat.S_ISCHR(os.stat(path).st_mode):
                nodes.append(path)
        except OSError:
            pass
    return nodes


def memory_rlimit():
    """RLIMIT_AS, or where CUDA may start RLIMIT_DATA (CUDA reserves address space it never
    writes, and cannot start under a cap of 3 GiB of it)."""
    return resource.RLIMIT_DATA if accelerator_nodes() else resource.RLIMIT_AS


def memory_held(pid):
    """(counted, resident): the bytes of process `pid` its memory limit counts and its resident
    bytes, from /proc; None where they cannot be read."""
    counted_field = "VmData" if memory_rlimit() == resource.RLIMIT_DATA else "VmSize"
    fields = {}
    try:
        with open(f"/proc/{int(pid)}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in (counted_field, "VmRSS"):
                    fields[name] = int(value.split()[0]) * 1024  # "123456 kB"
    except (OSError, ValueError, IndexError):
        return None
    if len(fields) != 2:
        return None  # a zombie has no memory lines
    return fields[counted_field], fields["VmRSS"]


def rlimit_table(limits, memory=None):
    """[(resource, value)] for `limits` (Limits' fields), built before the fork."""
    return [(resource.RLIMIT_CPU, limits["cpu_seconds"]),
            (memory_rlimit() if memory is None else memory, limits["memory_bytes"]),
            (resource.RLIMIT_NPROC, limits["processes"]),
            (resource.RLIMIT_FSIZE, limits["file_bytes"]),
            (resource.RLIMIT_NOFILE, limits.get("open_files", 256)),
            (resource.RLIMIT_CORE, 0)]


def apply_rlimits(table):
    for kind, value in table:
        try:
            resource.setrlimit(kind, (value, value))
        except (ValueError, OSError):
            pass  # a limit the OS does not allow is left as it is

