"""The adversarial suite for the sandbox: each hostile submission is the reference plus one attack.

For every case, in each isolation mode (a judge-side case: on forked workers of each isolation,
see FORKED; one the worker's own code meets: one cold mode and the forked ones, WORKER_SIDE): grading finishes within a bound, the attack gains no point beyond what the honest
code earns (the reference part still scores), the other checks are still
scored, and nothing the attack started outlives the grading.  A case that the plain-subprocess
fallback cannot defend says so (skip with the reason) instead of pretending.
"""
import os
import socket
import subprocess
import threading
import time

import pytest

from grader.judge.student import RESERVE_SECONDS
from grader.judge.workers import forked
from grader.authoring import stubs as authoring
from grader.sandbox import forkserver, launch as sandbox
from grader.judge import grading
from grader.judge import service  # noqa: E402
from grader.render import report
from grader import rubric
from grader.sandbox.launch import Limits

import zygotes

# "fork-*": the same attack on a worker forked from a batch's warm zygote (grader/sandbox/runtime/zygote.py).
MODES = ["process", "fork-process"] + (["bubblewrap"] if sandbox.bubblewrap_works() else []) + \
    (["fork-bubblewrap"] if sandbox.bubblewrap_works() and forkserver.supported("bubblewrap") else [])
PLAIN = ("process", "fork-process")  # no sandbox: the cases they cannot defend are skipped
# The judge-side cases (the judge reads no file of the submission's and compares in its own
# process): whether a worker started cold or forked is no part of their defence, so they run on
# forked workers of each isolation only.  A worker-side case that a sandbox defends runs in every
# mode (but one that a harder case of its own proves where bubblewrap runs, said where it is);
# one that the worker's own code and its start's limits meet, the same in either sandbox (a
# thread left running, a flood of output, a memory hog, the environment: launch.WorkerProcess
# gives a cold worker the same rlimits, environment and capped pipes whether bubblewrap wraps it
# or not), runs in one cold mode and both forked ones (WORKER_SIDE, as docs/security.md's rule
# and test_hostile.py's).
FORKED = [mode for mode in MODES if mode.startswith("fork-")]
ONE_COLD = (["bubblewrap"] if "bubblewrap" in MODES else ["process"])
WORKER_SIDE = ONE_COLD + FORKED
REFERENCE = open(authoring.SOLUTION, encoding="utf-8").read()
MARK = "ATTN_SANDBOX_TEST_MARK"
FAST = Limits(call_seconds=5.0, submission_seconds=90.0)


def within_budget(data, limits):
    """The grader's own account of the time the student's code took stays inside the one budget
    (the last call may start just before the budget ends and run for one call's time; then the
    fast kinds' reserve)."""
    return data["metadata"]["student_seconds"] <= limits.submission_seconds + RESERVE_SECONDS + limits.call_seconds


def inject(at_import="", in_attend=""):
    """The reference with an attack at import time and/or at the top of attend."""
    source = REFERENCE
    if in_attend:
        body = "\n".join("    " + line for line in in_attend.strip().splitlines())
        source = source.replace('    ### BEGIN SOLUTION\n    # TODO: 分数', body +
                                '\n    ### BEGIN SOLUTION\n    # TODO: 分数', 1)
        assert body in source
    return source + "\n" + at_import.strip() + "\n"


def grade_source(tmp_path, source, mode, extra_files=None):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "attention.py").write_text(source, encoding="utf-8")
    for name, text in (extra_files or {}).items():
        (folder / name).write_text(text)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    if mode.startswith("fork-"):
        isolation = mode[len("fork-"):]
        sub, student = grading.start(str(folder), isolation, FAST, forked(zygotes.server(isolation)))
        data = grading.finish(sub, student)
        assert data["metadata"]["worker_start"] == "fork"
    else:
        data = service.grade(str(folder), isolation=mode, limits=FAST)
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert after == before, "the submission folder was written to"
    assert within_budget(data, FAST)
    return data


def statuses(data):
    return {c["id"]: c["status"] for c in data["checks"]}


def leftovers():
    """Processes still alive whose command line carries the test's mark."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if MARK.encode() in handle.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def assert_clean():
    deadline = time.monotonic() + 5
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == [], "processes started by the submission outlived the grading"


def assert_honest_part_scores(data):
    s = statuses(data)
    for check in ("split_heads.transpose", "merge_heads.round_trip", "quiz.q1_params"):
        assert s[check] == "passed", (check, s[check])


@pytest.mark.parametrize("mode", WORKER_SIDE)
def test_thread_that_keeps_running(tmp_path, mode):
    attack = "import threading, time\nthreading.Thread(target=lambda: [time.sleep(0.01) for _ in iter(int, 1)], daemon=False).start()"
    data = grade_source(tmp_path, inject(at_import=attack), mode)
    assert data["score"] == data["max_score"]


@pytest.mark.parametrize("mode", MODES)
def test_process_that_ignores_sigterm_is_gone(tmp_path, mode):
    if mode in PLAIN:
        pytest.skip("fallback cannot defend: a child that calls setsid() leaves the process group; "
                    "only bubblewrap's PID namespace guarantees it dies")
    attack = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)", "{MARK}"], start_new_session=True)
"""
    data = grade_source(tmp_path, inject(at_import=attack), mode)
    assert data["score"] == data["max_score"]
    assert_clean()


