"""How a kit process is set up and left: one compute thread, the garbage collector held while a
judge imports, and an exit without torch's teardown.

One compute thread wherever the kit runs torch (never a student's own kernel): every tensor the
kit computes is tiny, and a pool of threads only fights the other processes of a batch for the
cores.  Both settings are needed: the environment before torch is imported (OpenMP reads
OMP_NUM_THREADS once, as every thread's default), and torch.set_num_threads(1) on the computing
thread for a process that imported torch before the kit could set the environment.

The collector: automatic collections walking a judge's imports (torch, pytest, the checks) are
about a fifth of its start's CPU.  hold_gc stops them at a judge's entry; release_gc, once the
checks are collected, freezes what is alive (later collections never walk it) and turns the
collector back on.
"""
import contextlib
import gc
import os
import sys
import threading

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

_gc_lock = threading.Lock()
_gc_held = False


def pin_environment(env=None):
    """Set one compute thread in `env` (default: this process's environment, so call it before
    torch is imported); returns `env`, for a child process's environment."""
    env = os.environ if env is None else env
    env.update(ONE_THREAD)
    return env


def one_thread_here():
    """torch on one compute thread on the calling thread (and, once per process, its inter-op
    pool); returns the count the thread had before (the batch reports it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    # set already, or parallel work has begun: it can be set only once
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    return before


def hold_gc():
    """No automatic collection until release_gc() (nothing changes where it is off already)."""
    global _gc_held
    with _gc_lock:
        if not _gc_held and gc.isenabled():
            gc.disable()
            _gc_held = True


def release_gc():
    """Freeze what is alive and collect automatically again; a no-op unless hold_gc() held it."""
    global _gc_held
    with _gc_lock:
        if _gc_held:
            gc.freeze()
            gc.enable()
            _gc_held = False


def gc_held():
    return _gc_held


def run_judge(main):
    """A judge process's entry: one compute thread and the collector held before torch is
    imported, then main() and the exit without teardown."""
    pin_environment()
    hold_gc()  # until the judge's checks are collected
    exit_now(main())


def exit_now(code):
    """Leave a command without the interpreter's teardown of torch (about half a second, and it
    changes nothing): by then everything is written and every worker is gone."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
