"""The nbgrader course of this exercise: where it lives, its names and gradebook, and how it is
built (the kit's ClearSolutions, `nbgrader generate_assignment`, the student notebook)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from grader import paths
from grader.authoring import notebook_build

KIT_ROOT = paths.KIT_ROOT
COURSE = os.path.join(KIT_ROOT, "course")
COURSE_ID = "lesson12-attention"  # read by course/nbgrader_config.py
ASSIGNMENT = "attention"
NOTEBOOK = "attention"  # attention.ipynb


def db_url(course):
    return "sqlite:///" + os.path.join(os.path.abspath(course), "gradebook.db")


def __getattr__(name):
    """`grader.authoring.course.KitClearSolutions`, built on first use (importing nbgrader is slow)."""
    if name != "KitClearSolutions":
        raise AttributeError(name)
    from nbgrader.preprocessors import ClearSolutions

    from grader.authoring.stubs import BEGIN, make_stub

    class KitClearSolutions(ClearSolutions):
        """nbgrader's ClearSolutions, but a code cell's solution regions become the kit's stubs."""

        def _replace_solution_region(self, cell, language):
            if cell.cell_type != "code" or BEGIN not in cell.source:
                return super()._replace_solution_region(cell, language)
            cell.source = make_stub(cell.source).rstrip("\n")
            return True

    globals()[name] = KitClearSolutions
    return KitClearSolutions


def nbgrader(args, course, log=None, must=False):
    """Run `nbgrader ARGS` in the course folder with this interpreter: (exit code, output,
    seconds), its output appended to `log`; `must`: a RuntimeError where it fails."""
    environment = dict(os.environ)
    environment["ATTN_KIT_ROOT"] = KIT_ROOT  # the course config finds the kit from any folder
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
    if must and result.returncode != 0:
        raise RuntimeError(f"nbgrader {args[0]} failed:\n{output[-3000:]}")
    return result.returncode, output, time.monotonic() - started


def new_course(course):
    """A course folder with the kit's config and source notebook, after the real `nbgrader
    generate_assignment`; returns the released (student) notebook as a dict."""
    shutil.copyfile(os.path.join(COURSE, "nbgrader_config.py"),
                    os.path.join(course, "nbgrader_config.py"))
    source = os.path.join(course, "source", ASSIGNMENT, NOTEBOOK + ".ipynb")
    os.makedirs(os.path.dirname(source))
    with open(source, "w", encoding="utf-8") as handle:
        handle.write(notebook_build.dumps(notebook_build.build()))
    generate_assignment(course)
    built = os.path.join(course, "release", ASSIGNMENT, NOTEBOOK + ".ipynb")
    with open(built, encoding="utf-8") as handle:
        return json.load(handle)


def release_notebook(out_path):
    """The student notebook: nbgrader generate_assignment in a throw-away copy of the course."""
    with tempfile.TemporaryDirectory(prefix="attn-course-") as course:
        data = new_course(course)
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(notebook_build.dumps(data))
    return out_path


def generate_assignment(course=COURSE):
    return nbgrader(["generate_assignment", ASSIGNMENT, "--force"], course, must=True)[2]


def assignment_known(course=COURSE):
    """Does the course's gradebook hold the assignment (generate_assignment has run)?"""
    if not os.path.exists(os.path.join(course, "gradebook.db")):
        return False
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url(course), COURSE_ID) as gb:
        try:
            gb.find_assignment(ASSIGNMENT)
        except MissingEntry:
            return False
    return True
