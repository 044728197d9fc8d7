"""The batch's fork server: one torch import per judge, and still one clean sandbox per student.

What a forked worker must keep from a cold one: the same verdicts, nothing one student's code did
visible to the next (files, /tmp, processes), a worker that will not stop is killed, and a dead
zygote is replaced.  The hostile suite of test_sandbox.py also runs on forked workers.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.judge.workers import forked
from grader.authoring import stubs as authoring
from grader.sandbox import forkserver, launch as sandbox
from grader.judge import grading
from grader.judge import service  # noqa: E402
from grader.sandbox.launch import Limits
from grader import rubric, safefs
import zygotes

FULL = sum(c.points for c in rubric.load().checks)  # the rubric's total, not a literal

REFERENCE = open(authoring.SOLUTION, encoding="utf-8").read()
WRONG = os.path.join(authoring.ROOT, "tests", "submissions", "wrong")
MODES = ["process"] + (["bubblewrap"] if sandbox.bubblewrap_works()
                       and forkserver.supported("bubblewrap") else [])


@pytest.fixture(scope="module", params=MODES)
def server(request):
    """The module's fork server of each mode (zygotes.server: closed when the module ends)."""
    return zygotes.server(request.param)


def submit(tmp_path, name, source):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "attention.py").write_text(source, encoding="utf-8")
    return str(folder)


def grade(server, path, limits=None):
    sub, student = grading.start(path, server.isolation, limits, forked(server))
    return grading.finish(sub, student)


def outcome(data):
    return data["score"], [(c["id"], c["status"], c["score"], [v["key"] for v in c["verdicts"]])
                           for c in data["checks"]]


# A spread of one-mistake submissions, a mistake in each exercise and each kind of verdict: a
# call that raises (4-D only, .view after transpose), a wrong shape, a quiz answer, the static
# scan, and randomness drawn in the worker (dropout: a forked child must not replay the zygote's
# generator).  Each costs a cold worker (a torch import), graded cold once for the module (plain
# processes: verdicts do not depend on the isolation, so a forked worker of either mode is held
# to the same cold outcome, and a fault of its own still shows); the whole corpus is graded cold
# by test_corpus.py and forked by the batch of test_doors.py.
SPREAD = ["attend_assumes_4d.py", "block_dropout_active.py", "merge_view_no_contiguous.py",
          "quiz_q2_swapped.py", "split_wrong_axes.py", "uses_sdpa.py"]
_cold = {}


def cold_outcome(name):
    if name not in _cold:
        cold = service.grade(os.path.join(WRONG, name), isolation="process")
        assert cold["metadata"]["worker_start"] == "exec"
        _cold[name] = outcome(cold)
    return _cold[name]


def test_forked_and_cold_workers_give_the_same_verdicts(server):
    """... and the CPU of each child is reported by the zygote (the reference's worker here)."""
    for name in SPREAD:
        forked = grade(server, os.path.join(WRONG, name))
        assert forked["metadata"]["worker_start"] == "fork"
        assert outcome(forked) == cold_outcome(name), name
    before, cpu_before = server.children_exited, server.child_cpu_seconds
    assert grade(server, authoring.SOLUTION)["score"] == FULL
    deadline = time.monotonic() + 5
    while server.children_exited == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.children_exited > before
    assert server.child_cpu_seconds > cpu_before


def test_the_next_student_sees_nothing_of_the_last(server, tmp_path):
    if server.mode == "plain":
        pytest.skip("fallback cannot defend: plain processes share /tmp and the user's files")
    leave = REFERENCE + """
import os, subprocess, sys
open("/tmp/left-by-first", "w").write("x")
try:  # the submission's folder is read-only: this must fail
    open("left-in-submission", "w").write("x")
except OSError:
    pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
"""
    first = grade(server, submit(tmp_path, "first", leave))
    assert first["score"] == FULL
    look = REFERENCE + """
import os, sys
RUNTIME = {sys.prefix.split("/")[2]} if sys.prefix.startswith("/tmp/") else set()  # a kit in /tmp
SEEN = sorted(set(os.listdir("/tmp")) - RUNTIME) + sorted(os.listdir("/spool"))
SEEN += sorted(os.listdir("."))
SEEN += [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]
print("SEEN", SEEN)
if os.getuid() == 0 or len(SEEN) > 2:
    raise SystemExit("saw: " + " ".join(SEEN))
"""
    second = grade(server, submit(tmp_path, "second", look))
    assert second["score"] == FULL, second["metadata"]["student_output"]
    assert "left" not in second["metadata"]["student_output"]


def test_two_live_workers_cannot_see_each_other(server, tmp_path):
    if server.mode == "plain":
        pytest.skip("fallback cannot defend: plain processes of one user see each other")
    limits = Limits()
    sleeper = server.spawn(submit(tmp_path, "a", REFERENCE + "\nimport time\ntime.sleep(1)\n"),
                           "attention.py", limits)
    look = REFERENCE + """
import os
OTHERS = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"] + os.listdir("/spool")
if OTHERS:
    raise SystemExit("saw another worker: " + " ".join(OTHERS))
"""
    try:
        data = grade(server, submit(tmp_path, "b", look))
    finally:
        sleeper.kill()
    assert data["score"] == FULL, data["metadata"]["student_output"]


