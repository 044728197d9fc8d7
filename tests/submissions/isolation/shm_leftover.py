# where: import
# Kernel state that would outlive the worker: a System V shared-memory segment (RAM outside its
# memory limit), a message queue, a memfd (RAM outside it too), and kernel keys in the uid's user keyring and in the session
# keyring (kept per uid by the kernel: the next worker with that uid would read them).
try:  # a foreign call is refused by the worker's audit hook (isolation.py) before the filter
    import ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.shmget.restype = ctypes.c_int
    SHM_ID = _libc.shmget(0, 1 << 20, 0o1000 | 0o666)  # IPC_PRIVATE, IPC_CREAT | rw for all
    MSG_ID = _libc.msgget(0, 0o1000 | 0o666)
    _ADD_KEY = {"x86_64": 248, "aarch64": 217}.get(__import__("platform").machine(), 248)
    KEYS = [_libc.syscall(_ADD_KEY, b"user", b"left-%d" % i, b"secret", ctypes.c_size_t(6),
                          ctypes.c_long(ring))
            for i, ring in enumerate((-4, -3, -5))]  # the user, session and user-session keyrings
except RuntimeError:
    SHM_ID = MSG_ID = -1
    KEYS = [-1, -1, -1]
import os
try:  # RAM outside the address space: written, never mapped
    MEMFD = os.memfd_create("hold")
except OSError:
    MEMFD = -1
print("SHM_ID", SHM_ID, "MSG_ID", MSG_ID, "KEYS", *KEYS, "MEMFD", MEMFD)
