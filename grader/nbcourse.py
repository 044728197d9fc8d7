"""The nbgrader course of this exercise: where it lives, the names nbgrader knows it by, and its
gradebook.  Shared by grader.nbgrade (running nbgrader), grader.nbregrade (the sandboxed regrade
and the gradebook fix-up) and grader.nbfeedback (the notebooks generate_feedback renders)."""
import os

from .notebook import KIT_ROOT

COURSE = os.path.join(KIT_ROOT, "course")
COURSE_ID = "lesson12-attention"
ASSIGNMENT = "attention"
NOTEBOOK = "attention"  # attention.ipynb


def db_url(course):
    return "sqlite:///" + os.path.join(os.path.abspath(course), "gradebook.db")
