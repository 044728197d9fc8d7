"""Start the worker behind a process boundary: bubblewrap where it works, else a plain subprocess.

Either way the worker gets resource limits, a minimal environment, `python -I`, its own process
group and a private copy of the runtime folder.  In bubblewrap also no network, a read-only view
of the Python runtime, an empty /tmp, an unprivileged uid, its own PID namespace and its
submission, read-only.  On a machine with an NVIDIA GPU the worker gets its device nodes, and its
memory cap counts RLIMIT_DATA instead of the address space, which CUDA reserves by the hundred GiB.
"""
import contextlib
import dataclasses
import functools
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from grader import paths, process, safefs, words
from grader.sandbox.runtime.limits import (CLONE_NEWIPC, CLONE_NEWNET, TMP_BYTES, UNPRIVILEGED,
                                           accelerator_nodes, apply_rlimits, memory_held,
                                           rlimit_table)

SANDBOX_WORK = "/submission"
SANDBOX_RUNTIME = "/grader-runtime"


class WorkerFailure(Exception):
    """The worker did not answer properly: kind is timeout, memory_limit, crashed, protocol, budget
    or sandbox (the grader's own could not be set up).  `message` is English, `zh` Chinese;
    `fields` fill the rubric message."""

    def __init__(self, kind, message, zh=None, **fields):
        self.kind, self.message, self.zh, self.fields = kind, message, zh or message, fields
        super().__init__(f"{kind}: {message}")

    def words(self):
        return {"zh": self.zh, "en": self.message}


@dataclasses.dataclass(kw_only=True)
class Limits:
    """What one worker may use; every field is a keyword (Limits(call_seconds=2.0))."""

    call_seconds: float = 5.0           # wall time for one call (the first one includes the start-up)
    submission_seconds: float = 120.0   # wall time for all calls of one submission
    cpu_seconds: int = 120              # RLIMIT_CPU of one worker
    memory_bytes: int = 3 * 1024 ** 3   # RLIMIT_AS of one worker (torch's import alone maps ~1 GiB)
    processes: int = 64                 # RLIMIT_NPROC (effective for a non-root uid)
    file_bytes: int = 64 * 1024 ** 2    # RLIMIT_FSIZE: the largest file the worker may write
    tmp_bytes: int = TMP_BYTES          # size of the sandbox's /tmp (RAM: it must be bounded)
    output_bytes: int = 16 * 1024       # how much of stdout and stderr is kept, each
    open_files: int = 256               # RLIMIT_NOFILE: bounds the pipe and socket buffers it can fill

    def describe(self):
        return dataclasses.asdict(self)


def bubblewrap_path():
    return shutil.which("bwrap")


@functools.cache
def _bubblewrap_runs(path):
    try:
        return subprocess.run([path, "--unshare-all", "--ro-bind", "/", "/", "true"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def bubblewrap_works():
    """bwrap is installed and the kernel lets it run (tried once for each bwrap found)."""
    path = bubblewrap_path()
    return path is not None and _bubblewrap_runs(path)


def choose_isolation(requested="auto"):
    """'bubblewrap', 'process', or 'auto' (bubblewrap when it works here)."""
    if requested == "auto":
        return "bubblewrap" if bubblewrap_works() else "process"
    if requested == "bubblewrap" and not bubblewrap_works():
        raise RuntimeError("bubblewrap is not available here (apt-get install -y bubblewrap)")
    return requested


def make_runtime_dir():
    """A private copy of the runtime folder, so the worker never sees grader/."""
    runtime = tempfile.mkdtemp(prefix="attn-runtime-")
    for name in sorted(os.listdir(paths.RUNTIME)):
        if name.endswith(".py"):
            shutil.copy(os.path.join(paths.RUNTIME, name), os.path.join(runtime, name))
    os.chmod(runtime, 0o755)
    return runtime


# Where the machine has a GPU: how its driver is found (NVIDIA's containers name it by
# LD_LIBRARY_PATH alone) and which GPUs this grader was given.
ACCELERATOR_ENV = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                   "CUDA_DEVICE_ORDER")


def minimal_env(home):
    """The worker's whole environment: the kit's compute settings and, with a GPU, ACCELERATOR_ENV."""
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    if accelerator_nodes():
        env.update({k: os.environ[k] for k in ACCELERATOR_ENV if k in os.environ})
    return process.pin_environment(env)


def driver_folders():
    """The absolute folders of LD_LIBRARY_PATH where the machine has a GPU, shown read-only."""
    if not accelerator_nodes():
        return []
    found = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    return sorted({os.path.normpath(f) for f in found if os.path.isabs(f) and os.path.isdir(f)})


def _python_roots():
    """Folders the worker's Python needs: the venv, its interpreter, and torch's folder where it
    lies outside them (the student's own torch, lent by grader/tools/install.py)."""
    roots = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), sys.prefix}
    spec = importlib.util.find_spec("torch")  # found, not imported
    if spec is not None and spec.origin:
        folder = os.path.dirname(os.path.dirname(spec.origin))
        if not any(folder == r or folder.startswith(r + os.sep) for r in list(roots)):
            roots.add(folder)
    return sorted(r for r in roots if os.path.isdir(r))


