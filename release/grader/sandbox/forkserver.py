"""The judge's side of the fork server (zygote.py): a zygote of the judge's own imports torch
once and forks every submission's worker.  A ForkedWorker looks like launch.WorkerProcess to the
Student proxy.  Used where it isolates as well as a cold worker (`supported`).
"""
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

from grader import safefs
from grader.sandbox import launch as sandbox
from grader.sandbox import uidpool
from grader.sandbox.launch import WorkerFailure
from grader.sandbox.runtime.limits import UNPRIVILEGED

READY_SECONDS = 120.0


def supported(isolation):
    """The zygote's mode for this isolation, or None when workers must start cold."""
    if isolation == "process":
        return "plain"
    if isolation == "bubblewrap" and sandbox.runs_as_root():
        return "namespaces"
    return None


class _Exit:
    """What Student reads as `worker.proc`: the child's exit status, reported by the zygote."""

    def __init__(self):
        self.done, self.code = threading.Event(), None

    def poll(self):
        return self.code if self.done.is_set() else None

    def wait(self, timeout=None):
        if not self.done.wait(timeout):
            raise subprocess.TimeoutExpired("worker", timeout)
        return self.code


class ForkedWorker:
    def __init__(self, server, spawn_id, copy_dir, limits, slot=None):
        self.server, self.id, self.copy_dir, self.slot = server, spawn_id, copy_dir, slot
        self.zygote = server.control  # the zygote it is asked of: its end is this worker's end
        self.pid = None  # as the zygote numbers it (ForkServer.spawn)
        self.proc = _Exit()
        self.channel, worker_end = socket.socketpair()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        self.stdout = sandbox.CappedReader(os.fdopen(out_read, "rb"), limits.output_bytes)
        self.stderr = sandbox.CappedReader(os.fdopen(err_read, "rb"), limits.output_bytes)
        self.stdout.start()
        self.stderr.start()
        self.fds = [worker_end.detach(), out_write, err_write]

    def kill(self, grace=0.2):
        """End the child: closing the channel lets a waiting worker exit by itself; the zygote
        kills its process group after `grace`.  Returns once its output is complete; its exit
        status and cleanup follow (ForkServer._read): the judge never waits for namespaces."""
        self.channel.close()
        self.server.send({"op": "end", "id": self.id, "grace": grace})
        for reader in (self.stdout, self.stderr):
            reader.join(grace + 5)

    def exited(self, code):
        """Its exit status, as the zygote reported it (or -9: the zygote is gone)."""
        self.proc.code = code
        self.proc.done.set()
        self.cleanup()

    def cleanup(self):
        """Never raises (it runs on the reader thread, which every later worker needs)."""
        if self.copy_dir:
            safefs.remove_tree(self.copy_dir)
        if self.slot is not None:  # its PID namespace is gone: so is every process of its uid
            self.slot.release()

    def exit_description(self, lang="en"):
        return sandbox.describe_exit(self.proc.poll(), lang)

    def memory(self):
        """As WorkerProcess.memory (a zygote in namespaces numbers its children one level down)."""
        if self.pid is None or self.proc.poll() is not None:
            return None
        pid = self.pid if self.server.mode == "plain" else \
            sandbox.pid_below(self.server.proc.pid, self.pid)
        return sandbox.tree_memory(pid) if pid is not None else None