def test_a_worker_that_will_not_stop_is_killed(server, tmp_path):
    """A call that never returns: the judge gives up on it and the zygote kills the child."""
    stubborn = REFERENCE.replace('def split_heads(x, heads):\n',
                                 'def split_heads(x, heads):\n    while True:\n        pass\n', 1)
    assert stubborn != REFERENCE
    data = grade(server, submit(tmp_path, "stubborn", stubborn), Limits(call_seconds=1.0))
    assert data["score"] < FULL
    assert {c["status"] for c in data["checks"] if c["id"].startswith("split_heads")} == {"timeout"}
    deadline = time.monotonic() + 10
    while server.workers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.workers, "the zygote still has a child after grading ended"


def test_a_dead_zygote_is_replaced(server, tmp_path):
    os.killpg(server.proc.pid, 9)
    server.proc.wait()
    data = grade(server, authoring.SOLUTION)
    assert data["score"] == FULL
    assert server.alive()


def test_the_end_of_a_replaced_zygote_ends_only_its_own_workers(server, tmp_path):
    """The reader of a zygote that died may see its end only after the judge has started another
    one and forked from it: that late end must not mark the new zygote's workers dead."""
    import socket
    import threading

    worker = server.spawn(submit(tmp_path, "alive", REFERENCE), "attention.py", Limits())
    try:
        old_end, gone = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        gone.close()
        server._read(old_end, threading.Event(), threading.Event())  # a dead zygote's late reader
        assert worker.proc.poll() is None and worker.id in server.workers
    finally:
        worker.kill()


def test_cold_start_only_where_the_fork_server_cannot_isolate(monkeypatch):
    assert forkserver.supported("process") == "plain"
    monkeypatch.setattr(sandbox, "runs_as_root", lambda: False)
    assert forkserver.supported("bubblewrap") is None
    with pytest.raises(RuntimeError):
        forkserver.ForkServer("bubblewrap")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root + setpriv")
def test_namespace_probe_says_why_it_cannot():
    """Where a child cannot build its namespaces (here: an unprivileged uid), the zygote's start-up
    probe says why, and the judge falls back to cold workers instead of grading crashes."""
    runtime = sandbox.make_runtime_dir()
    spool = Path(tempfile.mkdtemp(prefix="attn-probe-"))  # pytest's tmp_path is root-only
    os.chmod(spool, 0o777)
    code = (f"import sys; sys.path.insert(0, {runtime!r}); import zygote; "
            f"print(zygote.probe_namespaces({str(spool)!r}))")
    try:
        result = subprocess.run([shutil.which("setpriv"), "--reuid=65534", "--regid=65534",
                                 "--clear-groups", "--", sys.executable, "-I", "-c", code],
                                capture_output=True, text=True, timeout=120)
        leftover = (spool / ".probe").exists()
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(spool, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert "unshare" in result.stdout and "None" not in result.stdout
    assert not leftover


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: namespaces are made as root")
def test_a_child_is_born_in_namespaces_of_its_own():
    """fork_into_namespaces: the child is PID 1 of a PID namespace of its own, in a mount, IPC
    and network namespace of its own, and the caller (its subreaper, past the middle process)
    reaps it and reads its own exit status."""
    runtime = sandbox.make_runtime_dir()
    code = f"""
import os, sys
sys.path.insert(0, {runtime!r})
import zygote
names = ("mnt", "ipc", "net")
mine = {{n: os.readlink(f"/proc/self/ns/{{n}}") for n in names}}
read_end, write_end = os.pipe()
pid = zygote.fork_into_namespaces()
if pid == 0:
    theirs = {{n: os.readlink(f"/proc/self/ns/{{n}}") for n in names}}
    moved = sorted(n for n in theirs if theirs[n] != mine[n])
    os.write(write_end, repr((os.getpid(), moved)).encode())
    os._exit(7)
os.close(write_end)
said = os.read(read_end, 1000).decode()
print(said, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), pid > 1)
"""
    try:
        result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True,
                                text=True, timeout=120)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["(1,", "['ipc',", "'mnt',", "'net'])", "7", "True"]


def test_a_forked_worker_runs_the_judges_own_text_and_needs_no_work_folder(server, tmp_path):
    """In its namespaces a child is handed a copy of the text the judge read at load, and the
    submission's work folder is never made; a plain child reads the folder itself."""
    from grader.judge.student import Student

    made = []

    def folder():
        made.append(True)
        return submit(tmp_path, f"folder{len(made)}", REFERENCE + "\nMARK = 'folder'\n")

    student = Student(folder, workers=forked(server), source=REFERENCE + "\nMARK = 'text'\n")
    try:
        student.start()
        mark = student.constants(["MARK"])["MARK"]
    finally:
        student.close()
    namespaces = server.mode == "namespaces"
    assert (mark, made) == (("text", []) if namespaces else ("folder", [True]))
    sub, student = grading.start(submit(tmp_path, "graded", REFERENCE), server.isolation, None,
                                 forked(server))
    assert grading.finish(sub, student)["score"] == FULL
    assert (sub._work_dir is None) == namespaces


def test_a_text_over_the_cap_never_reaches_the_spool(server):
    if server.mode != "namespaces":
        pytest.skip("the spool is the namespaces mode's (bubblewrap as root)")
    big = "x = 1\n" * (safefs.MAX_SOURCE_BYTES // 6 + 1)
    # an earlier test's worker may still be leaving: its folder goes when the zygote reports
    # its exit (ForkServer._read), so only a folder this spawn made would be a leak
    before = set(os.listdir(server.spool))
    with pytest.raises(sandbox.WorkerFailure, match="cannot be read"):
        server.spawn(lambda: pytest.fail("the folder was made"), "attention.py", Limits(),
                     source=lambda: big)
    assert set(os.listdir(server.spool)) <= before
    assert grade(server, authoring.SOLUTION)["score"] == FULL  # the zygote still serves
