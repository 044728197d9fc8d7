"""Workers started ahead of time, and a judge that stays warm: what `watch` and the notebook share.

A spare worker has imported torch already and imports the student's file only when told to go
(worker.py --wait-go), so a rerun costs the student's import and the checks, not a torch import.

Why the spares are made on a thread of their own: bubblewrap runs with --die-with-parent, which is
PR_SET_PDEATHSIG, and Linux sends that signal when the *thread* that forked the process ends, not
the process.  Spares made on a check session's pytest thread (the pool refilled while a run was
taking one) died with that thread at the end of the run, and every later save started cold.  The
pool's maker thread lives as long as the pool, so its spares do too.

Where the batch's fork server works (Linux; bubblewrap as root, or plain processes), a grading's
worker is instead forked from a zygote that imported torch once (forkserver.py): a few
milliseconds however fast the saves or %check cells come, where a spare needs a whole torch
import to be replaced.  Elsewhere (bubblewrap as an ordinary user, macOS) the spares serve.

Parts: Spare (one worker waiting for go), SparePool (a few of them and the maker thread),
WarmStudent (a Student whose workers are forked or come from the pool), WarmJudge (the fork
server or the pool, and one check session per set of visibilities, kept for many gradings).
"""
import collections
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

from grader.sandbox import launch as sandbox
from grader.judge.student import Student, WorkerFailure
from grader.judge.submission import STUDENT_FILE


class Spare(sandbox.WorkerProcess):
    """A worker started before its student's file exists: torch imported, waiting for go."""

    def __init__(self, limits, isolation):
        self.work_dir = tempfile.mkdtemp(prefix="attn-spare-")
        self.started_at = time.monotonic()
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
        try:
            super().go()
        except OSError:
            pass  # it died waiting: the Student sees a crash at start-up and says so

    def interrupt(self):
        """Kill it from another thread; the thread using it sees EOF and cleans up (kill())."""
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self):
        super().kill()
        shutil.rmtree(self.work_dir, ignore_errors=True)


class SparePool:
    """A few Spares kept ready: one for the next grading, one for a restart after a timeout.

    `taken` records, for every worker handed out, whether it was a spare of the pool (warm) or had
    to be started cold: the watcher's and the notebook's tests assert on it, never on a time.
    """

    def __init__(self, limits, isolation, size=2):
        self.limits, self.isolation, self.size = limits, isolation, size
        self.spares, self.lock = collections.deque(), threading.Lock()
        # Replace a spare as soon as it is taken, so it is warm by the next grading; off until the
        # first grading is over, which already has the judge and two spares importing torch.
        self.eager = False
        self.taken = []  # [{"pid", "warm", "age"}], one per worker handed out
        self.wanted, self.closed = threading.Event(), threading.Event()
        self.maker = threading.Thread(target=self._make_loop, name="spare-maker", daemon=True)
        self.maker.start()

    def fill(self):
        """Ask the maker thread to top the pool up (returns at once)."""
        self.wanted.set()

    def _make_loop(self):
        while not self.closed.is_set():
            self.wanted.wait()
            self.wanted.clear()
            while self._short():
                spare = self._new_spare()
                if spare is None:
                    break
                with self.lock:
                    keep = not self.closed.is_set()
                    if keep:
                        self.spares.append(spare)
                if not keep:
                    spare.kill()

    def _short(self):
        with self.lock:
            return not self.closed.is_set() and len(self.spares) < self.size

    def _new_spare(self):
        try:
            return Spare(self.limits, self.isolation)
        except OSError:
            time.sleep(0.5)  # e.g. out of processes for a moment: the next fill tries again
            return None

    def take(self, source):
        """A spare that is still alive (else a cold one), told to import `source`."""
        while True:
            with self.lock:
                spare = self.spares.popleft() if self.spares else None
            warm = spare is not None
            if spare is None:
                spare = Spare(self.limits, self.isolation)  # used and killed within this run
            if spare.proc.poll() is None:
                self.taken.append({"pid": spare.proc.pid, "warm": warm,
                                   "age": round(time.monotonic() - spare.started_at, 3)})
                spare.go(source)
                if self.eager:
                    self.fill()
                return spare
            spare.kill()

    def close(self):
        self.closed.set()
        self.wanted.set()
        with self.lock:
            spares, self.spares = list(self.spares), collections.deque()
        for spare in spares:
            spare.kill()
        self.maker.join(timeout=30)  # a spare it was starting is killed by the thread itself


