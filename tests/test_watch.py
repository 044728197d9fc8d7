"""`python -m grader watch`, driven as a student would: a real process, real saves in a tmp folder,
and assertions on what it prints after each save.  Waits use deadlines, never fixed sleeps."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from grader.authoring import stubs as authoring
from grader.tools import watch

ROOT = authoring.ROOT
PY = sys.executable
CALL_TIMEOUT = "1"


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


SOLUTION = read(authoring.SOLUTION)
STUB = read(authoring.EXERCISE)


def solved(keep, source=SOLUTION):
    """The stub made from `source`, except the named exercises, which keep their code."""
    out, name = [], None
    for line in source.splitlines():
        match = re.match(r"(?:def|class)\s+(\w+)", line)
        name = match.group(1) if match else name
        if line.strip() == authoring.BEGIN and not line.startswith(" "):
            name = "quiz"  # the module-level block holds the check questions' answers
        if line.strip() in (authoring.BEGIN, authoring.END) and name in keep:
            continue
        out.append(line)
    return authoring.make_stub("\n".join(out) + "\n")


def with_body(source, function, body):
    """`source` with the solution block of `function` replaced by `body` (indented lines)."""
    start = source.index(f"def {function}(")
    begin = source.index(authoring.BEGIN, start)
    begin = source.rindex("\n", 0, begin) + 1
    end = source.index("\n", source.index(authoring.END, begin)) + 1
    return source[:begin] + body + source[end:]


HALF_CORRECT = solved({"split_heads", "merge_heads"})
HALF_TYPED = solved({"split_heads"}, with_body(SOLUTION, "merge_heads",
                                               "    batch, heads, positions, width = x.shape\n"
                                               "    return x.transpose(1, 2).resh\n"))
LOOPING = with_body(SOLUTION, "attend", "    while True:\n        pass\n")
SYNTAX_ERROR = STUB + "\n\ndef broken(x:\n    return x\n"
RAISES_AT_IMPORT = STUB + '\nraise RuntimeError("boom at import")\n'
# An endless loop at import that sleeps a little each round: the import never ends and the worker
# says which of its lines it is at, as a spinning loop's does, without burning a core for the
# whole import limit (what is judged is watch's waiting line and screen, not the spin).
LOOPS_AT_IMPORT = STUB + ("\nimport time\nspins = 0\nwhile spins >= 0:\n    spins += 1\n"
                          "    time.sleep(0.01)\n")


def save(path, text):
    """Save as many editors do: a new file renamed over the old one (never a half-written file)."""
    temporary = str(path) + ".saving"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


# `python -m grader` with the limit on a worker's import (WorkerSource.startup_seconds) set to a
# test's `seconds`: watch has no option for it.  A forked worker (or a spare) has imported torch
# before it is taken, so the limit need only cover the student's file.
SHORT_IMPORT_LIMIT = """import sys
from grader.judge import workers
workers.WorkerSource.startup_seconds = lambda self, limits: {seconds!r}
from grader import process
from grader.__main__ import main
process.exit_now(main(sys.argv[1:]))"""


class Watcher:
    """The watch process with its output collected line by line on a thread."""

    def __init__(self, target, tmp_dir, *extra, env=(), import_seconds=None):
        env = dict(os.environ, TMPDIR=str(tmp_dir), PYTHONUNBUFFERED="1", **dict(env))
        start = [PY, "-m", "grader"]
        if import_seconds is not None:  # the import limit (60 s forked) set lower in the watcher
            start = [PY, "-c", SHORT_IMPORT_LIMIT.format(seconds=float(import_seconds))]
        self.proc = subprocess.Popen(
            [*start, "watch", str(target), "--lang", "en",
             "--call-timeout", CALL_TIMEOUT, *extra],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self.lines, self.lock = [], threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def blocks(self):
        """The finished screens so far: from a run's header to its 'Watching' line."""
        with self.lock:
            text = "\n".join(self.lines)
        return [b for b in re.findall(r"── .*?\nWatching [^\n]*", text, re.S)]

    def next_block(self, after, predicate, seconds=60):
        """The first screen after the first `after` screens that satisfies `predicate`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for block in self.blocks()[after:]:
                if predicate(block):
                    return block
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        pytest.fail(f"no matching screen within {seconds} s (alive: {self.proc.poll() is None});"
                    f" output so far:\n" + "\n".join(self.lines))

    def save_and_wait(self, path, text, predicate, seconds=60):
        """Save, then the screen for it and the seconds from the save to that screen."""
        after = len(self.blocks())
        began = time.monotonic()
        save(path, text)
        block = self.next_block(after, predicate, seconds)
        return block, time.monotonic() - began

    def interrupt(self):
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=20)
        return code, self.proc.stderr.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def progress(*marks):
    names = ["split_heads", "merge_heads", "attend", "CausalSelfAttention", "quiz"]
    done = sum(1 for m in marks if m == "✓")
    return f"{done}/5 exercises done: " + " ".join(f"{n} {m}" for n, m in zip(names, marks))


def leftover_processes(tmp_dir):
    """Processes whose command line names our tmp folder: workers that outlived the watcher."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if str(tmp_dir).encode() in handle.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def a_worker_has_the_file(tmp_dir):
    """A run has begun: the student's file is in a worker's folder under our tmp folder (a work
    folder, a copy in the fork server's spool, a spare's folder)."""
    return any("attention.py" in files for _, _, files in os.walk(tmp_dir))


