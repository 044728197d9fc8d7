"""`python -m grader watch [SUBMISSION]`: rerun the public checks on every save, redraw the screen.

One judge (service.Judge) lives for the whole session, so a rerun costs only the student's import
and the checks. Every state of the file (syntax error, exception at import, endless loop, missing
file) ends as feedback on the screen; a save during a run cancels that run and starts the next;
Ctrl-C exits with 0.
"""
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import threading
import time
import unicodedata

from grader import inert, options, rubric, words
from grader.judge import submission as submission_module
from grader.judge.service import Judge
from grader.judge.submission import SubmissionError
from grader.render import report
from grader.sandbox import launch as sandbox
from grader.tools.hints import (exercise_progress, first_unfinished, ladders, record_run,
                                source_hash, state_path)

CLEAR = "\033[H\033[2J"


# -- FileWatch: is there new content? ------------------------------------------------------------
def content_key(path):
    """What the file holds now, None when it is missing: a touch without a change is no save."""
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


class FileWatch:
    """Calls on_change() from a background thread each time the file's content changes.

    watchfiles (inotify and friends) when installed, else polling: a stat every 50 ms, hashing
    when mtime/size/inode moved, and a hash every second anyway for writes too quick for the
    mtime to show.  The folder is watched, not the file: editors that save by renaming a new
    file over the old one replace the inode a watch on the file itself would hold.
    """

    def __init__(self, path, on_change, poll=False):
        self.path, self.on_change = os.path.realpath(path), on_change
        self.backend = "polling" if poll or importlib.util.find_spec("watchfiles") is None \
            else "watchfiles"
        self.key = content_key(self.path)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="file-watch", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped.set()

    def _check(self):
        key = content_key(self.path)
        if key != self.key:
            self.key = key
            self.on_change()

    def _run(self):
        if self.backend == "watchfiles":
            try:
                self._run_watchfiles()
                return
            except Exception:  # e.g. out of inotify watches: keep watching by polling
                self.backend = "polling"
        self._run_polling()

    def _run_watchfiles(self):
        import watchfiles

        # step: yield 20 ms after the last event of a burst; the 1 s timeout re-checks anyway.
        for _ in watchfiles.watch(os.path.dirname(self.path), recursive=False,
                                  watch_filter=lambda change, p: os.path.realpath(p) == self.path,
                                  debounce=400, step=20, rust_timeout=1000, yield_on_timeout=True,
                                  stop_event=self.stopped, raise_interrupt=False):
            self._check()

    def _run_polling(self):
        last, hashed = None, 0.0
        while not self.stopped.wait(0.05):
            try:
                st = os.stat(self.path)
                stat = st.st_mtime_ns, st.st_size, st.st_ino
            except OSError:
                stat = None
            now = time.monotonic()
            if stat != last or now - hashed >= 1.0:
                last, hashed = stat, now
                self._check()


# -- the screen ----------------------------------------------------------------------------------
TEXT = words.table("watch")


def render(the_rubric, outcome, lang, name, number, seconds):
    """The screen for one run: progress, the first failing check and its feedback, what next."""
    text = TEXT[lang]
    lines = [text["header"].format(name=name, n=number, seconds=f"{seconds:.2f}")]
    if "error" in outcome:
        return lines + [text["error"].format(message=rubric.in_lang(outcome["error"], lang))]
    if "internal" in outcome:
        return lines + [text["internal"].format(message=outcome["internal"])]
    data = outcome["data"]
    progress = exercise_progress(the_rubric, data)
    marks = " ".join(f"{ex} {'✓' if done else '✗'}" for ex, done in progress)
    passed = sum(1 for r in data["checks"] if r["status"] == "passed")
    lines += [text["progress"].format(done=sum(d for _, d in progress), total=len(progress),
                                      marks=marks),
              text["checks"].format(passed=passed, total=len(data["checks"])), ""]
    failing = next((r for r in data["checks"] if r["status"] != "passed"), None)
    if failing is None:
        hidden = data["metadata"]["hidden_not_run"]
        lines.append(text["all_done"].format(hidden=hidden,
                                             checks=report.plural(hidden, "check", "checks"),
                                             what=report.still_hidden(the_rubric, lang)))
    else:
        failure = report.import_failure(data)
        if failure:  # said as `make check` says it: what stopped the import, and its line
            lines += report.import_failure_lines(the_rubric, failure, lang)[:-1]
        else:
            check = the_rubric.by_id[failing["id"]]
            mark = report.STATUS_MARK[failing["status"]]
            lines.append(f"{mark} {failing['id']}  {check.title[lang]}")
            lines += ["    " + line
                      for line in report.feedback(the_rubric, failing, lang).splitlines()]
        if any(report.at_import(v) for v in failing["verdicts"]):
            step = "import"  # nothing ran: the file itself comes first, a hint would not help
        else:
            step = "timeout" if failing["status"] == "timeout" else "next"
        lines += ["", text[step].format(name=name, ex=first_unfinished(progress))]
    printed = data["metadata"].get("student_output", "").splitlines()
    if printed:
        lines += ["", text["output"]] + ["| " + line for line in printed[:8]]
    return lines


