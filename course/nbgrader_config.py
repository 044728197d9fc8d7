"""nbgrader configuration of the course (nbgrader 0.9.6).  Run nbgrader from this folder, with the
kit's environment: `cd course && ../.venv/bin/nbgrader ...`, or use `make release`,
`make autograde`, `make feedback` from the repository root.

The kernel nbgrader starts is the `python3` kernel of the environment nbgrader runs from (its
kernel.json says `python`, which jupyter_client replaces with that environment's interpreter), so
running the venv's nbgrader is all it takes to grade with the project's torch.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The kit (the folder holding grader/); a copy of this course elsewhere says where it is.
KIT = os.environ.get("ATTN_KIT_ROOT") or os.path.dirname(HERE)

c = get_config()  # noqa: F821 (nbgrader provides it)
# nbgrader itself imports the kit's preprocessor; every kernel it starts inherits PYTHONPATH, so the
# notebooks' `from grader import notebook` works wherever the submission lies.
if KIT not in sys.path:
    sys.path.insert(0, KIT)
from grader.authoring.course import COURSE_ID  # noqa: E402

c.CourseDirectory.course_id = COURSE_ID
c.CourseDirectory.root = HERE
if KIT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (KIT, os.environ.get("PYTHONPATH")) if p)
if len(sys.argv) > 1 and sys.argv[1] == "autograde":
    # The notebook's inline check cells only point at the graded cells during autograde.
    os.environ["ATTN_KIT_AUTOGRADE"] = "1"

# A cell may run this long (nbgrader's default is 30 s); an endless loop costs one timeout a cell.
c.Execute.timeout = 20

# Solution regions become the kit's own stubs (grader/authoring/build.py make_stub), as in attention.py:
# functions raise NotImplementedError("... 尚未实现 / not implemented yet"), the check questions'
# answers become `NAME = None  # TODO`, and the `# TODO` hints stay.  Otherwise nbgrader's list.
c.GenerateAssignment.preprocessors = [
    "nbgrader.preprocessors.IncludeHeaderFooter",
    "nbgrader.preprocessors.InstantiateTests",
    "nbgrader.preprocessors.LockCells",
    "grader.authoring.course.KitClearSolutions",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.CheckCellMetadata",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.SaveCells",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.ClearMarkScheme",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Feedback: the hidden tests' lines are cut from the cells' source too (nbgrader 0.9.6 shows them
# by default); the cells' output is the kit's feedback, never a traceback through a check.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
