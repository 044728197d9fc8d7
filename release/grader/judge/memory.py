"""The judge gives a large answer's memory back to the system as soon as it is freed.

glibc serves an allocation of 128 KiB or more with its own mmap and unmaps it when freed, but
after the first such free it raises that threshold to the freed block's size (up to 32 MiB): a
wire frame's payload and the tensors built from it then come from the heap, which keeps what was
freed, so each large answer a hostile worker sends would add to the judge's resident memory for
good (docs/security.md: the judge's memory under any submission).  A fixed threshold of 1 MiB
keeps the kit's tiny tensors on the heap and sends every frame-sized block back when freed.
Where there is no glibc (macOS, musl) nothing changes.
"""
import ctypes
import functools

M_MMAP_THRESHOLD = -3  # glibc's malloc.h; setting it also turns the dynamic threshold off
THRESHOLD_BYTES = 1 << 20


def _mallopt():
    """glibc's mallopt, among the symbols this process has loaded (libc's among them), or None."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt


@functools.cache
def return_large_blocks():
    """Fix glibc's mmap threshold for this process (once; True where it was set)."""
    mallopt = _mallopt()
    return mallopt is not None and mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES) == 1
