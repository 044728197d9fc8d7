"""The student bundle (release/): the stub, the public checks, the grader runtime and the student
tools, the templates (Makefile, README, workflow) and the student notebook; never the reference,
the variants, a hidden check, the batch or the instructor's tools."""
import os
import shutil

from grader import paths
from grader.authoring import course
from grader.authoring.stubs import SOLUTION, make_stub

ROOT = paths.KIT_ROOT
RELEASE = os.path.join(ROOT, "release")
RELEASE_TEMPLATES = os.path.join(paths.GRADER, "authoring", "release_templates")
# The student bundle takes all of grader/ but these folders and files: the reference and its
# variants, the hidden checks, the batch, the instructor's tools and the authoring package stay
# behind, and so do the batch's own renderers (a student's doors never draw a class page).
NOT_RELEASED = ("judge/secret", "judge/checks/hidden", "batch", "instructor", "authoring",
                "render/feedback_html.py", "render/student_markdown.py")


def released_grader_files():
    """Paths under grader/ that ship to students: every source file outside NOT_RELEASED."""
    found = []
    for root, dirs, names in os.walk(paths.GRADER):
        rel_root = os.path.relpath(root, paths.GRADER).replace(os.sep, "/")

        def kept(name):
            return (name if rel_root == "." else f"{rel_root}/{name}") not in NOT_RELEASED

        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and kept(d))
        found += [os.path.normpath(os.path.join(rel_root, n)) for n in sorted(names)
                  if n.endswith((".py", ".toml", ".ini")) and kept(n)]
    return sorted(found)


def build_release(out=RELEASE):
    """Write the student bundle to `out` (replacing it); the result is deterministic."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with open(SOLUTION, encoding="utf-8") as handle:
        stub = make_stub(handle.read())
    with open(os.path.join(out, "attention.py"), "w", encoding="utf-8") as handle:
        handle.write(stub)
    for rel in released_grader_files():
        target = os.path.join(out, "grader", rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(paths.GRADER, rel), target)
    # Makefile, README.md, .gitignore, .github/workflows/
    shutil.copytree(RELEASE_TEMPLATES, out, dirs_exist_ok=True, copy_function=shutil.copyfile)
    for name in ("requirements.txt", "requirements-notebook.txt"):  # never the instructor's
        shutil.copyfile(os.path.join(ROOT, name), os.path.join(out, name))
    # The lesson's demos (make demo), run on the student's own attention.py.
    os.makedirs(os.path.join(out, "exercises"))
    shutil.copyfile(os.path.join(ROOT, "exercises", "demo.py"),
                    os.path.join(out, "exercises", "demo.py"))
    # The student notebook, as the real `nbgrader generate_assignment` writes it.
    course.release_notebook(os.path.join(out, "attention.ipynb"))
    return out
