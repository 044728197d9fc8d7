"""A seccomp filter every worker installs on itself before it imports the student's file.

It refuses (EPERM) the system calls whose effect outlives the worker or reaches past it, which
neither Python nor torch needs to run a submission:
- kernel keys: keyrings are kept per uid, so a key would be read by the next worker of that uid;
- System V IPC, POSIX message queues and memfd_create: memory outside RLIMIT_AS;
- socket and socketpair: a worker needs only the channel it inherits (strace: torch's import and
  the copy task make none); with a GPU, AF_UNIX is let through (`unix_sockets`): CUDA's driver
  opens one as it starts;
- ptrace and process_vm_readv/writev: another process of the same uid (the plain fallback);
- perf_event_open, bpf, userfaultfd: kernel attack surface no submission needs.
Every call of another ABI (32-bit, x32) is refused too, so the numbers cannot be sidestepped.  On
an architecture not listed, nothing is installed and `install` says why.
"""
import ctypes
import errno
import platform
import struct

# name -> number, per architecture (x86-64: arch/x86/entry/syscalls; arm64: asm-generic/unistd.h)
_NUMBERS = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250,
               "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67,
               "semget": 64, "semop": 65, "semctl": 66, "semtimedop": 220,
               "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
               "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
               "mq_notify": 244, "mq_getsetattr": 245,
               "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
               "perf_event_open": 298, "bpf": 321, "userfaultfd": 323, "memfd_create": 319,
               "socket": 41, "socketpair": 53},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219,
                "shmget": 194, "shmctl": 195, "shmat": 196, "shmdt": 197,
                "semget": 190, "semctl": 191, "semtimedop": 192, "semop": 193,
                "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189,
                "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183,
                "mq_notify": 184, "mq_getsetattr": 185,
                "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                "perf_event_open": 241, "bpf": 280, "userfaultfd": 282, "memfd_create": 279,
                "socket": 198, "socketpair": 199},
}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000  # x86-64's x32 ABI: the same calls with this bit set

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_AF_UNIX = 1
DENIED = tuple(sorted(_NUMBERS["x86_64"]))


def _op(code, k, jt=0, jf=0):
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine=None, unix_sockets=False):
    """The filter as raw BPF (struct sock_filter[]), or None for an architecture not listed.
    With `unix_sockets`, socket() is refused unless its domain is AF_UNIX."""
    machine = machine or platform.machine()
    numbers = _NUMBERS.get(machine)
    if numbers is None:
        return None
    denied = sorted(n for name, n in numbers.items() if not (unix_sockets and name == "socket"))
    checks = len(denied) + (1 if machine == "x86_64" else 0)
    extra = 3 if unix_sockets else 0  # socket? load its domain; AF_UNIX?
    # 0: load arch; 1: foreign arch -> deny; 2: load nr; checks; [extra]; allow; deny
    ops = [_op(_LD_W_ABS, 4), _op(_JEQ_K, _AUDIT_ARCH[machine], 0, checks + extra + 2),
           _op(_LD_W_ABS, 0)]
    if machine == "x86_64":
        ops.append(_op(_JGE_K, _X32_BIT, checks + extra, 0))
    for i, number in enumerate(denied):
        ops.append(_op(_JEQ_K, number, len(denied) - i + extra, 0))
    if unix_sockets:  # seccomp_data.args[0] (its low 32 bits: the int the kernel reads) at 16
        ops += [_op(_JEQ_K, numbers["socket"], 0, 2), _op(_LD_W_ABS, 16),
                _op(_JEQ_K, _AF_UNIX, 0, 1)]
    ops += [_op(_RET_K, _RET_ALLOW), _op(_RET_K, _RET_ERRNO | errno.EPERM)]
    return b"".join(ops)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install(unix_sockets=False):
    """Install the filter on this process (and every child it makes); None, or why not."""
    raw = program(unix_sockets=unix_sockets)
    if raw is None:
        return f"no seccomp filter for {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    prog = _Program(len(raw) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    # no_new_privs first: the kernel lets an unprivileged process filter itself only then.
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"seccomp refused: {errno.errorcode.get(ctypes.get_errno(), '?')}"
    return None
