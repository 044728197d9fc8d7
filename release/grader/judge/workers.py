"""Where a grading's workers come from, one interface (`WorkerSource.spawn`) for all three:
"exec" (a new sandboxed process that imports torch itself: one submission per judge), "fork"
(from a zygote that imported torch once: sandbox/forkserver.py) and "spare" (started ahead,
waiting for go: where no fork server works and a judge keeps spares).  Every worker is its own
fresh sandboxed process; the source only decides how much of torch's import it has done before
the student's file is handed over.

The spares are made on a thread of their own that lives as long as the pool: bubblewrap's
--die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that forked the process ends, so a
spare made on a run's thread would die with it.
"""
import collections
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

from grader.sandbox import launch as sandbox
from grader.sandbox.runtime import wire
from grader.judge.submission import STUDENT_FILE

STARTS = ("auto", "fork", "spare", "exec")


class Spare(sandbox.WorkerProcess):
    """A worker started before its student's file exists: torch imported, waiting for go."""

    def __init__(self, limits, isolation):
        self.work_dir = tempfile.mkdtemp(prefix="attn-spare-")
        os.chmod(self.work_dir, 0o777)  # the sandboxed worker runs as another uid
        try:
            super().__init__(self.work_dir, STUDENT_FILE, limits, isolation, wait_go=True)
        except BaseException:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            raise

    def go(self, source):
        path = os.path.join(self.work_dir, STUDENT_FILE)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        os.chmod(path, 0o644)
        # it died waiting: the Student sees a crash at start-up and says so
        with contextlib.suppress(OSError):
            self.channel.sendall(wire.encode({"op": "go"}))  # it imports the file now

    def kill(self):
        super().kill()
        shutil.rmtree(self.work_dir, ignore_errors=True)


class SparePool:
    """A few Spares kept ready: one for the next grading, one for a restart after a timeout."""

    def __init__(self, limits, isolation, size=2):
        self.limits, self.isolation, self.size = limits, isolation, size
        self.spares, self.lock = collections.deque(), threading.Lock()
        # take() waits for a spare being started instead of starting a second one beside it
        self.made, self.making = threading.Condition(self.lock), False
        self.eager = False  # replace a taken spare at once: from the end of the first grading
        self.wanted, self.closed = threading.Event(), threading.Event()
        self.maker = threading.Thread(target=self._make_loop, name="spare-maker", daemon=True)
        self.maker.start()

    def fill(self):
        """Ask the maker thread to top the pool up (a take() from now on waits for its spare)."""
        self._short()
        self.wanted.set()

    def _make_loop(self):
        while not self.closed.is_set():
            self.wanted.wait()
            self.wanted.clear()
            while self._short():
                spare = None
                try:
                    spare = Spare(self.limits, self.isolation)
                except OSError:
                    time.sleep(0.5)  # e.g. out of processes for a moment: the next fill tries again
                finally:
                    with self.made:
                        self.making = False
                        keep = spare is not None and not self.closed.is_set()
                        if keep:
                            self.spares.append(spare)
                        self.made.notify_all()
                if spare is None:
                    break
                if not keep:
                    spare.kill()

    def _short(self):
        """Whether the pool wants one more spare; if so, the maker thread starts it now."""
        with self.made:
            self.making = not self.closed.is_set() and len(self.spares) < self.size
            if not self.making:
                self.made.notify_all()
            return self.making

    def take(self, source):
        """(a spare that is still alive, else a cold one, told to import `source`; was it warm)."""
        while True:
            with self.made:
                # (not for a maker thread that is gone: one a start raised in, say, no uid free)
                while not self.spares and self.making and not self.closed.is_set() \
                        and self.maker.is_alive():
                    self.made.wait(0.5)
                spare = self.spares.popleft() if self.spares else None
            warm = spare is not None
            if spare is None:
                spare = Spare(self.limits, self.isolation)  # used and killed within this run
            if spare.proc.poll() is None:
                spare.go(source)
                if self.eager:
                    self.fill()
                return spare, warm
            spare.kill()

    def close(self):
        self.closed.set()
        self.wanted.set()
        with self.made:  # a take() waiting for a start the maker thread will now never make
            spares, self.spares = list(self.spares), collections.deque()
            self.making = False
            self.made.notify_all()
        for spare in spares:
            spare.kill()
        self.maker.join(timeout=30)  # a spare it was starting is killed by the thread itself


