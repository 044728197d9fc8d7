"""The student bundle's GitHub Classroom workflow, generated from the rubric: one command-grader
step per public check, worth the check's points."""
import json
import os
import re

from grader import paths

WORKFLOW = os.path.join(paths.GRADER, "authoring", "release_templates", ".github", "workflows",
                        "classroom.yml")


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
# workflow`; change the rubric (or grader/authoring/workflow.py), not this file.
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
        # attention.py and attention.ipynb are both graded: the better one counts (a student who
        # works in the notebook leaves attention.py the untouched stub).
        run: |
          .venv/bin/python -m grader.classroom grade @REPORT@ --summary "$GITHUB_STEP_SUMMARY"
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
    from grader import rubric

    os.makedirs(os.path.dirname(WORKFLOW), exist_ok=True)
    with open(WORKFLOW, "w", encoding="utf-8") as handle:
        handle.write(classroom_workflow(rubric.load()))
    return WORKFLOW
