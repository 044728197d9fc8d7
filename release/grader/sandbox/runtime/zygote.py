"""The fork server: import torch once, then fork one fresh worker per submission.

Runs where a worker runs (inside bubblewrap, or as a plain subprocess), imports nothing from the
judge side and never runs a student's code itself.

Usage: python -I -u zygote.py CONTROL_FD MODE  (the control socket of the judge that started it)

MODE "namespaces" (bubblewrap as root; root inside the sandbox, with no network): each child gets
a mount, a PID (as its PID 1), an IPC and a network namespace of its own, sees only its own
submission, read-only, at /submission, a fresh bounded /tmp and /proc, and drops every capability
to the uid the judge claimed for it (uidpool.py).  MODE "plain": the child gets its own session,
the limits, and its own IPC and network namespaces where it may (root).  Every child installs the
syscall filter (syscalls.py) before the student's file is imported.

Control channel (a SOCK_SEQPACKET socket; one JSON object per packet):
  judge  -> {"op": "spawn", "id": N, "dir": D, "student": NAME, "uid": U, "limits": {...}}
            with three fds attached: the worker's channel, its stdout and its stderr
  zygote -> {"ready": true, "mode": MODE}   once torch is imported (and, in namespaces mode, a
            probe child has built its namespaces), or {"ready": false, "error": ...} and it exits
  zygote -> {"spawned": N, "pid": P}   or   {"failed": N, "error": "..."}
  judge  -> {"op": "end", "id": N, "grace": S}   (a worker still running S seconds later is
            killed with its process group)
  zygote -> {"exited": N, "code": C, "cpu_seconds": S}   (C < 0: signal -C)
When the judge closes its channel, every child is killed and the zygote exits.
"""
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import syscalls  # noqa: E402
import worker  # noqa: E402
from limits import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID,  # noqa: E402
                    SANDBOX_FAILED, TMP_BYTES, UNPRIVILEGED, accelerator_nodes, apply_rlimits,
                    memory_rlimit, rlimit_table)

SPOOL, SUBMISSION = "/spool", "/submission"
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 4096, 16384, 1 << 18, 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 24, 36, 38

libc = ctypes.CDLL(None, use_errno=True)
NAMESPACES = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source, target, fstype, flags, data=None):
    encode = (lambda s: None if s is None else s.encode())
    _check(libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags),
                      encode(data)), f"mount {target}")


MEMORY_RLIMIT = memory_rlimit()  # looked up once, before any fork
GPU = bool(accelerator_nodes())  # CUDA's driver then needs a unix socket (syscalls.py)


def drop_privileges(uid):
    """uid/gid `uid`, no supplementary groups, an empty capability bounding set, no new privs."""
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # clears the effective capabilities
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    # Credentials changed, which clears the parent-death signal: set it (again) now.
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")


