"""One public check's verdict for GitHub Classroom: `python -m grader.classroom REPORT CHECK_ID`.

The workflow (.github/workflows/classroom.yml) grades once with `python -m grader check --format
json --out REPORT`; then one `autograding-command-grader` step per public check runs this, and
Classroom awards that step's points when it exits 0.  Reading the saved report, instead of
grading again per check, keeps the run to one grading pass and every step consistent with it.
Exit 0 only when the check passed in full: the command grader gives all of a step's points or none.
"""
import json
import sys


def verdict(report_path, check_id):
    """(exit code, text for the step's log)."""
    try:
        with open(report_path, encoding="utf-8") as handle:
            checks = {c["id"]: c for c in json.load(handle)["checks"]}
    except (OSError, ValueError, KeyError) as exc:
        return 1, (f"没有可读的公开检查结果 no readable public-check report ({report_path}: {exc})；"
                   "请看前面的 public checks 步骤 / see the earlier step")
    check = checks.get(check_id)
    if check is None:
        return 1, f"报告里没有检查 {check_id} / the report has no check {check_id}"
    line = f"{check['id']}  {check['title']}  [{check['score']:g}/{check['max_score']:g}]"
    if check["status"] == "passed":
        return 0, "✓ " + line
    return 1, "\n".join(["✗ " + line, check.get("feedback") or check["status"]])


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    code, text = verdict(*argv)
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