@pytest.fixture
def work(tmp_path):
    student = tmp_path / "student"
    scratch = tmp_path / "scratch"  # the watcher's TMPDIR: its work folders and spares
    student.mkdir()
    scratch.mkdir()
    target = student / "attention.py"
    save(target, STUB)
    return target, scratch


def test_watch_survives_every_state_of_the_file(work, tmp_path):
    """Every state a file goes through, then SAVES saves of the correct file, each on a warm
    worker (test_every_save_gets_a_warm_worker's "auto" case, in this watcher)."""
    target, scratch = work
    stats = tmp_path / "stats.jsonl"
    watcher = Watcher(target, scratch, "--stats", str(stats))
    try:
        first = watcher.next_block(0, lambda b: "exercises done" in b or "error" in b)
        assert progress("✗", "✗", "✗", "✗", "✗") in first
        assert "✗ split_heads.shape" in first and "Not implemented yet" in first
        assert "make hint EX=split_heads" in first
        backend = re.search(r"Watching attention\.py for changes \((\w+);", first).group(1)
        assert backend in ("watchfiles", "polling")

        block, _ = watcher.save_and_wait(target, SYNTAX_ERROR, lambda b: "SyntaxError" in b)
        assert "could not be imported" in block and "attention.py:" in block
        assert "make attention.py import again" in block

        block, _ = watcher.save_and_wait(target, RAISES_AT_IMPORT, lambda b: "boom" in b)
        assert "RuntimeError: boom at import" in block and "could not be imported" in block

        block, _ = watcher.save_and_wait(target, HALF_TYPED, lambda b: "AttributeError" in b)
        assert progress("✓", "✗", "✗", "✗", "✗") in block
        assert "merge_heads." in block and "make hint EX=merge_heads" in block

        block, _ = watcher.save_and_wait(target, HALF_CORRECT,
                                         lambda b: "2/5 exercises done" in b)
        assert progress("✓", "✓", "✗", "✗", "✗") in block
        assert "✗ attend.scale" in block and "make hint EX=attend" in block

        block, looped = watcher.save_and_wait(target, LOOPING, lambda b: "3/5 exercises" in b)
        assert progress("✓", "✓", "✗", "✗", "✓") in block
        assert "⏱ attend." in block and "Timed out" in block
        assert "endless loop in attend" in block

        # the card of the first call that timed out names the line attend was stuck on
        stuck = LOOPING.splitlines().index("    while True:") + 1
        assert f"the line it was running when time ran out (line {stuck}):" in block, block
        assert "|     while True:" in block

        block, seconds = watcher.save_and_wait(target, SOLUTION, lambda b: "5/5 exercises" in b)
        assert "Every public check passes" in block
        print(f"\nsave -> screen: correct file {seconds:.2f} s, endless loop {looped:.2f} s "
              f"({backend}; times are make bench's business, not asserted here)")
        last = save_again_and_again(watcher, target)

        assert watcher.proc.poll() is None, "the watcher died"
        code, stderr = watcher.interrupt()
        assert code == 0, stderr
        assert "Traceback" not in stderr
        assert watcher.lines[-1] == "watch stopped. bye"
        assert read(target) == last  # the watcher only ever reads the student's file
        assert leftover_processes(scratch) == []
        assert os.listdir(scratch) == []  # every work folder and spare cleaned up
    finally:
        watcher.kill()
    runs = stats_lines(stats)
    assert [r["run"] for r in runs] == list(range(1, 7 + SAVES + 1))  # 7 states, then the saves
    assert_a_warm_worker_per_save(runs, "auto")


