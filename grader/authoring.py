"""Instructor tools: generate the student stub from the reference, and write release/.

  python -m grader.authoring stubs     solutions/attention.py -> exercises/attention.py
  python -m grader.authoring workflow  the bundle's GitHub Classroom workflow, from the rubric
  python -m grader.authoring release   [OUT]  the student bundle (default: release/)

The stub keeps every signature, docstring and `# TODO` line of the reference; the code between
`### BEGIN SOLUTION` and `### END SOLUTION` becomes `raise NotImplementedError(...)` (or
`NAME = None` for module-level answers).  The release holds the stub, the public checks and the
grader runtime, and never the reference, the variants or a hidden check.
"""
import json
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
    "copytask.py", "zygote.py", "watch.py", "warm.py", "hints.py", "submit.py", "manifest.py", "statefile.py",
    "checks/__init__.py", "checks/support.py", "checks/pytest.ini",
    "checks/public/__init__.py", "checks/public/test_split_heads.py",
    "checks/public/test_merge_heads.py", "checks/public/test_attend.py",
    "checks/public/test_module.py", "checks/public/test_quiz.py",
    # The notebook's kernel side: its %check and %autograde cells.  Its generator
    # (notebook_build.py) and the nbgrader tools (nb*.py) stay with the instructor.
    "notebook.py", "kernel_judge.py",
    "classroom.py",  # one check's verdict for the Classroom workflow
]
RELEASE_TEMPLATES = os.path.join(ROOT, "grader", "release_templates")
WORKFLOW = os.path.join(RELEASE_TEMPLATES, ".github", "workflows", "classroom.yml")


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


# The workflow's fixed part.  The grading step runs the grader once and keeps its JSON report;
# the command-grader steps generated below read it, one step (and one points figure) per check.
WORKFLOW_HEAD = """\
# GitHub Classroom：每次 push 都运行公开检查，按评分表逐项给分。
# GitHub Classroom: every push runs the public checks, with the rubric's points per check.
#
# 这里算出的分数仅供参考：这个仓库、这个文件和运行它的机器都由你控制，而且这里只运行公开检查。
# 正式成绩来自老师的批量评分（python -m grader batch，在克隆下来的全班仓库上运行公开与隐藏检查）。
# The score computed here is advisory: you control this repository, this file and the machine
# it runs on, and only the public checks run here.  Official grades come from the instructor's
# batch run (python -m grader batch over the cloned repositories, public and hidden checks).
#
# 一项检查只有全部通过才在这里得分；make check 会显示部分得分。
# A check scores here only when it passes in full (Classroom's command grader gives a step all of
# its points or none); make check shows partial points.
#
# For instructors: generated from the kit's grader/rubric.toml by `python -m grader.authoring
# workflow`; change the rubric (or grader/authoring.py), not this file.
name: public checks
"on":
  push:
  workflow_dispatch:
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  public-checks:
    # Classroom's bot commits the starter code when it creates the repository: not a submission.
    if: github.actor != 'github-classroom[bot]'
    runs-on: ubuntu-latest
    timeout-minutes: 20
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
          cache: pip
      - name: 安装依赖 · install
        # PyPI alone would give a Linux runner torch's multi-GB CUDA build.
        run: make setup PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu"
      - name: 公开检查 · public checks
        run: |
          mkdir -p out
          .venv/bin/python -m grader check attention.py --lang zh --format json \\
            --out @REPORT@ --summary "$GITHUB_STEP_SUMMARY"
          {
            echo
            echo '> 这里的分数仅供参考，正式成绩来自老师的批量评分（含隐藏检查）。'
            echo '> The score here is advisory: official grades come from your instructor, who'
            echo '> runs every check, hidden ones included, over the class repositories.'
          } >> "$GITHUB_STEP_SUMMARY"
"""
WORKFLOW_REPORT = "out/public-checks.json"
VERDICT = ".venv/bin/python -m grader.classroom"


def classroom_workflow(the_rubric):
    """The workflow: WORKFLOW_HEAD, one command-grader step per public check, the reporter."""
    text = WORKFLOW_HEAD.replace("@REPORT@", WORKFLOW_REPORT)
    quote = lambda value: json.dumps(value, ensure_ascii=False)  # noqa: E731  (valid YAML)
    ids = []
    for check in the_rubric.select(("public",)):
        if check.points != int(check.points):  # the command grader reads max-score with parseInt
            raise ValueError(f"{check.id}: Classroom awards whole points only")
        step = re.sub(r"\W", "_", check.id)  # the reporter reads env <ID>_RESULTS
        ids.append(step)
        name = f"{check.id}: {check.title['zh']} · {check.title['en']}"
        text += (f"      - name: {quote(check.id)}\n"
                 f"        id: {step}\n"
                 f"        uses: classroom-resources/autograding-command-grader@v1\n"
                 f"        with:\n"
                 f"          test-name: {quote(name)}\n"
                 f"          command: {VERDICT} {WORKFLOW_REPORT} {check.id}\n"
                 f"          timeout: 1\n"
                 f"          max-score: {int(check.points)}\n")
    if len(set(ids)) != len(ids):
        raise ValueError("two public checks map to the same workflow step id")
    text += ("      - name: 得分（仅供参考）· points (advisory)\n"
             "        uses: classroom-resources/autograding-grading-reporter@v1\n"
             "        env:\n")
    text += "".join(f'          {s.upper()}_RESULTS: "${{{{ steps.{s}.outputs.result }}}}"\n'
                    for s in ids)
    return text + f"        with:\n          runners: {','.join(ids)}\n"


def write_workflow():
    from . import rubric

    os.makedirs(os.path.dirname(WORKFLOW), exist_ok=True)
    with open(WORKFLOW, "w", encoding="utf-8") as handle:
        handle.write(classroom_workflow(rubric.load()))
    return WORKFLOW


def _copy_tree(src, dst):
    """Every file under src into dst, dot-directories (.github) included, in a fixed order."""
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            target = os.path.join(dst, os.path.relpath(path, src))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(path, target)


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
    _copy_tree(RELEASE_TEMPLATES, out)  # Makefile, README.md, .gitignore, .github/workflows/
    for name in ("requirements.txt", "requirements-notebook.txt"):  # never the instructor's
        shutil.copyfile(os.path.join(ROOT, name), os.path.join(out, name))
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
    elif command == "workflow":
        print(write_workflow())
    elif command == "release":
        print(build_release(argv[1] if len(argv) > 1 else RELEASE))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
