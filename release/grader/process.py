"""How a kit process is set up and left: one compute thread, the garbage collector held while a
judge imports, and an exit without torch's teardown.

One compute thread wherever the kit runs torch (never a student's own kernel): its tensors are
tiny, and a pool only fights a batch's other processes for the cores.  Both settings are needed:
the environment before torch is imported (OpenMP reads it once), and torch.set_num_threads(1) on
the computing thread for a process that imported torch first.

The collector: collections walking a judge's imports are about a fifth of its start's CPU.
hold_gc stops them at a judge's entry; release_gc, once the checks are collected, freezes what is
alive and turns the collector back on.
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
    """Set one compute thread in `env` (default: this process's, before torch is imported)."""
    env = os.environ if env is None else env
    env.update(ONE_THREAD)
    return env


def one_thread_here():
    """torch on one compute thread here (and its inter-op pool); returns the count before."""
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
    """A judge process's entry: pin_environment and hold_gc, then main() and exit_now."""
    pin_environment()
    hold_gc()  # until the judge's checks are collected
    exit_now(main())


def exit_now(code):
    """Leave without the interpreter's teardown of torch (about half a second, changing nothing)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
