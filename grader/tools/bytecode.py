"""python -m grader.tools.bytecode: the kit's bytecode, written once for every later run to read.

Where PYTHONDONTWRITEBYTECODE is set (this project's machines, CI, many Docker images), Python
never keeps what it compiles, so every run of the kit compiled its modules from source again:
the judge's own imports (~45 ms of CPU), pytest's rewrite of the check files (~40 ms) and each
cold worker's runtime modules (~10 ms: its folder is a fresh copy it may not write to,
launch.make_runtime_dir).  `make setup` runs this after any of the kit's sources changed, as pip
compiles a package it installs; nothing else writes bytecode where the user said not to.  Stale
bytecode costs nothing but the time: Python checks it against its source and compiles over it.
"""
import compileall
import sys

from grader import paths


def write():
    """Compile every module of the package, then collect the checks once with bytecode writing
    on, so that pytest keeps its rewritten checks beside them; True where all went well."""
    compiled = compileall.compile_dir(paths.GRADER, quiet=1)
    sys.dont_write_bytecode = False  # only in this process: pytest writes its rewrite only then
    from grader.judge import runner

    session = runner.CheckSession()
    try:  # collected once the session waits for a student; a session that failed has ended
        while not session.ready.wait(0.1) and session.thread.is_alive():
            pass
        collected = session.ready.is_set()
    finally:
        session.close()
    return bool(compiled) and collected


if __name__ == "__main__":
    sys.exit(0 if write() else 1)