def lines_after(watcher, after, pattern, seconds=60):
    """The first line printed after the first `after` lines that matches `pattern`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with watcher.lock:
            found = [line for line in watcher.lines[after:] if re.search(pattern, line)]
        if found:
            return found[0]
        time.sleep(0.05)
    pytest.fail(f"no line like {pattern!r} within {seconds} s:\n" + "\n".join(watcher.lines))


def test_the_waiting_line_fits_the_terminal_and_names_no_line_before_there_is_one():
    """Waiting.said on a Student's state: no line before the worker reports one; the import's
    limit only while importing; a Chinese line cut at the terminal's width counts two cells a
    character."""
    class Student:
        worker, hello_pending, stuck_line, startup_seconds = None, True, None, 30.0
        limits = type("Limits", (), {"submission_seconds": 120.0})()

        def source(self):
            return "x = 1\nwhile True:\n    pass\n"

    student = Student()
    waiting = watch.Waiting(student, "zh", "attention.py", tty=False, write=None)
    began = waiting.began
    assert waiting.said(began + 2.4) == ("正在检查… 2 秒", None)
    student.worker = object()  # the import's seconds count from when it is first seen
    assert waiting.said(began + 3.0)[0] == "正在检查… 0 秒 / 30 秒（正在导入 attention.py）"
    student.stuck_line = 2
    assert waiting.said(began + 7.0) == (
        "正在检查… 4 秒 / 30 秒（正在导入 attention.py） · 正在运行第 2 行：while True:", 2)
    assert waiting.said(began + 50.0)[0].startswith("正在检查… 30 秒 / 30 秒")  # never past it
    student.hello_pending, student.stuck_line = False, 3
    assert waiting.said(began + 9.0) == ("正在检查… 9 秒 · 正在运行第 3 行：pass", 3)
    student.worker = None  # the worker is gone (a timeout): its line no longer says where it is
    assert waiting.said(began + 10.0) == ("正在检查… 10 秒", None)
    importing = watch.Waiting(Student(), "en", "attention.py", tty=False, write=None)
    importing.student.worker = object()  # importing at the first look: since the run began
    assert importing.said(importing.began + 2.0)[0].startswith("checking… 2 s / 30 s")
    assert watch.fit("正在检查… 12", 6) == "正在检"
    assert watch.fit("abc", 6) == "abc"
    student.worker, student.stuck_line = object(), 1  # the student's code is inert on a terminal
    student.source = lambda: "s = '\x1b[2J\x1b]0;owned\x07'  # \u202e\nwhile True: pass\n"
    line = waiting.said(began + 11.0)[0]
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line
    assert "\\x1b[2J" in line


def test_polling_hint_endless_import_missing_file_and_ctrl_c_during_a_run(work, tmp_path, capsys):
    """One watcher, polling because watchfiles is missing: its first screen is recorded for
    `hint` (which then grades nothing; its command line, run here in this process, is
    test_hints.py's), and a touch is no save.  An endless loop at import: while the import runs
    on, a line says the seconds it has taken against its limit and the line of the file it is at
    (issue 72: `watch` showed only "checking…" for 60 s); the screen after the limit names the
    line as `make check` does; a save in the meantime is checked.  A deleted file is a screen,
    and Ctrl-C as a run has begun ends it cleanly."""
    target, scratch = work
    missing = tmp_path / "no-watchfiles"
    (missing / "watchfiles").mkdir(parents=True)
    (missing / "watchfiles" / "__init__.py").write_text("raise ImportError('not installed')\n")
    save(target, HALF_CORRECT)
    # forked workers where the fork server works (a fork server's import limit is 60 s, the
    # spares' 30 s), that limit set to 10 s here: a forked worker starts with torch imported, the
    # student's file is all its import runs.  (Not spares, each a cold worker ahead: the waiting
    # line reads the Student, whichever way its worker started; spares are
    # test_every_save_gets_a_warm_worker's.)
    watcher = Watcher(target, scratch, env={"PYTHONPATH": str(missing)}, import_seconds=10)
    try:
        first = watcher.next_block(0, lambda b: "2/5 exercises done" in b)
        assert "(polling;" in first
        # watch records its run beside the file (before its screen): hint reads it, grades nothing
        state_file = target.parent / ".attention-hints.json"
        assert state_file.exists()
        from grader import __main__ as cli
        from grader.tools import hints

        capsys.readouterr()  # the command's own arguments, its main (not cli.main's gc hold)
        code = hints.main(cli.parse(["hint", "--submission", str(target), "--lang", "en"]))
        out = capsys.readouterr()
        assert code == 0, out.err
        assert "hint · attend · level 1/3" in out.out
        assert "ran the public checks" not in out.out  # it used what the watcher recorded

        os.utime(target)  # same content, newer mtime: nothing to rerun
        block, seconds = watcher.save_and_wait(target, SOLUTION, lambda b: "exercises done" in b)
        assert progress("✓", "✓", "✓", "✓", "✓") in block
        assert len(watcher.blocks()) == 2, "\n".join(watcher.lines)

        # the endless loop at import
        after, looping = len(watcher.lines), LOOPS_AT_IMPORT.splitlines()
        save(target, LOOPS_AT_IMPORT)
        loop = looping.index("while spins >= 0:")
        at = {n + 1: looping[n] for n in range(loop, len(looping))}  # the loop's own lines
        line = lines_after(watcher, after, r"^checking… \d+ s / \d+ s \(importing attention\.py\)"
                                           r" · running line \d+: ")
        number, code = re.search(r"running line (\d+): (.*)$", line).groups()
        assert at[int(number)].strip() == code, line
        assert " s / 10 s (importing" in line, line  # the limit this watcher was given
        block = watcher.next_block(2, lambda b: "Timed out" in b, seconds=90)
        assert "while importing attention.py" in block
        number = re.search(r"the line it was running when time ran out \(line (\d+)\):", block)
        assert number and f"| {at[int(number.group(1))]}" in block, block
        assert "make attention.py import again (see the line above)" in block
        after = len(watcher.lines)
        save(target, LOOPS_AT_IMPORT + "# again\n")  # then the solution before the limit
        lines_after(watcher, after, r"running line \d+: ")
        block, _ = watcher.save_and_wait(target, SOLUTION, lambda b: "5/5 exercises" in b)

        shown = len(watcher.blocks())
        os.remove(target)
        block = watcher.next_block(shown, lambda b: "error" in b)
        assert "no such file" in block
        save(target, LOOPING)
        # Ctrl-C as soon as the new run has begun (a worker has the file; the loop holds it).
        deadline = time.monotonic() + 10
        while not a_worker_has_the_file(scratch):
            assert time.monotonic() < deadline, "no run began"
            time.sleep(0.01)
        code, stderr = watcher.interrupt()
        assert code == 0 and "Traceback" not in stderr
        assert leftover_processes(scratch) == []
    finally:
        watcher.kill()


def stats_lines(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


SAVES = 4


def save_again_and_again(watcher, target):
    """SAVES saves in a row of the correct file (the old fault below showed from the third), each
    waited for; the last text saved."""
    for n in range(SAVES):
        text = SOLUTION + f"\n# save {n}\n"
        watcher.save_and_wait(target, text, lambda b: "5/5 exercises done" in b)
    return text


def assert_a_warm_worker_per_save(runs, start):
    """The last SAVES runs' workers: one each, warm, fresh, forked where `start` forks here; every
    run served by the one judge process."""
    assert len({r["judge_pid"] for r in runs}) == 1
    workers = [w for r in runs[-SAVES:] for w in r["workers"]]
    assert len(workers) == SAVES, runs  # one worker per run: nothing crashed or restarted
    assert all(w["warm"] for w in workers), runs
    assert len({w["pid"] for w in workers}) == SAVES  # a fresh worker per save, never a reused one
    from grader.sandbox import forkserver, launch as sandbox

    forks_here = sys.platform == "linux" and \
        forkserver.supported(sandbox.choose_isolation("auto")) is not None
    assert all((w.get("start") == "fork") == (start == "auto" and forks_here)
               for w in workers), workers


def test_every_save_gets_a_warm_worker(work, tmp_path):
    """Four saves in a row: each run's worker is a spare of the pool, alive when taken and started
    before the save ("spare"), or forked from the judge's zygote where the fork server works
    ("auto": the same saves at the end of test_watch_survives_every_state_of_the_file): torch
    imported ahead either way, all served by the one judge process.  Before warm.py's maker
    thread, spares made during a run died with the check session's thread (bubblewrap's
    --die-with-parent) and every save after the second started a cold worker."""
    target, scratch = work
    stats = tmp_path / "stats.jsonl"
    save(target, SOLUTION)
    watcher = Watcher(target, scratch, "--stats", str(stats), "--worker-start", "spare")
    try:
        watcher.next_block(0, lambda b: "5/5 exercises done" in b)
        save_again_and_again(watcher, target)
        code, stderr = watcher.interrupt()
        assert code == 0, stderr
    finally:
        watcher.kill()
    runs = stats_lines(stats)
    assert [r["run"] for r in runs] == list(range(1, SAVES + 2))
    assert_a_warm_worker_per_save(runs, "spare")
    assert leftover_processes(scratch) == []
