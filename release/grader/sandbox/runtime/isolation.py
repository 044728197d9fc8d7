"""Keeps what the worker reads out of the reach of the student's code, inside its own process.

The student's code runs on a thread of its own (runner()) whose stack starts at a loop with empty
globals, so a walk of frames from the student's code ends there.  An audit hook (PEP 578, which
no code can remove), armed by guard() before the student's import, refuses the other routes: on
every thread another thread's frames, the object graph, ctypes and rewriting a function's code;
on the main thread (where student code runs only as a hook a reader touches: a property,
__del__) every route to a frame as well.  The worker's own reads of frames are made inside
judging, on the main thread.  Each refusal is counted and read by the judge as tampering.
"""
import queue
import sys
import threading
import types

# Refused on every thread once the student's import has begun.
ANYWHERE = frozenset({"sys._current_frames", "sys._current_exceptions", "gc.get_objects",
                      "gc.get_referrers", "gc.get_referents"})
# Refused on the main thread as well: every way to its frames (object.__getattr__ is audited
# for tb_frame, gi_frame, f_code and their kin only).
ON_MAIN = ANYWHERE | {"sys._getframe", "sys._getframemodulename", "object.__getattr__",
                      "sys.settrace", "sys.setprofile"}
# ctypes is audited for every foreign call, cast and address.
PREFIXES = ("ctypes.",)
# object.__setattr__ is audited for a class's attributes too (a dataclass sets them): refused only
# where it rewrites a function's code, which may be the worker's.
REWRITES = frozenset({"__code__"})


class Refused(RuntimeError):
    """What the student's code meets on a route into the worker."""


def _serve_student(jobs):
    while True:
        fn, args, kwargs, contexts, box, done = jobs.get()
        entered = []
        try:
            for context in contexts:
                context.__enter__()
                entered.append(context)
            box.append((True, fn(*args, **kwargs)))
        except BaseException as exc:
            box.append((False, exc))
        finally:
            for context in reversed(entered):
                context.__exit__(None, None, None)
            done.set()
            fn = args = kwargs = contexts = box = done = entered = exc = None


# The bottom of the student's stack: globals of its own, with nothing in them.
SERVE_STUDENT = types.FunctionType(
    _serve_student.__code__,
    {"__builtins__": {"BaseException": BaseException, "reversed": reversed}}, "student_thread")


class Guard:
    """The audit hook's state: the worker's thread, whether it reads frames itself (entered as a
    context manager: judging), and the refusals so far."""

    def __init__(self):
        self.main = threading.get_ident()
        self.judging = False
        self.refused = []

    def __enter__(self):
        self.judging = True

    def __exit__(self, *exc):
        self.judging = False

    # Bound as defaults: rebinding this module's globals from the student's code changes nothing.
    def hook(self, event, args, get_ident=threading.get_ident, startswith=str.startswith,
             anywhere=ANYWHERE, on_main_too=ON_MAIN, prefixes=PREFIXES, rewrites=REWRITES,
             refused=Refused):
        on_main = get_ident() == self.main
        if on_main and self.judging:
            return
        if event in (on_main_too if on_main else anywhere) or startswith(event, prefixes) \
                or (event == "object.__setattr__" and len(args) > 1 and args[1] in rewrites):
            if len(self.refused) < 64:
                self.refused.append(event)
            raise refused(f"{event}: the grading process is not reachable from your code")


def guard():
    """Install and arm the hook; (judging, refused): a context manager for the worker's own reads
    of frames, and a function returning the refusals so far (event names)."""
    state = Guard()
    sys.addaudithook(state.hook)
    return state, lambda: list(state.refused)


def runner(thread=threading.Thread, queue=queue.SimpleQueue, event=threading.Event,
           refused=Refused):
    """run(fn, args, kwargs, contexts, on_wait, tick): fn(*args, **kwargs) on the student's thread,
    started now (before the student's code can fill the process limit), inside `contexts`
    entered there (grad and dispatch modes are per thread); its value, or its exception raised
    here.  While it runs, on_wait(ident) is called every `tick` seconds."""
    jobs = queue()
    student = thread(target=SERVE_STUDENT, args=(jobs,), name="student", daemon=True)
    student.start()

    def run(fn, args=(), kwargs=None, contexts=(), on_wait=None, tick=0.5):
        box, done = [], event()
        jobs.put((fn, tuple(args), dict(kwargs or {}), tuple(contexts), box, done))
        while not done.wait(tick):
            if on_wait is not None:
                on_wait(student.ident)
        if not box:
            raise refused("the call ended without an answer")
        ok, value = box.pop()
        if not ok:
            raise value
        return value

    return run