def runs_as_root():
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


def _system_and_python_binds():
    """bwrap arguments that show /lib, /lib64, /bin, Python and a GPU driver's folders, read-only."""
    argv = []
    for link in ("lib", "lib64", "bin"):
        if os.path.islink("/" + link):
            argv += ["--symlink", os.readlink("/" + link), "/" + link]
        elif os.path.isdir("/" + link):
            argv += ["--ro-bind", "/" + link, "/" + link]
    made = set()
    shown = ("/usr", "/lib", "/lib64", "/bin")
    roots = _python_roots() + [f for f in driver_folders()
                               if not any(f == s or f.startswith(s + "/") for s in shown)]
    for root in roots:
        # bwrap makes missing parents mode 0700; the unprivileged worker must traverse them.
        parent = os.path.dirname(root)
        ancestors = []
        while parent not in ("/", "") and parent not in made:
            ancestors.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(ancestors):
            argv += ["--perms", "0755", "--dir", folder]
            made.add(folder)
        argv += ["--ro-bind", root, root]
    return argv


def bubblewrap_argv(work_dir, runtime_dir, spool=None, uid=UNPRIVILEGED,
                    tmp_bytes=Limits.tmp_bytes):
    """bwrap, then (as root) setpriv to a real unprivileged uid inside it.

    As root, a user namespace would map the sandbox's uid back to real root, which escapes
    RLIMIT_NPROC; so no user namespace, and the worker drops to `uid` (its own, uidpool.py) with
    no capabilities.  As an ordinary user, bwrap needs a user namespace instead.

    With `spool` (root only) the sandbox is the fork server's: it stays root so that each child
    can build its own mount table (zygote.py), and sees the spool at /spool.
    """
    as_root = runs_as_root()
    if spool is not None and not as_root:
        raise RuntimeError("the fork server's sandbox needs root (it builds one mount table per child)")
    argv = [bubblewrap_path()]
    argv += (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
              "--unshare-cgroup-try"] if as_root else ["--unshare-all"])
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox",
             "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(int(tmp_bytes)), "--tmpfs", "/tmp"]
    for node in accelerator_nodes():  # the GPU, for the device checks; nothing else of /dev
        argv += ["--dev-bind", node, node]
    argv += _system_and_python_binds()
    argv += ["--ro-bind", runtime_dir, SANDBOX_RUNTIME, "--setenv", "HOME", "/tmp"]
    if spool is not None:
        return argv + ["--bind", spool, "/spool", "--dir", SANDBOX_WORK, "--chdir", "/"]
    argv += ["--ro-bind", work_dir, SANDBOX_WORK, "--chdir", SANDBOX_WORK]
    if as_root:
        argv += [shutil.which("setpriv"), f"--reuid={uid}", f"--regid={uid}",
                 "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
    else:
        argv += ["--uid", str(UNPRIVILEGED), "--gid", str(UNPRIVILEGED)]
    return argv


def _preexec(limits):
    """Between fork and exec: its own session, the limits and, as root, IPC and network namespaces
    of its own.  Everything is resolved here: nothing is looked up between fork and exec."""
    unshare = None
    if os.geteuid() == 0:
        import ctypes

        unshare = ctypes.CDLL(None, use_errno=True).unshare
    table = rlimit_table(vars(limits))

    def preexec():
        os.setsid()
        if unshare is not None:  # refused where root lacks CAP_SYS_ADMIN (a default Docker
            unshare(CLONE_NEWIPC | CLONE_NEWNET)  # container): it then shares them
        apply_rlimits(table)
    return preexec


class CappedReader(threading.Thread):
    """Drain a pipe until its end, keeping only the first `cap` bytes."""

    def __init__(self, stream, cap):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0

    def run(self):
        with self.stream:
            while chunk := os.read(self.stream.fileno(), 65536):
                room = max(self.cap - len(self.kept), 0)
                self.kept += chunk[:room]
                self.dropped += max(len(chunk) - room, 0)

    def text(self):
        out = self.kept.decode("utf-8", "replace")
        return out + (f"\n… [{self.dropped} more bytes dropped]" if self.dropped else "")


class WorkerProcess:
    """One running worker: its process, its channel and its captured output."""

    def __init__(self, work_dir, student_name, limits, isolation, wait_go=False):
        self.runtime_dir = make_runtime_dir()
        self.slot = None
        judge_end, worker_end = socket.socketpair()
        if isolation == "bubblewrap":
            if runs_as_root():  # a uid of its own: its process limit is its own
                from grader.sandbox import uidpool

                self.slot = uidpool.claim()
            prefix = bubblewrap_argv(work_dir, self.runtime_dir,
                                     uid=self.slot.uid if self.slot else UNPRIVILEGED,
                                     tmp_bytes=limits.tmp_bytes)
            worker_py, student = f"{SANDBOX_RUNTIME}/worker.py", f"{SANDBOX_WORK}/{student_name}"
            cwd, home = None, "/tmp"
        else:
            prefix = []
            worker_py = os.path.join(self.runtime_dir, "worker.py")
            student, cwd, home = os.path.join(work_dir, student_name), work_dir, work_dir
        # abspath: a "../.venv/bin/python" would not resolve inside the sandbox.  -u: unbuffered
        # (-I ignores PYTHONUNBUFFERED), so a killed worker loses nothing it printed.
        python = os.path.abspath(sys.executable)
        argv = prefix + [python, "-I", "-u", worker_py, str(worker_end.fileno()), student]
        argv += ["--wait-go"] if wait_go else []  # a spare: imports the student only on go()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(worker_end.fileno(),), cwd=cwd, env=minimal_env(home),
            preexec_fn=_preexec(limits), close_fds=True)
        worker_end.close()
        self.channel = judge_end
        self.stdout = CappedReader(self.proc.stdout, limits.output_bytes)
        self.stderr = CappedReader(self.proc.stderr, limits.output_bytes)
        self.stdout.start()
        self.stderr.start()

    def kill(self):
        """Kill the worker's whole process group (children and SIGTERM-ignorers included)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.channel.close()
        # at most a second each: a process it started may have escaped its group, the pipe open
        self.stdout.join(1.0)
        self.stderr.join(1.0)
        safefs.remove_tree(self.runtime_dir)
        if self.slot is not None:
            self.slot.release()

    def exit_description(self, lang="en"):
        return describe_exit(self.proc.poll(), lang)

    def memory(self):
        """The memory its largest process holds (tree_memory), or None once it has ended."""
        return tree_memory(self.proc.pid) if self.proc.poll() is None else None


# -- the memory a worker holds, read from /proc ---------------------------------------------------
def process_tree(pid):
    """`pid` and every process below it, as this judge's /proc numbers them."""
    found, waiting = [], [pid]
    while waiting:
        current = waiting.pop()
        found.append(current)
        try:
            threads = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for thread in threads:
            with contextlib.suppress(OSError, ValueError):
                with open(f"/proc/{current}/task/{thread}/children", encoding="ascii") as kids:
                    waiting += [int(kid) for kid in kids.read().split()]
    return found


