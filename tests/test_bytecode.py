"""The kit's bytecode (grader/tools/bytecode.py): written by `make setup`, read by every later run,
including a cold worker's fresh copy of the runtime, where PYTHONDONTWRITEBYTECODE is set."""
import glob
import os
import shutil
import subprocess
import sys

import pytest

from grader import paths
from grader.sandbox import launch

PY = sys.executable


@pytest.fixture(scope="module")
def written():
    """grader.tools.bytecode run as `make setup` runs it (its own process: it turns bytecode
    writing on for itself)."""
    done = subprocess.run([PY, "-m", "grader.tools.bytecode"], cwd=paths.KIT_ROOT,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def loaded_from(folder, module):
    """What `python -v` says of importing `module` from `folder` with bytecode writing off."""
    done = subprocess.run([PY, "-I", "-v", "-c", f"import sys; sys.path.insert(0, {folder!r}); "
                           f"import {module}"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_every_check_file_keeps_pytests_rewrite(written):
    checks = glob.glob(os.path.join(paths.CHECKS, "*", "check_*.py"))
    assert checks
    for check in checks:
        folder, name = os.path.split(check)
        kept = glob.glob(os.path.join(folder, "__pycache__", name[:-3] + ".*-pytest-*.pyc"))
        assert kept, check


def test_a_cold_workers_runtime_copy_reads_the_kits_bytecode(written):
    runtime = launch.make_runtime_dir()
    try:
        said = loaded_from(runtime, "wire")
        assert f"code object from '{runtime}/__pycache__/wire." in said, said[-2000:]
        assert "bytecode is stale" not in said
    finally:
        shutil.rmtree(runtime)


def test_stale_bytecode_in_the_copy_is_compiled_over_not_run(written):
    """A source newer than its bytecode (edited after `make setup`): Python refuses the old code
    and compiles the source, so the copy always runs what the kit's source says."""
    runtime = launch.make_runtime_dir()
    try:
        source = os.path.join(runtime, "facts.py")
        with open(source, "a", encoding="utf-8") as handle:
            handle.write("\nEDITED_AFTER_SETUP = True\n")
        said = loaded_from(runtime, "facts")
        assert "bytecode is stale" in said or f"code object from '{runtime}" not in said
        done = subprocess.run([PY, "-I", "-c", f"import sys; sys.path.insert(0, {runtime!r}); "
                               "import facts; print(facts.EDITED_AFTER_SETUP)"],
                              capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
        assert done.stdout.strip() == "True", done.stderr
    finally:
        shutil.rmtree(runtime)


def test_a_workers_start_finds_every_method_dataclasses_writes_kept(written):
    """What `make setup` keeps (grader/sandbox/runtime/quickimport.py) covers a worker's whole
    start, torch's import and meta's kernels: not one of its methods is compiled again."""
    import bench

    ran, compiled = bench.worker_start_methods(PY, env={
        "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"})
    assert ran > 300 and compiled == 0
