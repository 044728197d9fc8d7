"""The parent's side of a batch: judge processes fed over pipes, and the progress line.

Each of --jobs judges (judge.py) gets one JSON line per task on its stdin and answers one per
result on its stdout; its stderr goes to the batch's log.  Each judge holds one task at a time.
A judge that dies has its task retried once on a new one.
"""
import collections
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time

from grader import paths, process, words
from grader.inert import one_line
from grader.render.report import class_points
from grader.sandbox.runtime.limits import accelerator_nodes

ROOT = paths.KIT_ROOT
JUDGE_CODE = ("import sys; from grader.batch.judge import judge_main; "
              "from grader.process import exit_now; exit_now(judge_main(sys.argv[1:]))")


class Progress:
    """count, rate and time left on stderr: a redrawn bar on a terminal, plain lines otherwise."""

    def __init__(self, total, lang):
        self.stream, self.lang = sys.stderr, lang
        self.tty = self.stream.isatty()
        self.total, self.done, self.began = total, 0, time.monotonic()
        self.last_bar = 0.0

    def _status(self):
        elapsed = time.monotonic() - self.began
        rate = self.done / elapsed * 60 if elapsed > 0 and self.done else 0.0
        left = (self.total - self.done) / (rate / 60) if rate else None
        eta = "--:--" if left is None else f"{int(left // 60)}:{int(left % 60):02d}"
        return words.text("batch", "progress", self.lang, done=self.done, total=self.total,
                          rate=f"{rate:.1f}", eta=eta)

    def _bar(self):
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        return f"\r[{'#' * filled}{'.' * (width - filled)}] {self._status()}\033[K"

    def advance(self, answer):
        """One line per submission: its outcome, and the count, rate and time left."""
        self.done += 1
        said = answer.get("error_said")  # the judge's reason in both languages, where it has one
        why = said[self.lang] if isinstance(said, dict) else answer.get("error")
        who, why = one_line(answer["student"]), one_line(why)  # the student's words: inert
        if answer["status"] == "graded":
            text = f"{who}  {class_points(answer['score'])}/{class_points(answer['max_score'])}"
        else:
            key = "ungradable" if answer["status"] == "ungradable" else "grader_error"
            text = words.text("batch", key, self.lang, who=who, why=why)
        if self.tty:  # the bar is redrawn; only what needs attention stays on the screen
            if answer["status"] != "graded":
                self.stream.write("\r\033[K" + text + "\n")
            self.stream.write(self._bar())
        else:
            self.stream.write(f"[{self.done}/{self.total}] {text} | {self._status()}\n")
        self.stream.flush()

    def tick(self):
        if self.tty and time.monotonic() - self.last_bar > 1:
            self.last_bar = time.monotonic()
            self.stream.write(self._bar())
            self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class _Judge:
    """A judge as the parent sees it: its process, its tasks' pipe and its answers' reader."""

    def __init__(self, config, events, log):
        env = process.pin_environment(dict(os.environ))  # one compute thread (process.py)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", JUDGE_CODE, json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=ROOT, env=env,
            text=True, encoding="utf-8")
        self.tasks = self.proc.stdin
        self.task, self.open = None, True
        threading.Thread(target=self._read, args=(self.proc.stdout, events), daemon=True).start()

    def _read(self, answers, events):
        for line in answers:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            events.put((self, message))
        answers.close()
        events.put((self, None))

    def send(self, task):
        self.task = task
        # where it died, its reader reports EOF and the task is retried
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            self.tasks.write(json.dumps(task) + "\n")  # ASCII: a non-UTF-8 path survives
            self.tasks.flush()

    def close_input(self):
        if self.open:
            self.open = False
            with contextlib.suppress(BrokenPipeError, OSError):
                self.tasks.close()