def tree_memory(pid):
    """(counted, resident) bytes of the process under `pid` (itself included) that holds the most
    counted memory (the limit is each process's own), or None."""
    held = [m for m in map(memory_held, process_tree(pid)) if m is not None]
    return max(held) if held else None


def pid_below(root, pid):
    """This judge's number of the process under `root` that is `pid` one PID namespace below
    root's (as a zygote in bubblewrap reports its child), or None."""
    def numbers(of):
        try:
            with open(f"/proc/{of}/status", encoding="ascii") as status:
                line = next((l for l in status if l.startswith("NSpid:")), "")
        except OSError:
            return []
        return line.split()[1:]

    level = len(numbers(root))
    for candidate in process_tree(root):
        found = numbers(candidate)
        if level and len(found) > level + 1 and found[level] == str(pid):
            return candidate
    return None


SIGNAL_WORDS = ("SIGXCPU", "SIGXFSZ", "SIGKILL")  # the signals words.toml [sandbox] says in words


def describe_exit(code, lang="en"):
    """A worker's exit status in words: None (running), an exit code, or -signal."""
    if code is None:
        return words.text("sandbox", "running", lang)
    if code < 0:
        name = signal.Signals(-code).name
        hint = words.text("sandbox", name, lang) if name in SIGNAL_WORDS else name
        return words.text("sandbox", "signal", lang, name=name, hint=hint)
    return words.text("sandbox", "exit_code", lang, code=code)
