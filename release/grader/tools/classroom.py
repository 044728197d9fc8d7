"""GitHub Classroom's side of the kit, run by the workflow (.github/workflows/classroom.yml):

  python -m grader.classroom grade REPORT [--summary FILE]   grade the repository's work once
  python -m grader.classroom REPORT CHECK_ID                 one public check's verdict

`grade` runs the public checks on each work file the repository holds (attention.py and
attention.ipynb: a student who works in the notebook leaves attention.py the untouched stub, and
the other way round) and keeps the better report as REPORT (JSON), its Markdown appended to the
step summary.  Then one `autograding-command-grader` step per public check reads REPORT, and
Classroom awards that step's points when it exits 0.  Reading the saved report, instead of
grading again per check, keeps the run to one grading pass and every step consistent with it.
Exit 0 only when the check passed in full: the command grader gives all of a step's points or none.
"""
import json
import os
import sys

WORK_FILES = ("attention.py", "attention.ipynb")
GRADED = {"zh": "评分的文件：`{name}`（{score} 分；仓库里分数较高的那份作业）",
          "en": "Graded file: `{name}` ({score} points; the better of the repository's work files)"}


def verdict(report_path, check_id):
    """(exit code, text for the step's log)."""
    try:
        with open(report_path, encoding="utf-8") as handle:
            checks = {c["id"]: c for c in json.load(handle)["checks"]}
    except (OSError, ValueError, KeyError) as exc:
        return 1, (f"没有可读的公开检查结果（`{report_path}: {exc}`）：请看前面的“公开检查”步骤。\n"
                   f"No readable public-check report (`{report_path}: {exc}`): see the earlier "
                   "public checks step.")
    check = checks.get(check_id)
    if check is None:
        return 1, f"报告里没有检查 {check_id}。\nThe report has no check {check_id}."
    from grader.render.report import check_line

    if check["status"] == "passed":
        return 0, check_line(check, check["title"], "en", mark="✓", status="")
    return 1, "\n".join([check_line(check, check["title"], "en", mark="✗", status=""),
                         check.get("feedback") or check["status"]])


def best_work(folder="."):
    """(file name, report data) of the work file with the higher public score, or None."""
    from grader.judge import grading
    from grader.judge.submission import SubmissionError

    best = None
    for name in WORK_FILES:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        try:
            data = grading.grade(path, ("public",))
        except SubmissionError:
            continue
        if best is None or data["score"] > best[1]["score"]:
            best = (name, data)
    return best


def grade(report_path, summary=None, lang="zh", folder="."):
    """Write the better work file's report to `report_path`; 1 when there is none to grade."""
    from grader.render import report
    from grader import rubric

    best = best_work(folder)
    if best is None:
        print(f"没有可评分的 {' / '.join(WORK_FILES)}。\nNo gradable {' or '.join(WORK_FILES)}.")
        return 1
    name, data = best
    the_rubric = rubric.load()
    os.makedirs(os.path.dirname(os.path.abspath(report_path)), exist_ok=True)
    with open(report_path, "w", encoding="utf-8") as handle:
        handle.write(report.to_json(the_rubric, data, lang))
    graded = GRADED[lang].format(name=name, score=report.points(data["score"]))
    print(graded)
    if summary:  # appended: GitHub's step summary file may already hold other steps' text
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(report.to_markdown(the_rubric, data, lang) + "\n" + graded + "\n")
    return 0


def main(argv):
    if argv[:1] == ["grade"] and len(argv) in (2, 4) and (len(argv) == 2 or argv[2] == "--summary"):
        return grade(argv[1], argv[3] if len(argv) == 4 else None)
    if len(argv) != 2 or argv[0] == "grade":
        print(__doc__, file=sys.stderr)
        return 2
    code, text = verdict(*argv)
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