# Where bubblewrap runs it, the same child that also leaves the group (setsid) is the harder case
# (test_process_that_ignores_sigterm_is_gone: the PID namespace ends both): here the plain modes
@pytest.mark.parametrize("mode", PLAIN)
def test_child_in_the_process_group_is_gone(tmp_path, mode):
    attack = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)", "{MARK}"])
"""
    grade_source(tmp_path, inject(at_import=attack), mode)
    assert_clean()


@pytest.mark.parametrize("mode", MODES)
def test_fork_many_processes_is_bounded(tmp_path, mode):
    if mode in PLAIN and os.geteuid() == 0:
        pytest.skip("fallback cannot defend: RLIMIT_NPROC does not bind root; grade as a "
                    "non-root user or with bubblewrap")
    attack = f"""
import os, time
children = []
for _ in range(500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
FORKED = len(children)
"""
    data = grade_source(tmp_path, inject(at_import=attack), mode)
    assert data["checks"], "grading finished"
    assert_honest_part_scores(data)
    assert_clean()


@pytest.mark.parametrize("mode", WORKER_SIDE)
def test_200_mb_of_stdout(tmp_path, mode):
    attack = "import sys\nfor _ in range(200):\n    sys.stdout.write('x' * (1 << 20))\nsys.stdout.flush()"
    data = grade_source(tmp_path, inject(at_import=attack), mode)
    assert data["score"] == data["max_score"]
    assert len(data["metadata"]["student_output"]) <= 4000


@pytest.mark.parametrize("mode", WORKER_SIDE)
def test_memory_hog_is_stopped_by_the_limit(tmp_path, mode):
    attack = "import torch\nhog = torch.ones(6 * 1024 ** 3 // 4)\nhog += 1"
    data = grade_source(tmp_path, inject(in_attend=attack), mode)
    s = statuses(data)
    assert s["attend.scale"] != "passed" and s["split_heads.transpose"] == "passed"
    scale = next(c for c in data["checks"] if c["id"] == "attend.scale")
    assert scale["status"] == "error"
    assert [v["key"] for v in scale["verdicts"]] == ["memory_limit"]
    limit = f"{FAST.memory_bytes / 2 ** 30:g} GiB"
    assert report.feedback(rubric.load(), scale, "en").count(f"the memory limit of {limit}") == 1


@pytest.mark.parametrize("mode", FORKED)
def test_monkeypatching_builtins_and_torch_gains_nothing(tmp_path, mode):
    attack = """
import builtins, torch, torch.testing
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
builtins.isinstance = lambda *a, **k: True
builtins.len = lambda *a: 0
"""
    source = inject(at_import=attack).replace("/ math.sqrt(q.shape[-1])", "")  # plus a real bug
    data = grade_source(tmp_path, source, mode)
    # Breaking the worker's own builtins can only cost points: nothing that failed becomes passed.
    assert statuses(data)["attend.scale"] != "passed"
    assert data["score"] < data["max_score"]


# the judge ignores the files (forked workers), and bubblewrap keeps them from being written,
# cold and forked
@pytest.mark.parametrize("mode", [mode for mode in MODES if mode != "process"])
def test_fake_results_files_are_ignored(tmp_path, mode):
    attack = """
import json, os
fake = json.dumps({"score": 39, "max_score": 39, "tests": []})
for folder in (".", "..", "/tmp"):
    try:
        open(os.path.join(folder, "results.json"), "w").write(fake)
    except OSError:
        pass
print(fake)
"""
    source = inject(at_import=attack).replace("/ math.sqrt(q.shape[-1])", "")
    data = grade_source(tmp_path, source, mode)
    assert data["score"] < data["max_score"]
    assert not (tmp_path / "results.json").exists() or mode in PLAIN


@pytest.mark.parametrize("mode", FORKED)
def test_planted_conftest_and_pytest_ini_are_not_read(tmp_path, mode):
    conftest = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
                "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                "    outcome.get_result().outcome = 'passed'\n")
    source = REFERENCE.replace("/ math.sqrt(q.shape[-1])", "")
    data = grade_source(tmp_path, source, mode, {"conftest.py": conftest,
                                                 "pytest.ini": "[pytest]\naddopts = -p no:terminal\n"})
    assert statuses(data)["attend.scale"] == "failed"


@pytest.mark.parametrize("mode", MODES)
def test_search_for_the_reference_finds_nothing(tmp_path, mode):
    if mode in PLAIN:
        pytest.skip("fallback cannot defend: a plain subprocess reads whatever the grader's user "
                    "can read, the reference included")
    attack = """
import os
SECRETS = {"variants.py", "reference.py", "rubric.toml", "check_quiz_answers.py",
           "check_module_reference.py", "check_attend_reference.py", "attention.ipynb"}
FOUND = []
for root, dirs, files in os.walk("/"):
    if root.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    for name in files:
        path = os.path.join(root, name)
        if name in SECRETS or (name == "attention.py" and root != "/submission"):
            try:  # a library's own reference.py is no secret: look for the kit's markers
                text = open(path, errors="ignore").read()
            except OSError:
                continue
            if any(m in text for m in ("BEGIN SOLUTION", "ATTEND_VARIANTS", "quiz_hint_", "16384")):
                FOUND.append(path)
print("FOUND", FOUND)
Q1_SHAPE = tuple(FOUND) if FOUND else (1, 1, 3, 4)
"""
    data = grade_source(tmp_path, inject(at_import=attack), mode)
    assert statuses(data)["quiz.q1_shape"] == "passed", data["metadata"]["student_output"]


@pytest.mark.parametrize("mode", MODES)
def test_network_connection_fails(tmp_path, mode):
    from grader.sandbox.runtime import syscalls

    if mode in PLAIN and syscalls.program() is None:  # elsewhere the filter refuses new sockets
        pytest.skip("fallback cannot defend: a plain subprocess shares the host's network")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:
            pass
    listener = threading.Thread(target=accept)
    listener.start()
    attack = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"stolen")
    Q2_SHAPE_IS_ENOUGH = True
except OSError:
    pass
"""
    try:
        data = grade_source(tmp_path, inject(at_import=attack), mode)
    finally:
        listener.join()
        server.close()
    assert accepted == []
    assert data["score"] == data["max_score"]


@pytest.mark.parametrize("mode", WORKER_SIDE)
def test_worker_environment_is_minimal(tmp_path, mode):
    os.environ["ATTN_SECRET_TOKEN"] = "hunter2"
    os.environ["PYTHONPATH"] = "/nowhere"
    try:
        attack = """
import os, sys
leak = [k for k in os.environ if "SECRET" in k or "PROXY" in k.upper() or k == "PYTHONPATH"]
if leak or not sys.flags.isolated:
    raise SystemExit("leaked: " + ",".join(leak))
"""
        data = grade_source(tmp_path, inject(at_import=attack), mode)
    finally:
        del os.environ["ATTN_SECRET_TOKEN"], os.environ["PYTHONPATH"]
    assert data["score"] == data["max_score"]


def test_a_gpu_machines_worker_finds_its_driver(tmp_path, monkeypatch):
    """Where the machine has NVIDIA device nodes, the worker's environment also names where the
    driver is and which GPUs the grader was given, and bubblewrap shows a driver folder outside
    /usr read-only; without them, none of it (and nothing else of the judge's leaks in)."""
    driver, inside_usr = tmp_path / "nvidia" / "lib64", "/usr/lib"
    driver.mkdir(parents=True)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{driver}:{inside_usr}:relative/dir:/does/not/exist")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("ATTN_SECRET_TOKEN", "hunter2")
    monkeypatch.setattr(sandbox, "accelerator_nodes", lambda: ["/dev/nvidia0", "/dev/nvidiactl"])
    env = sandbox.minimal_env("/tmp")
    assert env["LD_LIBRARY_PATH"] == os.environ["LD_LIBRARY_PATH"]
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and "ATTN_SECRET_TOKEN" not in env
    assert sandbox.driver_folders() == sorted([str(driver), inside_usr])
    argv = sandbox.bubblewrap_argv(str(tmp_path), str(tmp_path))
    binds = {argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}
    assert str(driver) in binds and inside_usr not in binds  # /usr is shown whole
    assert ["--dev-bind", "/dev/nvidia0", "/dev/nvidia0"] == argv[argv.index("/dev/nvidia0") - 1:
                                                                  argv.index("/dev/nvidia0") + 2]
    monkeypatch.setattr(sandbox, "accelerator_nodes", lambda: [])
    env = sandbox.minimal_env("/tmp")
    assert "LD_LIBRARY_PATH" not in env and "CUDA_VISIBLE_DEVICES" not in env
    assert sandbox.driver_folders() == []


def test_require_sandbox_refuses_without_bubblewrap(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "bubblewrap_works", lambda: False)
    with pytest.raises(RuntimeError, match="bubblewrap"):
        sandbox.choose_isolation("bubblewrap")
    path = tmp_path / "attention.py"
    path.write_text(REFERENCE)
    empty = tmp_path / "bin"
    empty.mkdir()
    # A PATH without bwrap: the CLI must refuse with a one-line reason, not fall back silently.
    result = subprocess.run(
        [os.path.join(authoring.ROOT, ".venv", "bin", "python"), "-m", "grader", "grade",
         str(path), "--require-sandbox"], cwd=authoring.ROOT, capture_output=True, text=True,
        timeout=120, env={"PATH": str(empty)})
    assert result.returncode == 2 and "bubblewrap" in result.stderr and result.stdout == ""