class WarmStudent(Student):
    """A Student whose workers are forked from the judge's zygote or come from its pool of spares;
    cancel() (from any thread) ends its run early."""

    def __init__(self, sub, pool, limits, startup_seconds, forks=None):
        super().__init__(sub.work_dir, limits=limits, isolation=pool.isolation,
                         startup_seconds=startup_seconds)
        self.pool, self.forks, self.source_text = pool, forks, sub.source
        # RLock: the SIGINT handler runs on the main thread, possibly inside start().
        self.cancelled, self.adopted, self.lock = False, [], threading.RLock()

    def start(self):
        with self.lock:
            return super().start()

    def _spawn(self):
        """The worker is taken from the pool (torch already imported) instead of started cold."""
        if self.cancelled:
            raise WorkerFailure("budget", "a newer save replaced this run",
                                "新的保存取代了这次检查")
        if self.forks is not None:
            worker = self.forks.spawn(self.work_dir, self.student_name, self.limits)
            self.pool.taken.append({"pid": worker.id, "warm": True, "start": "fork"})
        else:
            worker = self.pool.take(self.source_text)
        self.adopted.append(worker)
        if self.cancelled:  # cancelled by a signal handler while we were taking it
            interrupt(worker)
        return worker

    def cancel(self):
        with self.lock:
            self.cancelled = True
            for worker in self.adopted:
                interrupt(worker)


def interrupt(worker):
    """Kill a worker from another thread; the thread using it sees EOF and cleans up."""
    if isinstance(worker, Spare):
        worker.interrupt()
    else:  # a forked worker: its zygote kills it
        worker.server.send({"op": "end", "id": worker.id, "grace": 0})


def fork_server(isolation, start):
    """The batch's fork server when `start` allows it and it works here, else None (spares)."""
    from grader.sandbox import forkserver

    if start == "spare" or sys.platform != "linux" or forkserver.supported(isolation) is None:
        return None
    return forkserver.ForkServer(isolation)


def startup_seconds(limits):
    """The hello of a spare may include the rest of its torch import, not just the student's: on
    a busy machine that alone can take many seconds, and a false "timeout while importing" would
    blame the student for our start-up.  An endless loop at import is rare and still ends here."""
    return max(30.0, 3 * limits.call_seconds)


class WarmJudge:
    """A fork server (or a pool of spares) and one pytest check session per set of visibilities,
    kept for many gradings: configuring pytest and collecting the checks is paid once, like
    torch's import.  `start`: "auto" (fork where it works), "spare" (never fork)."""

    def __init__(self, limits, isolation, size=2, start="auto"):
        self.forks = fork_server(isolation, start)
        self.pool = SparePool(limits, isolation, 0 if self.forks else size)
        self.sessions = {}

    def student(self, sub, limits):
        """A WarmStudent for `sub` on this judge's workers."""
        return WarmStudent(sub, self.pool, limits, startup_seconds(limits), self.forks)

    def session(self, visibilities):
        from grader.judge import runner

        key = tuple(sorted(visibilities))
        if key not in self.sessions:  # e.g. a course notebook's %check (public) and its
            self.sessions[key] = runner.CheckSession(visibilities)  # autograder cells (all)
        return self.sessions[key]

    def grade(self, sub, student, visibilities):
        """The report data of `sub`, graded by `student` (a WarmStudent on this pool)."""
        from grader.judge import grading

        try:
            return grading.finish(sub, student, visibilities, session=self.session(visibilities))
        finally:
            self.pool.eager = True
            self.pool.fill()  # replace the spares used, while the student is typing

    def close(self):
        for session in self.sessions.values():
            session.close()
        self.sessions = {}
        self.pool.close()
        if self.forks is not None:
            self.forks.close()
