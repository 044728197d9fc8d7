# where: import
# A System V shared-memory segment left behind: it would outlive the worker and hold RAM.
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmget.restype = ctypes.c_int
SHM_ID = _libc.shmget(0, 1 << 20, 0o1000 | 0o666)  # IPC_PRIVATE, IPC_CREAT | rw for all
print("SHM_ID", SHM_ID)
