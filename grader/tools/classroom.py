"""GitHub Classroom's side of the kit, run by the workflow (.github/workflows/classroom.yml):

  python -m grader.classroom grade REPORT [--summary FILE]   grade the repository's work once
  python -m grader.classroom REPORT CHECK_ID                 one public check's verdict

`grade` runs the public checks on attention.py and attention.ipynb (a student who works in one
leaves the other the untouched stub) and keeps the better report as REPORT, its Markdown appended
to the step summary.  Then one `autograding-command-grader` step per public check reads REPORT
(one grading pass, every step consistent with it) and exits 0 only when the check passed in full:
the command grader gives a step all of its points or none.
"""
import json
import os
import sys

from grader import rubric, words
from grader.render import report

WORK_FILES = ("attention.py", "attention.ipynb")


def _both(key, **fields):
    """words.toml's [classroom] `key` in both languages, Chinese first, a line each (the step's
    log is read in either)."""
    return "\n".join(words.text("classroom", key, lang, **fields) for lang in words.LANGS)


def verdict(report_path, check_id):
    """(exit code, text for the step's log)."""
    try:
        with open(report_path, encoding="utf-8") as handle:
            checks = {c["id"]: c for c in json.load(handle)["checks"]}
    except (OSError, ValueError, KeyError) as exc:
        return 1, _both("no_report", report=report_path, error=exc)
    check = checks.get(check_id)
    if check is None:
        return 1, _both("no_check", check=check_id)
    if check["status"] == "passed":
        return 0, report.check_line(check, check["title"], "en", mark="✓", status="")
    return 1, "\n".join([report.check_line(check, check["title"], "en", mark="✗", status=""),
                         check.get("feedback") or check["status"]])


def best_work(folder="."):
    """(file name, report data) of the work file with the higher public score, or None."""
    from grader.judge import service
    from grader.judge.submission import SubmissionError

    best = None
    with service.Judge(start="auto") as judge:  # one check session for both files
        for name in WORK_FILES:
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            try:
                data = judge.grade(path, ("public",))
            except SubmissionError:
                continue
            if best is None or data["score"] > best[1]["score"]:
                best = (name, data)
    return best


def grade(report_path, summary=None, lang="zh", folder="."):
    """Write the better work file's report to `report_path`; 1 when there is none to grade."""
    best = best_work(folder)
    if best is None:
        print("\n".join(words.text("classroom", "no_work", lang,
                                    files=words.text("classroom", "or", lang).join(WORK_FILES))
                         for lang in words.LANGS))
        return 1
    name, data = best
    the_rubric = rubric.load()
    os.makedirs(os.path.dirname(os.path.abspath(report_path)), exist_ok=True)
    with open(report_path, "w", encoding="utf-8") as handle:
        handle.write(report.to_json(the_rubric, data, lang))
    graded = words.text("classroom", "graded", lang, name=name,
                        score=report.points(data["score"]))
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
