"""nbgrader for this exercise, with a grade it cannot be tricked into: the commands.

  python -m grader.instructor.nbgrade autograde   nbgrader autograde, the sandboxed regrade, fix-up
  python -m grader.instructor.nbgrade regrade     only the regrade and fix-up (after an autograde)
  python -m grader.instructor.nbgrade feedback    nbgrader generate_feedback, then a scan for leaks
  python -m grader.instructor.nbgrade export      nbgrader export --to grades.csv
  (options: --course DIR, --timeout SECONDS per cell, --jobs N regrades at once)

nbregrade.py regrades every submitted notebook through the batch and fixes up the gradebook where
nbgrader's kernel disagrees (its docstring says why); nbfeedback.py rewrites the notebooks that
generate_feedback renders and scans the feedback for hidden tests.
"""
import argparse
import os
import sys
import time

from grader import options
from grader.authoring.course import (ASSIGNMENT, COURSE, assignment_known, generate_assignment,
                                    nbgrader)
from grader.instructor import nbfeedback, nbregrade
from grader.render.report import points

# Seconds a notebook cell may run in `nbgrader autograde` unless --timeout says otherwise:
# generous, so that a correct notebook never times out on a busy machine (its kernel's judge
# imports torch in the first graded cell); an endless loop costs one such timeout.
CELL_TIMEOUT = 120


def autograde(course=COURSE, timeout=None, jobs=1, lang="zh"):
    """nbgrader autograde (all submissions, --force), then the kit's regrade and the fix-up.
    Returns (records, timings)."""
    started = time.monotonic()
    if not assignment_known(course):
        generate_assignment(course)
    args = ["autograde", ASSIGNMENT, "--force", f"--Execute.timeout={int(timeout or CELL_TIMEOUT)}"]
    log = os.path.join(course, "autograde.log")
    if os.path.exists(log):
        os.remove(log)
    code, output, nbgrader_seconds = nbgrader(args, course, log)
    regrade_started = time.monotonic()
    records = nbregrade.regrade(course, jobs, output, lang=lang)
    timings = {"notebooks": len(records), "nbgrader_autograde": round(nbgrader_seconds, 1),
               "nbgrader_exit_code": code,
               "regrade_and_fix_up": round(time.monotonic() - regrade_started, 1),
               "make_autograde_total": round(time.monotonic() - started, 1)}
    nbregrade.write_report(course, records, timings)
    return records, timings


def feedback(course=COURSE):
    seconds = nbgrader(["generate_feedback", ASSIGNMENT, "--force"], course, must=True)[2]
    return seconds, nbfeedback.hidden_leaks(course)


def export(course=COURSE, out="grades.csv"):
    """nbgrader export: the gradebook as CSV (scores include the kit's corrections)."""
    return os.path.join(course, out), nbgrader(["export", "--to", out], course, must=True)[2]


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m grader.instructor.nbgrade")
    parser.add_argument("command", choices=("autograde", "regrade", "feedback", "export"))
    parser.add_argument("--course", default=COURSE)
    parser.add_argument("--timeout", type=int,
                        help=f"seconds a notebook cell may run (default {CELL_TIMEOUT})")
    parser.add_argument("--jobs", type=int, default=1, help="regrades at once (nbgrader takes a core)")
    options.add_lang(parser)
    args = parser.parse_args(argv)
    course = os.path.abspath(args.course)
    if args.command in ("autograde", "regrade"):
        if args.command == "autograde":
            records, timings = autograde(course, args.timeout, args.jobs, args.lang)
        else:
            records, timings = nbregrade.regrade(course, max(args.jobs, 2), lang=args.lang), {}
            nbregrade.write_report(course, records, timings)
        for r in records:
            kernel = "—" if r["kernel_score"] is None else points(r['kernel_score'])
            flag = f"  {len(r['disagreements'])} disagreed" if r["disagreements"] else ""
            print(f"{r['student']:>16}  kernel {kernel:>5}  sandbox {points(r['sandbox_score']):>5}  "
                  f"final {points(r['final_score']):>5} / {points(r['max_score'])}{flag}")
        for key, value in timings.items():
            print(f"{key}: {value}")
        if timings.get("nbgrader_exit_code"):
            print(f"nbgrader autograde exited {timings['nbgrader_exit_code']} (a notebook it could not "
                  f"grade, e.g. a kernel that died): {os.path.join(course, 'autograde.log')}")
        print(f"report: {os.path.join(course, 'regrade.md')}")
    elif args.command == "export":
        path, seconds = export(course)
        print(f"nbgrader export: {seconds:.1f} s -> {path}")
    elif args.command == "feedback":
        seconds, leaks = feedback(course)
        print(f"nbgrader generate_feedback {ASSIGNMENT}: {seconds:.1f} s -> "
              f"{os.path.join(course, 'feedback')}")
        if leaks:
            for path, found in leaks:
                print(f"HIDDEN TEST SOURCE IN {path}: {found}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
