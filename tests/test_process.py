"""A kit process's setup (grader/process.py, worker.prepare): one compute thread, in the worker's
environment too; the garbage collector off during a judge's imports, then on, with everything
imported frozen (a worker's too), before any student's code is judged or run.  Each collector case runs
in an interpreter of its own: the collector is the whole process's."""
import json
import os
import subprocess
import sys

from grader import paths, process
from grader.sandbox import launch

ROOT = paths.KIT_ROOT
RUNTIME = os.path.join(paths.GRADER, "sandbox", "runtime")
SOLUTION = os.path.join(ROOT, "solutions", "attention.py")


def run_python(code):
    """The last line of `code`'s output, read as JSON."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_hold_stops_collections_and_release_freezes_and_restarts_them():
    seen = run_python(
        "import gc, json\n"
        "from grader import process\n"
        "process.hold_gc()\n"
        "held = [gc.isenabled(), process.gc_held()]\n"
        "made = [[] for _ in range(3000)]\n"
        "for item in made: item.append(item)  # cycles: alive, then garbage after the release\n"
        "process.release_gc()\n"
        "frozen = gc.get_freeze_count()\n"
        "del made\n"
        "print(json.dumps({'held': held, 'on': gc.isenabled(), 'frozen': frozen,\n"
        "                  'kept': process.gc_held(), 'freed': gc.collect()}))\n")
    assert seen["held"] == [False, True]
    assert seen["on"] is True and seen["kept"] is False
    assert seen["frozen"] >= 3000  # what was alive at the release, the cycles among it
    assert seen["freed"] == 0  # frozen: a collection never walks them again


def test_release_without_hold_changes_nothing():
    """A process that never held it (a test making a Judge in-process, as here) keeps its
    collector as it was, frozen nothing."""
    import gc

    before = (gc.isenabled(), gc.get_freeze_count())
    process.release_gc()
    assert (gc.isenabled(), gc.get_freeze_count()) == before


def test_a_process_that_turned_it_off_keeps_it_off():
    seen = run_python(
        "import gc, json\n"
        "from grader import process\n"
        "gc.disable()\n"
        "process.hold_gc(); process.release_gc()\n"
        "print(json.dumps([gc.isenabled(), gc.get_freeze_count()]))\n")
    assert seen == [False, 0]


def test_the_check_command_judges_with_the_collector_on_and_its_imports_frozen():
    """`python -m grader check` as a student runs it: held from the command's start, on and
    frozen when the first check meets the student (recorded there), the report as ever."""
    seen = run_python(
        "import gc, json, sys\n"
        "from grader import __main__ as cli\n"
        "from grader.judge import runner\n"
        "states, run_items = [], runner.KitPlugin._run_items\n"
        "def recording(self, session, student, only=None):\n"
        "    states.append([gc.isenabled(), gc.get_freeze_count()])\n"
        "    return run_items(self, session, student, only)\n"
        "runner.KitPlugin._run_items = recording\n"
        "during = []\n"
        "import grader.judge.runner as r; direct = r.KitPlugin.pytest_configure\n"
        "def configure(self, config):\n"
        "    during.append(gc.isenabled())\n"
        "    return direct(self, config)\n"
        "r.KitPlugin.pytest_configure = configure\n"
        f"code = cli.main(['check', {SOLUTION!r}, '--isolation', 'process', '--format', 'json'])\n"
        "sys.stdout.flush()\n"
        "print()\n"
        "print(json.dumps({'code': code, 'states': states, 'during': during}))\n")
    assert seen["code"] == 0
    assert seen["during"] == [False]  # pytest configured (and the checks then collected) held
    [(on, frozen)] = seen["states"]
    assert on is True and frozen > 100_000  # torch, pytest and the checks: never walked again


def test_a_worker_serves_with_its_imports_frozen():
    """worker.prepare (a cold worker's start, the fork server's once): torch and meta's kernels
    imported with the collector held (no collection while they import), then everything frozen,
    and the collector on for the student's import and calls (and each fork)."""
    seen = run_python(
        "import gc, json, sys\n"
        f"sys.path.insert(0, {RUNTIME!r})\n"
        "import worker\n"
        "before = sum(g['collections'] for g in gc.get_stats())\n"
        "worker.prepare()\n"
        "during = sum(g['collections'] for g in gc.get_stats()) - before\n"
        "print(json.dumps({'on': gc.isenabled(), 'frozen': gc.get_freeze_count(),\n"
        "                  'collections': during}))\n")
    assert seen["on"] is True and seen["frozen"] > 100_000
    assert seen["collections"] == 0


def test_a_file_that_cannot_be_graded_ends_the_held_start():
    """watch and the notebook's judge live on after a file that cannot be loaded: the collector
    is on again once its grading has ended, with no check session ever made."""
    seen = run_python(
        "import gc, json\n"
        "from grader import process\n"
        "from grader.judge.service import Judge\n"
        "from grader.judge.submission import SubmissionError\n"
        "process.hold_gc()\n"
        "judge = Judge(isolation='process')\n"
        "try:\n"
        "    judge.begin('/nonexistent/attention.py')\n"
        "except SubmissionError:\n"
        "    pass\n"
        "print(json.dumps([gc.isenabled(), process.gc_held(), judge.sessions == {}]))\n")
    assert seen == [True, False, True]


def test_the_worker_gets_one_thread_and_nothing_else_of_the_judges(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    monkeypatch.setenv("ATTN_JUDGE_SECRET", "x")
    env = launch.minimal_env("/tmp")
    assert env["OMP_NUM_THREADS"] == "1" and "ATTN_JUDGE_SECRET" not in env
