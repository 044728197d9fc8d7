"""A batch's first judges from one start: the first judge forks the others once it has imported.

A judge's start is mostly imports (torch, pytest, the kit's check machinery: about 1 s of CPU),
paid by every judge while the shared zygote imports torch too, at a start where every core is
busy.  Now the batch's first judge is started with the pipes of the judges meant to run beside it
(and their sockets to the shared zygote).  Once its imports are done, and before it has a thread,
a worker or a task, it forks one copy per sibling; each copy takes its own pipes and socket and
goes on as a judge of its own (its own pytest session, its own workers).  Judges are the kit's own
code: a copy of one that has seen no submission holds nothing another judge may not hold.

Where it may not fork (not Linux, or a thread is already running), the first judge starts each
sibling as a process of its own on the same pipes, which imports as every judge used to.

The parent sees a sibling through its pipes only (it is the first judge's child, not the
parent's): SiblingProcess stands in for its subprocess.Popen in dispatch.py.
"""
import json
import os
import signal
import subprocess
import sys
import threading

# What a judge process runs (dispatch.py starts it so; a sibling that cannot be forked too).
JUDGE_CODE = ("import sys; from grader.batch.judge import judge_main; "
              "from grader.fastexit import exit_now; exit_now(judge_main(sys.argv[1:]))")


# "start" makes the first judge start its siblings as processes of their own (tests of that path).
START_ENV = "ATTN_KIT_SIBLINGS"


# -- the parent's side ---------------------------------------------------------------------------
def supported():
    return sys.platform == "linux"


class SiblingProcess:
    """A judge the first judge forked (or started): not the parent's child, so it has ended
    once its answers' pipe is closed; its pid is its first line (`takes`), for kill()."""

    def __init__(self):
        self.pid, self.ended = None, threading.Event()

    def takes(self, message):
        """True for the sibling's own first line ({"pid": n}), which is not an answer."""
        if isinstance(message, dict) and set(message) == {"pid"} and self.pid is None:
            self.pid = message["pid"] if isinstance(message["pid"], int) else None
            return True
        return False

    def poll(self):
        return 0 if self.ended.is_set() else None

    def wait(self, timeout=None):
        if not self.ended.wait(timeout):
            raise subprocess.TimeoutExpired("judge", timeout)
        return 0

    def kill(self):
        if self.pid is not None and not self.ended.is_set():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass


class SiblingPipes:
    """One sibling's pipes: the ends its judge is handed (`config`, the fds in `judge_ends`) and
    the parent's (`tasks` to write, `answers` to read)."""

    def __init__(self, zygote_attach=None, core=None):
        task_read, task_write = os.pipe()
        answer_read, answer_write = os.pipe()
        self.judge_ends = [task_read, answer_write]
        self.config = {"stdin": task_read, "stdout": answer_write, "zygote": zygote_attach,
                       "core": core}
        self.tasks = os.fdopen(task_write, "w", encoding="utf-8")
        self.answers = os.fdopen(answer_read, "r", encoding="utf-8")

    def close_judge_ends(self):
        for fd in self.judge_ends:
            os.close(fd)
        self.judge_ends = []

    def close_parent_ends(self):
        self.tasks.close()
        self.answers.close()


# -- the first judge's side ----------------------------------------------------------------------
def preload():
    """What a judge imports before its first submission (the heavy part of its start)."""
    from grader import collector

    collector.importing()  # its imports without what quickimport.py skips (collector.py)
    import torch  # noqa: F401
    import pytest  # noqa: F401

    from grader.judge import grading, runner, service  # noqa: F401
    from grader.render import report  # noqa: F401
    from grader.sandbox import forkserver  # noqa: F401
    from grader.batch import records  # noqa: F401


def _one_thread():
    try:
        return len(os.listdir("/proc/self/task")) == 1 and threading.active_count() == 1
    except OSError:
        return False


def start_siblings(config):
    """Called first thing by a judge: where its config names siblings, import, then fork (or
    start) each one.  Returns (this process's config, a function that waits for the siblings):
    in a forked sibling, its own config (its pipes now its stdin and stdout) and nothing to wait
    for."""
    siblings = config.pop("siblings", None) or []
    if not siblings:
        return config, lambda: None
    fds = [fd for s in siblings for fd in _fds(s)]
    if supported() and _one_thread() and os.environ.get(START_ENV) != "start":
        preload()
        if _one_thread():  # nothing imported started a thread: a fork copies all there is
            return _fork(config, siblings, fds)
    return config, _start(config, siblings, fds)


def _own_config(config, sibling, how):
    """A sibling's config: the first judge's, with the sibling's own zygote socket and core."""
    return dict(config, zygote=sibling.get("zygote"), core=sibling.get("core"), sibling=how)


def _fds(sibling):
    return [sibling["stdin"], sibling["stdout"]] + (
        [sibling["zygote"]["fd"]] if sibling.get("zygote") else [])


def _fork(config, siblings, fds):
    pids = []
    for sibling in siblings:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the sibling: its pipes become its stdin and stdout, nothing else kept
            os.dup2(sibling["stdin"], 0)
            os.dup2(sibling["stdout"], 1)
            own = sibling["zygote"]["fd"] if sibling.get("zygote") else None
            for fd in fds:
                if fd != own:
                    os.close(fd)
            return _own_config(config, sibling, "forked"), lambda: None
        pids.append(pid)
    for fd in fds:  # the siblings hold them now: their ends are the parent's EOF for them
        os.close(fd)

    def wait():
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return config, wait


def _start(config, siblings, fds):
    procs = []
    for sibling in siblings:
        own = _own_config(config, sibling, "started")
        procs.append(subprocess.Popen(
            [sys.executable, "-c", JUDGE_CODE, json.dumps(own)], stdin=sibling["stdin"],
            stdout=sibling["stdout"], pass_fds=[sibling["zygote"]["fd"]] if own["zygote"] else (),
            cwd=os.getcwd()))
    for fd in fds:
        os.close(fd)
    return lambda: [proc.wait() for proc in procs]
