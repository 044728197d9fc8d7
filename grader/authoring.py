"""Instructor tools: generate the student stub from the reference, and write release/.

  python -m grader.authoring stubs     solutions/attention.py -> exercises/attention.py
  python -m grader.authoring release   [OUT]  the student bundle (default: release/)

The stub keeps every signature, docstring and `# TODO` line of the reference; the code between
`### BEGIN SOLUTION` and `### END SOLUTION` becomes `raise NotImplementedError(...)` (or
`NAME = None` for module-level answers).  The release holds the stub, the public checks and the
grader runtime, and never the reference, the variants or a hidden check.
"""
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION = os.path.join(ROOT, "solutions", "attention.py")
EXERCISE = os.path.join(ROOT, "exercises", "attention.py")
RELEASE = os.path.join(ROOT, "release")
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
DEF_LINE = re.compile(r"^\s*(?:def|class)\s+(\w+)")
ASSIGNMENT = re.compile(r"^(\w+)\s*=")

# What the student bundle takes from grader/: the runtime and the public checks, nothing else.
RELEASE_GRADER_FILES = [
    "__init__.py", "__main__.py", "grading.py", "runner.py", "report.py", "rubric.py",
    "rubric.toml", "sandbox.py", "student.py", "submission.py", "wire.py", "worker.py",
    "copytask.py", "watch.py", "hints.py", "submit.py", "manifest.py", "statefile.py",
    "checks/__init__.py", "checks/support.py", "checks/pytest.ini",
    "checks/public/__init__.py", "checks/public/test_split_heads.py",
    "checks/public/test_merge_heads.py", "checks/public/test_attend.py",
    "checks/public/test_module.py", "checks/public/test_quiz.py",
    "notebook.py",  # the notebook's inline checks (kit.check) and autograder cells
]
RELEASE_TEMPLATES = os.path.join(ROOT, "grader", "release_templates")


def make_stub(source):
    """The reference with each solution block replaced by a stub."""
    out, block, name, owner = [], None, "code", ""
    for line in source.splitlines():
        stripped = line.strip()
        match = DEF_LINE.match(line)
        if match and block is None:
            if stripped.startswith("class"):
                owner = name = match.group(1)
            else:  # a method is named with its class: CausalSelfAttention.forward
                name = f"{owner}.{match.group(1)}" if line.startswith(" ") else match.group(1)
        if stripped == BEGIN:
            block = {"indent": line[:len(line) - len(line.lstrip())], "lines": []}
            continue
        if stripped == END:
            out.extend(_stub_block(block, name))
            block = None
            continue
        if block is not None:
            block["lines"].append(line)
        else:
            out.append(line)
    if block is not None:
        raise ValueError("unterminated ### BEGIN SOLUTION block")
    return "\n".join(out) + "\n"


def _stub_block(block, name):
    indent, lines = block["indent"], block["lines"]
    todos = [indent + line.strip() for line in lines if line.strip().startswith("# TODO")]
    if indent == "":  # module level: answers become None, so the file still imports
        return todos + [f"{m.group(1)} = None  # TODO" for m in map(ASSIGNMENT.match, lines) if m]
    message = f"{name} 尚未实现 / not implemented yet"
    return todos + [f'{indent}raise NotImplementedError("{message}")']


def write_stubs():
    with open(SOLUTION, encoding="utf-8") as handle:
        stub = make_stub(handle.read())
    os.makedirs(os.path.dirname(EXERCISE), exist_ok=True)
    with open(EXERCISE, "w", encoding="utf-8") as handle:
        handle.write(stub)
    return EXERCISE


def build_release(out=RELEASE):
    """Write the student bundle to `out` (replacing it); the result is deterministic."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with open(SOLUTION, encoding="utf-8") as handle:
        stub = make_stub(handle.read())
    with open(os.path.join(out, "attention.py"), "w", encoding="utf-8") as handle:
        handle.write(stub)
    for rel in RELEASE_GRADER_FILES:
        target = os.path.join(out, "grader", rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, "grader", rel), target)
    for name in sorted(os.listdir(RELEASE_TEMPLATES)):
        shutil.copyfile(os.path.join(RELEASE_TEMPLATES, name), os.path.join(out, name))
    shutil.copyfile(os.path.join(ROOT, "requirements.txt"), os.path.join(out, "requirements.txt"))
    # The lesson's demos (make demo), run on the student's own attention.py.
    os.makedirs(os.path.join(out, "exercises"))
    shutil.copyfile(os.path.join(ROOT, "exercises", "demo.py"),
                    os.path.join(out, "exercises", "demo.py"))
    # The student notebook, as the real `nbgrader generate_assignment` writes it (grader/nbgrade.py).
    from . import nbgrade

    nbgrade.release_notebook(os.path.join(out, "attention.ipynb"))
    return out


def main(argv):
    command = argv[0] if argv else "stubs"
    if command == "stubs":
        print(write_stubs())
    elif command == "release":
        print(build_release(argv[1] if len(argv) > 1 else RELEASE))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
