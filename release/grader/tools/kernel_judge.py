"""One judge process per notebook kernel (service.Judge, as in `make watch`): started on first use,
kept for the kernel's life, restarted if it dies.  A process of its own, so the student's kernel
(whose torch a cell may have monkeypatched) never decides a verdict.

Protocol: one JSON request per line on its stdin ({"path", "hidden", "call_seconds",
"budget_seconds", "exercise"}: a non-null `exercise` runs that exercise's checks only), one JSON
reply per line on a private copy of its stdout (the report data, or {"error"}); its stderr is a
log file the kernel keeps.  It exits when its stdin closes, that is when the kernel goes away.
"""
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

KIT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Workers kept ready (each ~150 MB): "Run all" sends the five %check cells back to back, faster
# than one spare can import torch.
SPARES = 3
# "spare" makes the judge use spares even where it could fork (tests of that path).
WORKER_START_ENV = "ATTN_KIT_WORKER_START"
# How long a judge whose stdin was closed may take to end on its own, removing its folders in /tmp
# (killed at once, it would leave them there for every kernel).
STOP_SECONDS = 5


class JudgeDied(Exception):
    """The judge process ended or answered nonsense (it is restarted for the next request)."""


class KernelJudge:
    """The kernel's handle on its judge process; `starts` counts how often one was started."""

    def __init__(self, env=None):
        self.env, self.process, self.log = env, None, None
        self.starts, self.served = 0, 0  # judge processes started, gradings answered

    def start(self):
        """Start the judge if it is not running (returns at once: it warms up on its own)."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.stop()
        self.log = tempfile.TemporaryFile(prefix="attn-judge-", suffix=".log")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader.tools.kernel_judge"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, cwd=KIT_ROOT, env=self.env,
            start_new_session=True)
        self.starts += 1
        return self

    def grade(self, path, hidden, call_seconds=None, budget_seconds=None, timeout=None,
              exercise=None):
        """The report data for `path`, or {"error": why}; a judge that died is restarted once;
        TimeoutError where no reply came within `timeout` seconds."""
        request = {"path": os.path.abspath(path), "hidden": bool(hidden),
                   "call_seconds": call_seconds, "budget_seconds": budget_seconds,
                   "exercise": exercise}
        for _ in range(2):
            self.start()
            try:
                data = self._ask(request, timeout)
                self.served += 1
                return data
            except JudgeDied as died:
                self.stop()
                failed = f"the judge process failed: {died}"
            except BaseException:  # the kernel was interrupted (or a timeout): the judge is
                self.stop(wait=0)  # busy with this grading; the next cell gets a new one
                raise
        return {"error": failed}

    def _ask(self, request, timeout):
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError:
            raise JudgeDied(self._last_words()) from None
        line = self._read_line(timeout)
        try:
            data = json.loads(line.decode("utf-8"))
            if not (isinstance(data, dict) and "error" in data):
                from grader.render.model import Report

                Report.from_data(data)  # a reply that is no report is the judge's failure
            return data
        except ValueError as exc:
            raise JudgeDied(f"a malformed reply ({line[:80]!r}: {exc})") from None

    def _read_line(self, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        stream = self.process.stdout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            ready, _, _ = select.select([stream], [], [], left)
            if not ready:
                raise TimeoutError(f"no reply from the judge within {timeout:g} s")
            line = stream.readline()
            if not line:
                raise JudgeDied(self._last_words())
            if line.endswith(b"\n"):
                return line

    def _last_words(self):
        self.process.wait(timeout=10) if self.process.poll() is None else None
        tail = b""
        if self.log is not None:
            self.log.seek(0)
            tail = self.log.read()[-2000:]
        last = tail.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return f"exit {self.process.returncode}: {last[0][:300]}"

    def stop(self, wait=STOP_SECONDS):
        """End the judge: its stdin closed, it may clean up its folders in /tmp for `wait` seconds,
        then its process group is killed (wait=0: at once, for a judge busy with an interrupted
        grading)."""
        if self.process is not None:
            with contextlib.suppress(OSError):  # a judge gone already: the pipe is moot
                self.process.stdin.close()
            if wait:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=wait)
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process.stdout.close()
            self.process = None
        if self.log is not None:
            self.log.close()
            self.log = None


# -- the judge's side ----------------------------------------------------------------------------
def grade_one(judge, request):
    """One request's report data; never raises for what the submission does."""
    from grader import options, rubric
    from grader.judge import submission

    limits = options.limits_from(call_timeout=request.get("call_seconds"),
                                 submission_timeout=request.get("budget_seconds"))
    visibilities = ("public", "hidden") if request.get("hidden") else ("public",)
    exercise = request.get("exercise")
    if exercise is not None and exercise not in rubric.load().exercises():
        return {"error": f"no such exercise: {str(exercise)[:80]}"}
    try:
        sub = submission.load(request["path"])
    except submission.SubmissionError as exc:
        return {"error": str(exc)}
    return judge.finish(sub, judge.student(sub, limits), visibilities,
                        exercises=None if exercise is None else [exercise])


def serve():
    """Answer requests until stdin closes."""
    from grader.judge import serving
    from grader.sandbox import launch as sandbox

    replies = serving.reply_channel()
    from grader.judge.service import Judge

    judge = Judge(sandbox.Limits(), "auto", start=os.environ.get(WORKER_START_ENV, "auto"),
                  spares=SPARES)
    judge.workers.fill()  # its torch import overlaps with ours
    # Our own imports (torch, pytest) and the public checks collected now, while the kernel runs
    # the notebook's next cells, not when the first %check arrives.
    judge.session(("public",))
    try:
        for line in sys.stdin:
            try:
                data = grade_one(judge, json.loads(line))
            except Exception as exc:  # a bug of ours: this request fails, the judge stays
                data = {"error": f"internal error {type(exc).__name__}: {str(exc)[:300]}"}
            if not serving.reply(replies, data, ensure_ascii=False, default=str):
                break  # the kernel is gone
    finally:
        judge.close()
    return 0


if __name__ == "__main__":
    from grader import process

    process.run_judge(serve)
