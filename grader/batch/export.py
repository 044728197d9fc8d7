"""`python -m grader export OUT --to DIR`: a graded batch, overrides applied, in the formats other
graders read: DIR/gradescope/<student>/results.json (report.to_gradescope: an overridden test
carries the TA's score and says so) and DIR/scores.csv (student, entry, score, max_score, status,
overridden check ids) for an LMS or nbgrader's gradebook.  Nothing is regraded.
"""
import csv
import io
import os

from grader.batch import overrides, roster
from grader.batch.records import records_in
from grader.render import report
from grader.inert import csv_cell
from grader.statefile import write_atomic

SCORES = "scores.csv"
GRADESCOPE = "gradescope"


def add_arguments(sub):
    from grader import options

    p = sub.add_parser("export", help="a graded batch, overrides applied, as Gradescope "
                       "results.json per student and one scores.csv (instructors)")
    p.add_argument("out", help="the batch's output folder")
    p.add_argument("--to", required=True, help="the folder to write the exports into")
    options.add_lang(p, help="language of the Gradescope outputs")


def records_of(outdir):
    """Every student's record of the batch at OUTDIR, overrides applied, in the manifest's order."""
    items = overrides.load(outdir)
    return [overrides.apply(record, items) for record in records_in(outdir)[1]]


def scores_csv(records):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "entry", "score", "max_score", "status", "overridden"])
    for record in records:
        writer.writerow([csv_cell(record["student"]), csv_cell(record["entry"]),
                         report.class_points(record.get("score") or 0),
                         report.class_points(record.get("max_score")), roster.status_of(record),
                         " ".join(o["check"] for o in record.get("overrides", []))])
    return buffer.getvalue()


def export(outdir, target, lang):
    """Write the exports; returns (students exported to Gradescope, rows of scores.csv)."""
    from grader import rubric

    the_rubric, records = rubric.load(), records_of(outdir)
    written = 0
    for record in records:
        if not record.get("report"):
            continue  # ungradable: no tests to show; scores.csv says why it is 0
        folder = os.path.join(target, GRADESCOPE, record["student"])
        os.makedirs(folder, exist_ok=True)
        write_atomic(os.path.join(folder, "results.json"),
                     report.to_gradescope(the_rubric, record["report"], lang) + "\n")
        written += 1
    os.makedirs(target, exist_ok=True)
    write_atomic(os.path.join(target, SCORES), scores_csv(records))
    return written, len(records)


def main(args):
    from grader.batch.records import MANIFEST
    from grader.batch.refusal import Refusal, refuse, say

    outdir, target = os.path.abspath(args.out), os.path.abspath(args.to)
    if not os.path.isfile(os.path.join(outdir, MANIFEST)):
        return refuse(Refusal("no_manifest", folder=outdir, manifest=MANIFEST), args.lang)
    written, rows = export(outdir, target, args.lang)
    say("exported", args.lang, target=target, written=written, gradescope=GRADESCOPE,
        scores=SCORES, rows=rows)
    return 0
