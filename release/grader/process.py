"""How a kit process is set up and left: one compute thread, the garbage collector held while a
judge imports, and an exit without torch's teardown.

One compute thread wherever the kit runs torch (judges, workers, the zygote).  Every tensor the
kit computes is tiny: a pool of compute threads only wakes up, spins and fights the other
processes of a batch for the cores.  Two settings, both needed:

- the environment, before torch is imported (pin_environment): torch's OpenMP reads
  OMP_NUM_THREADS once, at load, as the default of *every* thread, including the threads the
  kit makes later (the check session runs pytest on a thread of its own, where a
  torch.set_num_threads(1) made on the main thread never applies: OpenMP keeps it per thread);
- torch.set_num_threads(1) on the thread that computes (one_thread_here), for a process where
  torch was imported before the kit could set the environment.

Workers get the same environment from launch.minimal_env.  A student's own notebook kernel is
never pinned: only the kit's processes are.

The garbage collector: a judge's start is imports (torch, pytest, the kit's checks: objects that
live as long as the process), and the automatic collections walking them again and again are
about a fifth of the start's CPU.  hold_gc stops them at the process's entry; release_gc comes
once the checks are collected, before any student's code is judged (or once a file that cannot
be graded has ended its grading, or the judge is closed): it moves every object alive to the
permanent generation (gc.freeze), which later collections never walk, and turns the collector
back on for what the gradings make.  Only the processes that start a judge hold it; a test
process that makes a Judge never does, so release_gc is a no-op there.  The worker and the fork
server do the same in worker.prepare (the sandbox's runtime imports nothing of the kit).
"""
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
    pool); returns the count the thread had before: what the environment gave it (1 where
    pin_environment came before torch; the batch reports it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # set already, or parallel work has begun: it can be set only once
        pass
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