def dispatch(tasks, jobs, config, progress, log, stats):
    """Grade `tasks` on `jobs` judges: {task id: answer}; `stats` gets each judge's CPU figures.
    A task that kills two judges is an error."""
    run = _Dispatch(tasks, jobs, config, progress, log, stats)
    try:
        while run.pending or any(j.task for j in run.judges):
            run.feed()
            try:
                judge, answer = run.events.get(timeout=1.0)
            except queue.Empty:
                progress.tick()
                continue
            if answer is None:
                run.judge_ended(judge)
            else:
                run.answered(judge, answer)
    finally:
        run.close()
    return run.answers


class _Dispatch:
    """The state of one dispatch: tasks not yet sent, the judges, the answers so far."""

    def __init__(self, tasks, jobs, config, progress, log, stats):
        self.pending, self.jobs, self.config = collections.deque(tasks), jobs, config
        self.progress, self.log, self.stats = progress, log, stats
        self.events, self.judges, self.answers = queue.Queue(), [], {}
        self.attempts = collections.Counter()

    def feed(self):
        """Start judges up to `jobs`, give each idle one a task, close their inputs once nothing
        is left to send."""
        open_judges = [j for j in self.judges if j.open and (j.proc.poll() is None or j.task)]
        for _ in range(max(0, min(self.jobs, len(self.pending)) - len(open_judges))):
            judge = _Judge(self.config, self.events, self.log)
            self.judges.append(judge)
            open_judges.append(judge)
        for judge in open_judges:
            if self.pending and judge.task is None:
                judge.send(self.pending.popleft())
        if not self.pending:
            for judge in open_judges:
                judge.close_input()

    def judge_ended(self, judge):
        """The task the judge still held is retried once."""
        judge.proc.wait()
        judge.open = False
        task = judge.task
        if task is not None:
            self.attempts[task["id"]] += 1
            if self.attempts[task["id"]] < 2:
                self.pending.appendleft(task)
            else:
                self.answers[task["id"]] = {"id": task["id"], "student": task["student"],
                                            "status": "error",
                                            "error_said": words.pair("batch", "died_twice"),
                                            "error": words.text("batch", "died_twice", "en")}
                self.progress.advance(self.answers[task["id"]])
        judge.task = None
        self.judges.remove(judge)

    def answered(self, judge, answer):
        if "stats" in answer:
            self.stats.append(answer["stats"])
            return
        if judge.task is not None and answer.get("id") == judge.task["id"]:
            judge.task = None
            self.answers[answer["id"]] = answer
            self.progress.advance(answer)

    def close(self):
        for judge in self.judges:
            judge.close_input()
        for judge in self.judges:
            try:
                judge.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                judge.proc.kill()
        while True:  # the judges' last words: their CPU figures
            try:
                _, answer = self.events.get_nowait()
            except queue.Empty:
                break
            if answer and "stats" in answer:
                self.stats.append(answer["stats"])


# What one job holds at its peak: a judge and the worker forked for it, with room (torch's pages
# shared with their zygote counted in full).
JOB_BYTES = 700 * 2 ** 20
# Where the machine has a GPU, every worker starts CUDA for the device checks (docs/building.md).
GPU_JOB_BYTES = 2400 * 2 ** 20
CPU_MAX, MEMINFO = "/sys/fs/cgroup/cpu.max", "/proc/meminfo"  # cgroup v2's CPU quota; Linux's


def default_jobs():
    """--jobs' default: one job per core this process may use (a judge and its worker take turns,
    so one job keeps about one core busy), fewer where memory is short (a GPU machine's jobs hold
    more: GPU_JOB_BYTES)."""
    per_job = GPU_JOB_BYTES if accelerator_nodes() else JOB_BYTES
    return max(1, min(usable_cores(), _available_bytes() // per_job or 1))


def usable_cores():
    """The cores this process may run on, and no more than a cgroup's CPU quota (a container
    given 2 CPUs of a 64-core host sees 64 in its affinity mask)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        with open(CPU_MAX, encoding="ascii") as handle:
            quota, period = handle.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, round(int(quota) / int(period))))
    return cores


def _available_bytes():
    """MemAvailable from /proc/meminfo; without it, as if memory were no limit."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(MEMINFO, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return JOB_BYTES * 1024
