"""python -m grader.tools.bytecode: the kit's bytecode, written once for every later run to read.

Where PYTHONDONTWRITEBYTECODE is set (this project's machines, CI, many Docker images), Python
never keeps what it compiles, so every run of the kit compiled its modules from source again:
the judge's own imports (~45 ms of CPU), pytest's rewrite of the check files (~40 ms) and each
cold worker's runtime modules (~10 ms: its folder is a fresh copy it may not write to,
launch.make_runtime_dir).  `make setup` runs this after any of the kit's sources changed, as pip
compiles a package it installs; nothing else writes bytecode where the user said not to.  Stale
bytecode costs nothing but the time: Python checks it against its source and compiles over it.

It also keeps the methods dataclasses writes while torch and the checks are imported, compiled
(grader/sandbox/runtime/quickimport.py), for the workers and the judges to read at their start.
"""
import compileall
import sys

from grader import paths
from grader.sandbox.runtime import quickimport


def write():
    """Compile every module of the package, then import what a worker and a judge import at their
    start and collect the checks once with bytecode writing on, so that pytest keeps its
    rewritten checks beside them and dataclasses' methods are kept (keep_methods); True where all
    went well."""
    compiled = compileall.compile_dir(paths.GRADER, quiet=1)
    sys.dont_write_bytecode = False  # only in this process: pytest writes its rewrite only then
    quickimport.begin()
    try:
        from grader.sandbox.runtime import contract, copytask, placement  # noqa: F401 (the worker's)

        placement.warm_meta()  # meta's kernels: the worker loads them before the student's file
        from grader.judge import runner

        session = runner.CheckSession()
        try:  # collected once the session waits for a student; a session that failed has ended
            while not session.ready.wait(0.1) and session.thread.is_alive():
                pass
            collected = session.ready.is_set()
        finally:
            session.close()
    finally:
        methods = quickimport.end()
    return bool(compiled) and collected and keep_methods(methods)


def keep_methods(methods, path=quickimport.CODEGEN):
    """Write `methods` ({text: code}) where the kit's processes read them, unless that file holds
    them already; False (and a line on stderr) where it cannot be written: only time is lost."""
    if quickimport.load(path) == methods:
        return True
    try:
        quickimport.save(methods, path)
    except OSError as exc:
        print(f"dataclasses' methods not kept ({exc}): each start compiles them", file=sys.stderr)
        return False
    return True


if __name__ == "__main__":
    sys.exit(0 if write() else 1)
