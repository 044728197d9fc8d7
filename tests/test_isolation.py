"""What keeps the worker's objects out of the student's reach (grader/sandbox/runtime/isolation.py).

The student's code runs on a thread of its own from a loop with empty globals; once
guard() is armed, an audit hook refuses the routes to the other threads' frames, the object
graph, ctypes and a function's code, and on the main thread every route to a frame.  The hook
cannot be removed, so each case runs in a fresh interpreter.  The event names are CPython's
(PEP 578's table): a Python upgrade that renames one breaks a case here.
"""
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "grader" / "sandbox" / "runtime"


def in_fresh_python(body):
    """Run `body` after `import isolation` and `run = isolation.runner()` in a new interpreter;
    its stdout's words."""
    script = (f"import sys\nsys.path.insert(0, {str(RUNTIME)!r})\n"
              "import isolation\nrun = isolation.runner()\n" + textwrap.dedent(body))
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_walk_of_frames_from_the_students_code_finds_nothing_of_the_caller():
    out = in_fresh_python("""
        import sys, traceback
        SECRET = object()

        def serving_loop(secret=SECRET):
            readers = {"describe": secret}
            return run(student_code)

        def student_code():
            below = [f for f, _ in traceback.walk_stack(sys._getframe())][1:]
            held = [v for f in below for v in list(f.f_locals.values()) + list(f.f_globals.values())]
            return (any(v is SECRET or isinstance(v, dict) and SECRET in v.values() for v in held)
                    or any(f.f_code.co_name == "serving_loop" for f in below),
                    below[-1].f_back is None)

        print(*serving_loop())
    """)
    assert out == ["False", "True"]


def test_run_returns_the_value_and_raises_the_students_exception_with_its_traceback():
    out = in_fresh_python("""
        import traceback
        def fails():
            raise KeyError("mine")
        print(run(divmod, (7, 2)) == (3, 1))
        try:
            run(fails)
        except KeyError as exc:
            names = [f.name for f in traceback.extract_tb(exc.__traceback__)]
            print("fails" in names)
    """)
    assert out == ["True", "True"]


def test_the_routes_are_refused_once_armed_and_counted():
    out = in_fresh_python("""
        import ctypes, gc, sys
        judging, refused = isolation.guard()

        def tries():
            said = []
            for route in (gc.get_objects, lambda: gc.get_referrers(sys), sys._current_frames,
                          lambda: ctypes.string_at(id(sys), 8),
                          lambda: setattr(tries, "__code__", tries.__code__)):
                try:
                    route()
                    said.append("open")
                except isolation.Refused:
                    said.append("refused")
            sys._getframe()  # its own frames: allowed on its thread
            return said

        print(*run(tries))
        try:
            sys._getframe()  # the worker's thread: no frame for code running here
            print("open")
        except isolation.Refused:
            print("refused")
        with judging:  # the worker's own read
            print(sys._getframe() is not None)
        print(",".join(sorted(set(refused()))))
    """)
    assert out[:5] == ["refused"] * 5
    assert out[5:7] == ["refused", "True"]
    assert out[7].split(",") == sorted({"gc.get_objects", "gc.get_referrers",
                                        "sys._current_frames", "ctypes.string_at",
                                        "object.__setattr__", "sys._getframe"})


def test_ordinary_code_meets_no_refusal():
    """What correct files and the libraries they import do on the student's thread: a named
    tuple, a dataclass, an enum, logging, warnings, numpy, torch forward and backward."""
    out = in_fresh_python("""
        import warnings
        import torch
        judging, refused = isolation.guard()

        def ordinary():
            import collections, dataclasses, enum, logging, typing
            import numpy
            P = collections.namedtuple("P", "a b", defaults=(0,))
            class N(typing.NamedTuple):
                a: int = 1
            @dataclasses.dataclass
            class C:
                x: int = 1
            class E(enum.Enum):
                A = 1
            logging.getLogger("x").info("hello")
            warnings.warn("w")
            block = torch.nn.Linear(3, 3)
            block(torch.from_numpy(numpy.ones(3, dtype="float32"))).sum().backward()
            return P(1).b, N().a, C().x, E.A.value

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            print(*run(ordinary))
        print(refused() == [])
    """)
    assert out == ["0", "1", "1", "1", "True"]