# -- while a run waits ---------------------------------------------------------------------------
TICK_SECONDS = 0.25  # the worker tells the judge where the student's code is every 0.5 s
QUIET_SECONDS = 1.0  # a first run quicker than this shows no waiting line (no flash)
LOG_EVERY_SECONDS = 5  # without a terminal: a waiting line this often, or when the line moves


class Waiting:
    """While a run waits on the student's code: the seconds the import has taken against its
    limit (a later call's run time without one), and the student's line the code is at (the
    Student's stuck_line). On a terminal one line redrawn in place; otherwise a line each
    LOG_EVERY_SECONDS and each time that line changes."""

    def __init__(self, student, lang, name, tty, write, quiet=0.0):
        self.student, self.text, self.name, self.tty, self.write = \
            student, TEXT[lang], name, tty, write
        self.began = time.monotonic()
        self.quiet = quiet
        self.import_of, self.import_began = None, self.began  # the worker importing, since when
        self.looked = False
        self.last = None  # what was last written: the line (terminal), or (seconds step, line)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="watch-waiting", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped.set()
        self.thread.join()

    def _run(self):
        if self.stopped.wait(self.quiet):
            return
        while True:
            self.show(time.monotonic())
            if self.stopped.wait(TICK_SECONDS):
                return

    def said(self, now):
        """(the waiting line, the student's line number or None) at `now`."""
        student = self.student
        worker = student.worker
        importing = worker is not None and student.hello_pending
        if importing and worker is not self.import_of:  # since first seen (at the first look:
            self.import_began = self.began if self.import_of is None and not self.looked else now
            self.import_of = worker  # since the run began, as the worker may have)
        self.looked = True
        if importing:
            limit = min(student.startup_seconds, student.limits.submission_seconds)
            seconds = min(now - self.import_began, limit)
            line = self.text["waiting_import"].format(seconds=int(seconds), limit=f"{limit:g}",
                                                      name=self.name)
        else:
            line = self.text["waiting"].format(seconds=int(now - self.began))
        number = student.stuck_line if worker is not None else None
        if number is not None:
            line += self.text["waiting_at"].format(line=number, code=self.code(number))
        return inert.one_line(line), number  # the file's name and code are the student's

    def code(self, number):
        """The student's line `number`, as the judge's own copy of the file has it."""
        try:
            lines = self.student.source().splitlines()
        except OSError:
            return ""
        return lines[number - 1].strip()[:120] if 0 < number <= len(lines) else ""

    def show(self, now):
        line, number = self.said(now)
        if self.tty:  # one line redrawn: cut to the terminal, where a wrapped line would stay
            line = fit(line, shutil.get_terminal_size().columns - 1)
            if line != self.last:
                self.last = line
                self.write("\r\033[K" + line)
            return
        step = int(now - self.began) // LOG_EVERY_SECONDS
        if (step, number) != self.last:
            self.last = (step, number)
            self.write(line + "\n")


def fit(line, columns):
    """`line` cut to `columns` terminal cells (a Chinese character takes two)."""
    used = 0
    for index, char in enumerate(line):
        used += 2 if unicodedata.east_asian_width(char) in "WF" else 1
        if used > columns:
            return line[:index]
    return line


