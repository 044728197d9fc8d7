"""A notebook kernel's judge: none while the kernel starts and runs cells of its own; the kit's
cell (`%load_ext grader.notebook`) starts one, every grading of the kernel goes to it, and the
kernel's end ends it."""
import json
import os
import sys
import time

import pytest

from grader import paths

ROOT = paths.KIT_ROOT
JUDGE = "grader.tools.kernel_judge"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads the kernel's children in /proc")


def children(pid):
    """{child pid: its command line} of a process, from /proc."""
    found = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                kids = [int(p) for p in handle.read().split()]
        except OSError:
            continue
        for kid in kids:
            try:
                with open(f"/proc/{kid}/cmdline", "rb") as handle:
                    found[kid] = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                pass
    return found


def judges_of(pid):
    return [kid for kid, command in children(pid).items() if JUDGE in command]


def gone(pid, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def run_cell(client, code):
    """The cell's stdout, and its error's name (or None)."""
    said, error = [], []

    def hook(message):
        content = message["content"]
        if message["msg_type"] == "stream" and content["name"] == "stdout":
            said.append(content["text"])
        elif message["msg_type"] == "error":
            error.append(content["ename"])
    client.execute_interactive(code, output_hook=hook, timeout=120)
    return "".join(said), (error or [None])[0]


@pytest.fixture
def kernel_in(monkeypatch):
    """kernel_in(folder) -> (manager, client) of a fresh python3 kernel of this venv, started
    in `folder` with the environment a student's JupyterLab gives it."""
    from jupyter_client.manager import KernelManager

    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("ATTN_KIT_AUTOGRADE", raising=False)
    started = []

    def start(folder):
        manager = KernelManager(kernel_name="python3")
        manager.start_kernel(cwd=str(folder))
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        started.append((manager, client))
        return manager, client
    yield start
    for manager, client in started:
        client.stop_channels()
        if manager.is_alive():
            manager.shutdown_kernel(now=False)


def test_the_kit_cell_starts_the_judge_and_the_kernels_end_ends_it(kernel_in):
    manager, client = kernel_in(ROOT)
    pid = manager.provisioner.process.pid
    said, error = run_cell(client, "print('ok')")
    assert (said, error) == ("ok\n", None)
    assert judges_of(pid) == [], children(pid)  # a kernel of its own: no judge
    said, error = run_cell(client, "%load_ext grader.notebook\n"
                                   "import json\nfrom grader import notebook as kit\n"
                                   "judge = kit.kernel_judge()\n"
                                   "report = kit.judge(open('exercises/attention.py').read(), "
                                   "hidden=False)\n"
                                   "print(json.dumps([judge.starts, judge.process.pid, "
                                   "len(report.get('checks', []))]))")
    assert error is None, said
    starts, judge_pid, checks = json.loads(said)
    assert starts == 1 and judges_of(pid) == [judge_pid] and checks > 0  # it grades the stub
    client.stop_channels()
    manager.shutdown_kernel(now=False)  # the kernel ends: its judge's stdin closes, it ends too
    assert gone(judge_pid)