def runtime_under_tmp():
    """The Python runtime's folders under /tmp (a kit checked out there, as CI does), which each
    child's fresh /tmp would hide."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)} | {sys.prefix}
    under = sorted(p for p in roots if p.startswith("/tmp/") and os.path.isdir(p))
    return [p for p in under if not any(p.startswith(q + "/") for q in under if q != p)]


def fork_into_namespaces():
    """os.fork, the child in new mount, PID (as its PID 1), IPC and network namespaces; 0 in the
    child, else its pid.  A middle process unshares them (a new PID namespace takes only children
    forked after it), forks the child and exits, the zygote being a child subreaper.  The child
    goes on only once the middle process is reaped, so that its parent-death signal
    (drop_privileges) is tied to the zygote."""
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    said_read, said_write = os.pipe()
    go_read, go_write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(said_read)
        code = SANDBOX_FAILED
        try:
            _check(libc.unshare(NAMESPACES), "unshare")
            pid = os.fork()
            if pid == 0:
                os.close(said_write)
                os.close(go_write)
                while os.read(go_read, 1):  # its end: the middle process is reaped
                    pass
                os.close(go_read)
                return 0
            os.write(said_write, str(pid).encode())
            code = 0
        except BaseException as exc:
            os.write(said_write, f"{type(exc).__name__}: {exc}".encode(errors="replace"))
        os._exit(code)
    for fd in (said_write, go_read):
        os.close(fd)
    try:
        with os.fdopen(said_read, "rb") as reader:
            said = reader.read(2000).decode(errors="replace")
        os.waitpid(middle, 0)
    finally:
        os.close(go_write)
    if not said.isdigit():
        raise OSError(said or "the middle process ended without a word")
    return int(said)


def enter_sandbox(spool_dir, uid=UNPRIVILEGED, tmp_bytes=TMP_BYTES):
    """In a child of fork_into_namespaces: its private mount table (its submission, read-only, at
    /submission, an empty /tmp of `tmp_bytes` with only the runtime under /tmp inside, nothing of
    the other submissions), its own /proc, then no privileges left.  Its network namespace (a
    loopback that is down) keeps another student's live worker out of reach."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount(spool_dir, SUBMISSION, None, MS_BIND)
    mount(None, SUBMISSION, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    mount("tmpfs", SPOOL, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    staged = []
    for i, path in enumerate(runtime_under_tmp()):  # park them in the (now private) spool while /tmp is replaced
        stage = f"{SPOOL}/keep{i}"
        os.mkdir(stage)
        mount(path, stage, None, MS_BIND | MS_REC)
        staged.append((stage, path))
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={int(tmp_bytes)}")
    for stage, path in staged:
        os.makedirs(path, mode=0o755, exist_ok=True)
        mount(stage, path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        _check(libc.umount2(stage.encode(), MNT_DETACH), f"umount {stage}")
        os.rmdir(stage)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    drop_privileges(uid)


def child(request, fds, mode, closing, torch):
    """In the forked child: never returns."""
    code = 1
    try:
        for fd in closing:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        channel_fd, out_fd, err_fd = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            os.close(fd)
        os.setsid()  # its own process group: the zygote kills the whole group
        limits, folder = request["limits"], request["dir"]
        if mode == "plain":
            if os.geteuid() == 0:  # IPC and network of its own (an ordinary user may not, nor
                libc.unshare(CLONE_NEWIPC | CLONE_NEWNET)  # root without CAP_SYS_ADMIN)
        else:  # born in its namespaces (fork_into_namespaces): PID 1 of its own
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            enter_sandbox(os.path.join(SPOOL, os.path.basename(folder)),
                          int(request.get("uid", UNPRIVILEGED)), limits.get("tmp_bytes", TMP_BYTES))
            folder = SUBMISSION
        os.chdir(folder)
        apply_rlimits(rlimit_table(limits, MEMORY_RLIMIT))
        syscalls.install(unix_sockets=GPU)
        worker.serve(channel_fd, os.path.join(folder, os.path.basename(request["student"])), torch)
        code = 0
    except BaseException as exc:  # the sandbox could not be set up: say so on stderr and exit
        os.write(2, f"zygote child: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
        code = SANDBOX_FAILED
    finally:
        os._exit(code)


def probe_namespaces(spool=SPOOL):
    """None, or why a child here cannot be born in its own namespaces, mount its files and drop
    its privileges (a seccomp profile, missing capabilities): the judge then falls back to cold
    workers instead of grading every submission as a crash."""
    probe = os.path.join(spool, ".probe")
    os.makedirs(probe, exist_ok=True)
    read_end, write_end = os.pipe()
    try:
        pid = fork_into_namespaces()
    except OSError as exc:
        for fd in (read_end, write_end):
            os.close(fd)
        os.rmdir(probe)
        return f"{type(exc).__name__}: {exc}"
    if pid == 0:
        code = SANDBOX_FAILED
        try:
            os.close(read_end)
            enter_sandbox(probe)
            code = 0
        except BaseException as exc:
            os.write(write_end, f"{type(exc).__name__}: {exc}".encode(errors="replace"))
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        why = reader.read(2000).decode(errors="replace")
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    os.rmdir(probe)
    return None if code == 0 else (why or f"the probe exited with {code}")


class Zygote:
    """Serves the judge at the other end of its control socket; when the judge closes it, every
    child is killed and the zygote exits."""

    def __init__(self, control_fd, mode):
        self.control = socket.socket(fileno=control_fd)
        self.mode = mode
        self.children = {}  # pid -> spawn id
        self.deadlines = {}  # pid -> when it is killed (the judge has let it go)
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def send(self, message):
        with contextlib.suppress(OSError):  # the judge is gone: its children are being killed
            self.control.send(json.dumps(message).encode())

    def spawn(self, request, fds):
        pid, error = None, "expected three fds"
        if len(fds) == 3:
            try:
                pid = fork_into_namespaces() if self.mode == "namespaces" else os.fork()
            except OSError as exc:
                error = f"{type(exc).__name__}: {exc}"
            if pid == 0:
                child(request, fds, self.mode,
                      [self.control.fileno(), self.wake_read, self.wake_write], self.torch)
        for fd in fds:
            os.close(fd)
        if pid is None:
            self.send({"failed": request.get("id"), "error": error})
        else:
            self.children[pid] = request.get("id")
            self.send({"spawned": request.get("id"), "pid": pid})

    def end(self, spawn_id, grace):
        for pid, known in self.children.items():
            if known == spawn_id:
                self.deadlines[pid] = time.monotonic() + min(max(float(grace), 0.0), 10.0)

    def kill_overdue(self):
        now = time.monotonic()
        for pid in [p for p, t in self.deadlines.items() if t <= now]:
            del self.deadlines[pid]
            for kill in (os.killpg, os.kill):  # the group; the pid if it has no group yet
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)

    def reap(self):
        while self.children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            spawn_id = self.children.pop(pid, None)
            self.deadlines.pop(pid, None)
            with contextlib.suppress(OSError):  # whatever it started in its group goes with it
                os.killpg(pid, signal.SIGKILL)
            self.send({"exited": spawn_id, "code": os.waitstatus_to_exitcode(status),
                       "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 4)})

    def run(self):
        self.torch = worker.prepare()  # each fork has it all, frozen for the collector
        why_not = probe_namespaces() if self.mode == "namespaces" else None
        self.send({"ready": why_not is None, "mode": self.mode, "error": why_not})
        if why_not is not None:
            return
        while True:
            timeout = (max(min(self.deadlines.values()) - time.monotonic(), 0)
                       if self.deadlines else None)
            readable, _, _ = select.select([self.control, self.wake_read], [], [], timeout)
            self.kill_overdue()
            if self.wake_read in readable:
                os.read(self.wake_read, 4096)
                self.reap()
            if self.control not in readable:
                continue
            try:
                data, fds, _, _ = socket.recv_fds(self.control, 65536, 8)
            except OSError:
                data, fds = b"", []
            if not data:
                break  # the judge closed its channel
            try:
                request = json.loads(data)
            except ValueError:
                request = {}
            if request.get("op") == "spawn":
                self.spawn(request, fds)
            else:
                for fd in fds:
                    os.close(fd)
                if request.get("op") == "end":
                    self.end(request.get("id"), request.get("grace", 0))
        self.deadlines = dict.fromkeys(self.children, 0)  # every child is overdue now
        self.kill_overdue()


def main():
    Zygote(int(sys.argv[1]), sys.argv[2]).run()


if __name__ == "__main__":
    main()