# -- the loop ------------------------------------------------------------------------------------
class Session:
    def __init__(self, path, state_file, lang, judge, poll, stats=None):
        self.path, self.state_file, self.lang, self.judge, self.stats = \
            path, state_file, lang, judge, stats
        self.name = os.path.basename(path)
        self.tty = sys.stdout.isatty()
        self.wake, self.quit = threading.Event(), threading.Event()
        self.lock, self.current = threading.RLock(), None
        self.screen = threading.Lock()
        self.number = 0  # screens drawn
        self.changed_at = time.monotonic()
        self.watch = FileWatch(path, self.on_change, poll=poll)

    # Called from the watch thread (a save) and the signal handler (Ctrl-C).
    def on_change(self):
        self.changed_at = time.monotonic()
        self.wake.set()
        self.cancel_current()

    def on_signal(self, signum, frame):
        if self.quit.is_set():  # a second Ctrl-C: leave now, workers die with their channel
            sys.stdout.flush()
            os._exit(0)
        self.quit.set()
        self.wake.set()
        # Not here: the handler interrupts the main thread, which may hold a lock cancel needs.
        threading.Thread(target=self.cancel_current, daemon=True).start()

    def cancel_current(self):
        with self.lock:
            if self.current is not None:
                self.current.cancel()

    def run_once(self):
        """One run's outcome: {"data"}, {"error"} or {"internal"}; None when a save cancelled it."""
        try:
            sub = submission_module.load(self.path)
        except SubmissionError as exc:
            return {"error": {"zh": exc.said("zh"), "en": exc.said("en")}}
        try:
            student = self.judge.student(sub)
        except Exception as exc:
            sub.cleanup()
            return {"internal": f"{type(exc).__name__}: {exc}"}
        with self.lock:
            self.current = student
            if self.wake.is_set() or self.quit.is_set():
                student.cancel()  # the file changed again while we were reading it
        # On a terminal a rerun says at once that it runs (the old screen stays until it ends)
        waiting = Waiting(student, self.lang, self.name, self.tty, self.write,
                          quiet=0.0 if self.tty and self.number else QUIET_SECONDS).start()
        try:
            data = self.judge.finish(sub, student, ("public",))
        except Exception as exc:  # a bug of ours must not end the student's loop
            return {"internal": f"{type(exc).__name__}: {str(exc)[:300]}"}
        finally:
            waiting.stop()
            with self.lock:
                self.current = None
        if student.cancelled:
            return None
        the_rubric = rubric.load()
        record_run(self.state_file, source_hash(sub.source),
                   exercise_progress(the_rubric, data), ladders(the_rubric, data))
        return {"data": data}

    def draw(self, outcome, number):
        lines = render(rubric.load(), outcome, self.lang, self.name, number,
                       time.monotonic() - self.changed_at)
        watching = TEXT[self.lang]["watching"]
        lines += ["", watching.format(name=self.name, backend=self.watch.backend)]
        self.write((CLEAR if self.tty else "\n") + "\n".join(lines) + "\n")

    def write(self, text):
        """Onto the screen, whole: the waiting line's thread and the loop both write."""
        with self.screen:
            sys.stdout.write(text)
            sys.stdout.flush()

    def loop(self):
        self.watch.start()
        while not self.quit.is_set():
            self.wake.clear()
            outcome = self.run_once()
            if self.quit.is_set():
                break
            if outcome is None:
                continue  # a newer save: check that one instead
            self.number += 1
            self.draw(outcome, self.number)
            self.record_stats(self.number, outcome)
            while not self.wake.wait(0.5):
                pass

    def close(self):
        self.watch.stop()
        self.cancel_current()
        self.judge.close()

    def record_stats(self, number, outcome):
        """--stats FILE: one JSON line per screen, the workers it used (warm = a spare of the
        pool, started before the save) and the verdict shown, check by check; the tests and
        `make bench` read it, no student does."""
        if self.stats is None:
            return
        taken, self.judge.workers.taken = self.judge.workers.taken, []
        shown = outcome.get("data", {}).get("checks", [])
        checks = [[c["id"], c["status"], c["score"]] for c in shown]
        document = outcome.get("data", {}).get("pytest")
        with open(self.stats, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"run": number, "judge_pid": os.getpid(),
                                     "seconds": round(time.monotonic() - self.changed_at, 3),
                                     "workers": taken, "checks": checks,
                                     "pytest": document}) + "\n")


def resolve_path(submission):
    """The file to watch: SUBMISSION itself, or the attention file inside a folder."""
    if os.path.isdir(submission):
        return submission_module.pick_in_folder(submission)
    if not os.path.isdir(os.path.dirname(os.path.abspath(submission))):
        raise SubmissionError(f"{submission}: its folder does not exist",
                              f"{submission}：所在的文件夹不存在")
    return submission


def main(args):
    try:
        path = resolve_path(args.submission)
        isolation = sandbox.choose_isolation(options.isolation_of(args))
    except (SubmissionError, RuntimeError) as exc:
        said = exc.said(args.lang) if isinstance(exc, SubmissionError) else f"`{exc}`"
        print(TEXT[args.lang]["error"].format(message=said), file=sys.stderr)
        return 2
    judge = Judge(options.limits_from(args), isolation, start=args.worker_start, spares=2)
    session = Session(path, state_path(args.submission), args.lang, judge, args.poll, args.stats)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, session.on_signal)
    try:
        judge.workers.fill()  # the warm spares start now, beside the judge's own imports
        session.loop()
    finally:
        session.close()
    print(("\n" if session.tty else "") + TEXT[args.lang]["bye"])  # after the terminal's "^C"
    return 0
