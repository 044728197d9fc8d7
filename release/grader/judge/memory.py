"""The judge gives a large answer's memory back to the system as soon as it is freed; and how
its peak is read (peak_resident_mib).

glibc serves an allocation of 128 KiB or more with its own mmap and unmaps it when freed, but
after the first such free it raises that threshold to the freed block's size (up to 32 MiB): a
wire frame's 8 MiB payload and the tensors built from it then come from the heap, which keeps
what was freed, so each large answer a hostile worker sends adds to the judge's resident memory
for good, by an amount that depends on how the heap happens to be cut (measured, the judge after
a submission answering the largest frames the wire lets through: +60 to +86 MiB over the
reference's grading; with the threshold fixed: +34 to +39 MiB, and the reference's own grading
6 MiB less).  A fixed threshold of 1 MiB keeps the kit's tiny tensors on the heap and sends every
frame-sized block back when freed.  Where there is no glibc (macOS, musl) nothing changes.
"""
import ctypes
import functools

M_MMAP_THRESHOLD = -3  # glibc's malloc.h; setting it also turns the dynamic threshold off
THRESHOLD_BYTES = 1 << 20


@functools.cache
def return_large_blocks():
    """Fix glibc's mmap threshold for this process (once; True where it was set)."""
    return _set_threshold()


def _mallopt():
    """glibc's mallopt, looked up among the symbols this process has loaded already (libc's
    among them): ctypes.util.find_library would run `ldconfig -p` in a process of its own
    first, ~3 ms before the worker of a `grade` could start."""
    try:
        return ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None


def _set_threshold():
    mallopt = _mallopt()
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES) == 1


def peak_resident_mib():
    """This process's peak resident memory, in MiB: its memory map's high-water mark (VmHWM),
    which starts afresh at exec.  ru_maxrss does not: Linux carries over the peak of the process
    that execed, so a process started from a large one (a judge from a parent that had grown, the
    memory bench from `make bench`'s own ~1 GiB) read that one's peak.  ru_maxrss where there is
    no /proc (macOS: bytes there, KiB on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource  # only where there is no /proc
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024
