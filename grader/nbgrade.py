"""nbgrader for this exercise, with a grade it cannot be tricked into.

  python -m grader.nbgrade assignment      nbgrader generate_assignment in course/ (the gradebook)
  python -m grader.nbgrade release OUT     the student notebook, from a throw-away copy of the course
  python -m grader.nbgrade autograde       nbgrader autograde, then the sandboxed regrade + fix-up
  python -m grader.nbgrade regrade         only the regrade + fix-up (after an autograde)
  python -m grader.nbgrade feedback        nbgrader generate_feedback, then a scan for leaks
  (options: --course DIR, --timeout SECONDS per cell, --jobs N regrades at once)

Why a regrade.  In nbgrader the student's code and the tests share one kernel: a notebook can
replace the test helpers, monkeypatch torch, blank later cells with an input transformer, or kill
the kernel (`os._exit`), and nbgrader believes what the kernel printed.  So after `nbgrader
autograde`, every submitted notebook is graded again by the kit (grader.grading on the .ipynb, the
worker sandboxed, the judge in its own process), and where the two disagree on a check the kit's
score is written to the gradebook through nbgrader's API (`Grade.manual_score`; `auto_score` keeps
what the kernel claimed).  `regrade.md` / `regrade.json` in the course folder list the notebooks
that disagreed and why.  The autograded notebook's cells for those checks get the kit's feedback
as their output, so `generate_feedback` shows the grade that counts; a notebook whose kernel died
gets its submission and autograded notebook created from the regrade.
"""
import argparse
import concurrent.futures
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from .notebook import KIT_ROOT

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
COURSE = os.path.join(KIT_ROOT, "course")
ASSIGNMENT = "attention"
NOTEBOOK = "attention"  # attention.ipynb
EPSILON = 1e-6


def __getattr__(name):
    """`grader.nbgrade.KitClearSolutions`, built on first use (importing nbgrader is slow)."""
    if name == "KitClearSolutions":
        cls = _kit_clear_solutions()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def _kit_clear_solutions():
    from nbgrader.preprocessors import ClearSolutions

    from .authoring import BEGIN, make_stub

    class KitClearSolutions(ClearSolutions):
        """nbgrader's ClearSolutions, but a code cell's solution regions become the kit's stubs."""

        def _replace_solution_region(self, cell, language):
            if cell.cell_type != "code" or BEGIN not in cell.source:
                return super()._replace_solution_region(cell, language)
            cell.source = make_stub(cell.source).rstrip("\n")
            return True

    return KitClearSolutions


# ------------------------------------------------------------------------------------------------
# Running nbgrader


def nbgrader(args, course, env=None, log=None):
    """Run `nbgrader ARGS` in the course folder with this environment's interpreter."""
    environment = dict(os.environ)
    environment.update(env or {})
    # nbgrader runs `alembic` (beside this interpreter) when it creates a gradebook.
    bin_dir = os.path.dirname(sys.executable)
    environment["PATH"] = os.pathsep.join(p for p in (bin_dir, environment.get("PATH")) if p)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course,
                            env=environment, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = result.stdout.decode("utf-8", "replace")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"$ nbgrader {' '.join(args)}\n{output}\n")
    return result.returncode, output, time.monotonic() - started


def release_notebook(out_path):
    """The student notebook: nbgrader generate_assignment in a throw-away copy of the course."""
    from . import notebook

    with tempfile.TemporaryDirectory(prefix="attn-course-") as course:
        shutil.copyfile(os.path.join(COURSE, "nbgrader_config.py"),
                        os.path.join(course, "nbgrader_config.py"))
        source = os.path.join(course, "source", ASSIGNMENT, NOTEBOOK + ".ipynb")
        os.makedirs(os.path.dirname(source))
        with open(source, "w", encoding="utf-8") as handle:
            handle.write(notebook.dumps(notebook.build()))
        code, output, _ = nbgrader(["generate_assignment", ASSIGNMENT, "--force"], course,
                                   env={"ATTN_KIT_ROOT": KIT_ROOT})
        built = os.path.join(course, "release", ASSIGNMENT, NOTEBOOK + ".ipynb")
        if code != 0 or not os.path.exists(built):
            raise RuntimeError(f"nbgrader generate_assignment failed:\n{output[-3000:]}")
        with open(built, encoding="utf-8") as handle:
            data = json.load(handle)
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(notebook.dumps(data))
    return out_path


def generate_assignment(course=COURSE):
    code, output, seconds = nbgrader(["generate_assignment", ASSIGNMENT, "--force"], course)
    if code != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{output[-3000:]}")
    return seconds
