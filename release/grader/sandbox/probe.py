"""Whether bubblewrap works here: one `bwrap ... true`, tried once per process and remembered
(installed is not enough: the kernel may refuse it the namespaces it needs).

A module of its own, importing next to nothing, so that `python -m grader` can start the probe
before its own imports (grader/__main__.py): it takes ~10 ms of a process of its own, and a
worker's start waits for its answer.
"""
import shutil
import subprocess

_probe_cache, _probe_running = {}, {}
PROBE_SECONDS = 10


def bubblewrap_path():
    return shutil.which("bwrap")


def start_probe():
    """Start trying bwrap now, in the background: a command that will start a worker calls this
    first, so the answer is ready when bubblewrap_works asks, instead of the worker's start
    waiting for it."""
    path = bubblewrap_path()
    if path is None or path in _probe_cache or path in _probe_running:
        return
    try:
        _probe_running[path] = subprocess.Popen(
            [path, "--unshare-all", "--ro-bind", "/", "/", "true"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        _probe_cache[path] = False


def bubblewrap_works():
    """bwrap may be installed but refused by the kernel (no user namespaces): try it once."""
    path = bubblewrap_path()
    if path is None:
        return False
    if path not in _probe_cache:
        start_probe()
        probe = _probe_running.pop(path, None)
        if probe is not None:
            try:
                _probe_cache[path] = probe.wait(timeout=PROBE_SECONDS) == 0
            except subprocess.TimeoutExpired:
                probe.kill()
                probe.wait()
                _probe_cache[path] = False
    return _probe_cache[path]
