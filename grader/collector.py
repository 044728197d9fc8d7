"""Python's cyclic garbage collector held off while a judge process starts, then told to leave
everything it imported alone.

A judge's start is imports: torch, pytest, the kit's checks (~275,000 objects that live as long as
the process).  The collector runs on its own every 700 new objects and, every tenth and hundredth
time, walks all the older ones again: about a fifth of the start's CPU (measured: `import torch,
pytest` and the kit's judge modules took 1.56-1.91 s of CPU with it, 1.20-1.32 s without).

`hold` stops the automatic collections at the process's entry (beside threads.pin_environment);
`release` comes once the checks are collected, before any student's code is judged (or once a
file that cannot be graded has ended its grading, or the judge is closed): it moves
every object alive to the permanent generation (`gc.freeze`), which later collections never walk,
and turns the collector back on for what the gradings make.  No collection comes first: it would
cost 0.16 s to free ~7,000 objects (no resident memory measurably), which stay, frozen.

Only the processes that start a judge hold it (grade, check, watch, hint, submit, the batch's
judges, the notebook kernel's judge, Gradescope's); a test process that makes a Judge never
does, so release() is a no-op there.  The worker and the fork server do the same in
worker.prepare (the sandbox's runtime imports nothing of the kit).
"""
import gc
import threading

_lock = threading.Lock()
_holding = False


def hold():
    """No automatic collection until release() (nothing changes where it is off already)."""
    global _holding
    with _lock:
        if not _holding and gc.isenabled():
            gc.disable()
            _holding = True


def release():
    """Freeze what is alive and collect automatically again; a no-op unless hold() held it."""
    global _holding
    with _lock:
        if _holding:
            gc.freeze()
            gc.enable()
            _holding = False


def holding():
    return _holding
