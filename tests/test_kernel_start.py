"""A notebook kernel beside the kit starts the kit's judge as it starts (grader/tools/
ipython_kernel_config.py, which `make setup` copies into the venv's etc/ipython/), before any
cell runs; the first cell's `%load_ext` then finds that judge, and the kernel's end ends it.
Anywhere else a kernel starts no judge, and importing the file starts nothing."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from grader import paths

ROOT = paths.KIT_ROOT
SOURCE = os.path.join(paths.GRADER, "tools", "ipython_kernel_config.py")
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


def test_the_venv_holds_the_kits_kernel_config():
    """`make setup` copied it (the tests run from the venv it made)."""
    installed = os.path.join(sys.prefix, "etc", "ipython", "ipython_kernel_config.py")
    with open(SOURCE, encoding="utf-8") as source, open(installed, encoding="utf-8") as copy:
        assert copy.read() == source.read()


def test_a_kernel_beside_the_kit_has_its_judge_before_the_first_cell(kernel_in):
    manager, client = kernel_in(os.path.join(ROOT, "release"))  # the student bundle's kit
    pid = manager.provisioner.process.pid
    judges = judges_of(pid)
    assert len(judges) == 1, children(pid)  # no cell has run yet
    said, error = run_cell(client, "%load_ext grader.notebook\n"
                                   "import json\nfrom grader import notebook as kit\n"
                                   "judge = kit.kernel_judge()\n"
                                   "print(json.dumps([judge.starts, judge.process.pid]))")
    assert error is None, said
    # The first cell found the judge the kernel started: one start, the same process.
    assert json.loads(said) == [1, judges[0]]
    said, error = run_cell(client, "report = kit.judge(open('attention.py').read(), hidden=False)\n"
                                   "print(len(report.get('checks', [])))")
    assert error is None and int(said) > 0, said  # it grades (the stub, here)
    client.stop_channels()
    manager.shutdown_kernel(now=False)  # the kernel ends: its judge's stdin closes, it ends too
    assert gone(judges[0])


def test_a_kernel_elsewhere_starts_no_judge(kernel_in, tmp_path):
    (tmp_path / "grader").mkdir()  # a folder named grader is not the kit
    manager, client = kernel_in(tmp_path)
    said, error = run_cell(client, "print('ok')")
    assert (said, error) == ("ok\n", None)
    assert judges_of(manager.provisioner.process.pid) == []


def test_a_kernel_whose_kit_fails_to_import_still_starts(kernel_in, tmp_path, capfd):
    """A kit folder whose notebook helpers cannot be imported: the kernel starts and says why
    on its log (its stderr); the first cell would start the judge (here it cannot either)."""
    shutil.copytree(os.path.join(ROOT, "release", "grader"), tmp_path / "grader")
    (tmp_path / "grader" / "tools" / "notebook.py").write_text("raise RuntimeError('broken')\n",
                                                               encoding="utf-8")
    manager, client = kernel_in(tmp_path)
    said, error = run_cell(client, "print('ok')")
    assert (said, error) == ("ok\n", None)
    assert judges_of(manager.provisioner.process.pid) == []
    assert "the exercise kit's judge did not start with the kernel (RuntimeError: broken)" \
        in capfd.readouterr().err


def test_importing_the_config_starts_nothing():
    """Outside IPython's config loading (no get_config()), the file does nothing."""
    code = ("import grader.tools.ipython_kernel_config\n"
            "from grader.tools import notebook\n"
            "assert notebook._kernel_judge is None\nprint('nothing')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "nothing\n", done.stderr


def test_the_bundles_notebook_setup_installs_it(tmp_path):
    """The student bundle's `make notebook-setup` copies it into the bundle's venv."""
    bundle = tmp_path / "bundle"
    shutil.copytree(os.path.join(ROOT, "release"), bundle)
    (bundle / ".venv").mkdir()
    for made in (".installed", ".notebook", ".bytecode"):
        (bundle / ".venv" / made).touch()
    done = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed",
                           "-o", ".venv/.notebook", "-o", ".venv/.bytecode", "notebook-setup"],
                          cwd=bundle, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    copied = bundle / ".venv" / "etc" / "ipython" / "ipython_kernel_config.py"
    with open(SOURCE, encoding="utf-8") as source:
        assert copied.read_text(encoding="utf-8") == source.read()