class ForkServer:
    """A judge's zygote, reached through a control socket (one that dies is replaced at the next
    spawn)."""

    def __init__(self, isolation):
        self.isolation, self.mode = isolation, supported(isolation)
        if self.mode is None:
            raise RuntimeError(f"no fork server for isolation {isolation} as this user")
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.workers = {}          # spawn id -> ForkedWorker
        self.replies = {}          # spawn id -> the zygote's answer to spawn
        self.answered = threading.Condition(self.lock)
        self.child_cpu_seconds, self.children_exited = 0.0, 0
        self._start()

    def _start(self):
        """Start a zygote (with its runtime folder and spool) and the thread reading it."""
        self.runtime_dir = sandbox.make_runtime_dir()
        self.spool = tempfile.mkdtemp(prefix="attn-spool-") if self.mode == "namespaces" else None
        if self.spool:
            os.chmod(self.spool, 0o755)
        self.control, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        python = os.path.abspath(sys.executable)
        if self.mode == "namespaces":
            prefix = sandbox.bubblewrap_argv(None, self.runtime_dir, spool=self.spool)
            zygote_py = f"{sandbox.SANDBOX_RUNTIME}/zygote.py"
        else:
            prefix, zygote_py = [], os.path.join(self.runtime_dir, "zygote.py")
        with zygote_end:
            self.proc = subprocess.Popen(
                prefix + [python, "-I", "-u", zygote_py, str(zygote_end.fileno()), self.mode],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=[zygote_end.fileno()], env=sandbox.minimal_env("/tmp"),
                start_new_session=True, close_fds=True)
        self.log = sandbox.CappedReader(self.proc.stderr, 16 * 1024)  # for "cannot serve: why"
        self.log.start()
        self.ready, self.gone = threading.Event(), threading.Event()
        self.ready_error = "the fork server ended before it was ready"
        self.reader = threading.Thread(target=self._read,
                                       args=(self.control, self.ready, self.gone), daemon=True)
        self.reader.start()

    def _read(self, control, ready, gone):
        while True:
            try:
                data = control.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            try:
                message = json.loads(data)
            except ValueError:
                continue
            with self.lock:
                if "ready" in message:
                    self.ready_error = None if message["ready"] is True else \
                        str(message.get("error") or "the fork server is not ready")
                    ready.set()
                elif "exited" in message:
                    worker = self.workers.pop(message["exited"], None)
                    self.child_cpu_seconds += message.get("cpu_seconds", 0)
                    self.children_exited += 1
                    if worker is not None:
                        worker.exited(message["code"])
                else:
                    self.replies[message.get("spawned", message.get("failed"))] = message
                    self.answered.notify_all()
        with self.lock:  # the zygote is gone: so is every child it had, and only those (a
            gone.set()   # zygote started in its place may have children already)
            for spawn_id, worker in list(self.workers.items()):  # an exited one is not listed
                if worker.zygote is control:
                    worker.exited(-9)
                    del self.workers[spawn_id]
            self.answered.notify_all()
        ready.set()

    def send(self, message, fds=()):
        control = self.control
        if control is None:
            return  # closed: the zygote has killed this judge's children
        with contextlib.suppress(OSError):  # a dead zygote's children are marked exited already
            socket.send_fds(control, [json.dumps(message).encode()], list(fds))

    def wait_ready(self):
        """Block until the zygote is ready; RuntimeError with the reason when it cannot serve."""
        if not self.ready.wait(READY_SECONDS):
            raise RuntimeError(f"the fork server did not start within {READY_SECONDS:g} s")
        if self.ready_error is not None or not self.alive():
            said = self.log.text()
            raise RuntimeError("the fork server cannot serve: " + (self.ready_error or "it ended")
                               + (" | " + said[-300:] if said else ""))

    def alive(self):
        return self.control is not None and not self.gone.is_set() and self.proc.poll() is None

    def spawn(self, folder, student_name, limits, source=None):
        """A fresh worker for one submission.  `folder`: the folder of the student's file, or a
        function that makes it; `source`: None, or a function giving the file's text, which a
        child in its namespaces gets a copy of (no folder made)."""
        if not callable(folder):  # a path: the folder is there already
            path, folder = folder, (lambda: path)
        if not self.alive():
            self.close()
            self._start()
        try:
            self.wait_ready()
        except RuntimeError as exc:
            raise WorkerFailure("sandbox", str(exc), f"评分器的沙箱没有启动：{exc}") from None
        spawn_id = next(self.ids)
        copy_dir, slot, work_dir = None, None, None
        if self.mode == "namespaces":  # the zygote sees the spool only: copy the file in
            copy_dir = self._copy_in(spawn_id, folder, student_name, source)
            slot = uidpool.claim()
        else:  # a plain child reads the folder itself
            work_dir = folder()
        worker = ForkedWorker(self, spawn_id, copy_dir, limits, slot)
        with self.lock:
            self.workers[spawn_id] = worker
        self.send({"op": "spawn", "id": spawn_id, "dir": copy_dir or work_dir,
                   "student": student_name, "uid": slot.uid if slot else UNPRIVILEGED,
                   "limits": limits.describe()}, worker.fds)
        for fd in worker.fds:
            os.close(fd)
        with self.lock:
            self.answered.wait_for(lambda: spawn_id in self.replies or not self.alive(), 30)
            reply = self.replies.pop(spawn_id, {})
        if "spawned" not in reply:
            worker.kill()
            with self.lock:
                if self.workers.pop(spawn_id, None) is not None:
                    worker.cleanup()
            why = str(reply.get("error", "no answer"))
            raise WorkerFailure("sandbox", "the fork server could not fork: " + why,
                                "评分器的进程服务没能启动新进程：" + why)
        worker.pid = reply.get("pid") if isinstance(reply.get("pid"), int) else None
        return worker

    def _copy_in(self, spawn_id, folder, student_name, source=None):
        """The student's file (`source()`, else read from `folder()`) in a read-only spool folder."""
        copy_dir = os.path.join(self.spool, str(spawn_id))
        os.mkdir(copy_dir, 0o755)
        try:
            if source is not None:
                data = source().encode("utf-8", "surrogatepass")
                if len(data) > safefs.MAX_SOURCE_BYTES:
                    raise safefs.TooLarge(f"larger than {safefs.MAX_SOURCE_BYTES} bytes")
            else:
                data = safefs.read_regular(os.path.join(folder(), student_name),
                                           safefs.MAX_SOURCE_BYTES)
        except OSError as exc:
            safefs.remove_tree(copy_dir)
            raise WorkerFailure("crashed", f"the file cannot be read: {exc}",
                                f"读不了这个文件：{exc}") from None
        path = os.path.join(copy_dir, os.path.basename(student_name))
        with open(path, "wb") as handle:
            handle.write(data)
        os.chmod(path, 0o444)
        os.chmod(copy_dir, 0o555)
        return copy_dir

    def close(self):
        if self.control is None:
            return
        # shutdown, not just close: it wakes our reader's recv and gives the zygote EOF
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_RDWR)
        self.control.close()  # the zygote kills its children and exits
        self.control = None
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        safefs.remove_tree(self.runtime_dir)
        if self.spool:
            safefs.remove_tree(self.spool)