TAKEN_KEPT = 256  # workers remembered in WorkerSource.taken


class WorkerSource:
    """The workers of one judge.  `start`: "auto" or "fork" (fork where it works, else spares
    where `spares` > 0, else exec), "spare" (never fork), "exec" (every worker cold).  `server`:
    a fork server already started.  `refill`: replace the spares taken once a grading is over."""

    def __init__(self, isolation, limits=None, start="auto", spares=0, server=None, refill=True):
        if start not in STARTS:
            raise ValueError(f"worker start {start!r}: one of {', '.join(STARTS)}")
        self.isolation = sandbox.choose_isolation(isolation)
        self.limits = limits or sandbox.Limits()
        self.server = server
        if server is None and start in ("auto", "fork") and sys.platform == "linux":
            from grader.sandbox import forkserver

            if forkserver.supported(self.isolation) is not None:  # it can isolate its children
                self.server = forkserver.ForkServer(self.isolation)
        self.spares = spares if start in ("auto", "spare") else 0
        self.refill = refill
        self.pool = None if self.server else self._pool()
        self.taken = []  # the latest workers handed out: how each started, warm or not (--stats)

    def _pool(self):
        return SparePool(self.limits, self.isolation, self.spares) if self.spares else None

    @property
    def kind(self):
        return "fork" if self.server else "spare" if self.pool else "exec"

    def ready(self):
        """Wait for the fork server's zygote to import torch.  Where it cannot isolate its children
        (no namespaces here) every worker starts otherwise, correct but slower, and it says so."""
        if self.server is None:
            return self
        try:
            self.server.wait_ready()
        except RuntimeError as exc:
            print(f"warning: {exc}; every submission gets a {'spare' if self.spares else 'cold'} "
                  "worker instead", file=sys.stderr)
            self.server.close()
            self.server, self.pool = None, self._pool()
            self.fill()
        return self

    def fill(self):
        """Top the spares up in the background (nothing to do for the other kinds)."""
        if self.pool is not None:
            self.pool.fill()

    def after_grading(self):
        """A grading is over: from now on, replace a spare as soon as it is taken."""
        if self.pool is not None and self.refill:
            self.pool.eager = True
            self.pool.fill()

    def spawn(self, folder, limits, source):
        """A new worker for the submission whose file is in `folder()` (made on first need) and
        whose text is `source()`: a spare is handed the text, a fork a copy, a cold one reads the file."""
        if self.server is not None:
            worker = self.server.spawn(folder, STUDENT_FILE, limits, source)
            self.taken.append({"pid": worker.id, "warm": True, "start": "fork"})
        elif self.pool is not None:
            worker, warm = self.pool.take(source())
            self.taken.append({"pid": worker.proc.pid, "warm": warm, "start": "spare"})
        else:
            worker = sandbox.WorkerProcess(folder(), STUDENT_FILE, limits, self.isolation)
            self.taken.append({"pid": worker.proc.pid, "warm": False, "start": "exec"})
        del self.taken[:-TAKEN_KEPT]  # a batch judge hands out hundreds: the latest are enough
        return worker

    def startup_seconds(self, limits):
        """How long a worker's hello may take: it may include some or all of torch's import, which
        the student must not be blamed for."""
        return max(30.0, 3 * limits.call_seconds) if self.pool is not None else 60.0

    def close(self):
        if self.pool is not None:
            self.pool.close()
        if self.server is not None:
            self.server.close()


def interrupt(worker):
    """Kill a worker from another thread; the thread using it sees EOF and cleans up."""
    if hasattr(worker, "server"):  # a forked worker: its zygote kills it
        worker.server.send({"op": "end", "id": worker.id, "grace": 0})
    elif worker.proc.returncode is None:  # not reaped: its pid is still its own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.proc.pid, signal.SIGKILL)


def forked(server):
    """The workers of a fork server started elsewhere (a test's own zygote)."""
    return WorkerSource(server.isolation, server=server)
