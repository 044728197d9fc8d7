"""A TA's override of one check for one student, kept as data in the batch's output folder.

`python -m grader override OUT STUDENT CHECK SCORE --why "..."` records it in OUT/overrides.json;
every rebuild of the class outputs (a run, a resume, a regrade, a merge, the override command
itself) applies the overrides to the records read back from report.json: the check's score is
replaced (the report.json keeps what the grader decided), the total follows, the student's page
and Markdown show the override and its reason, the gradebook's note and the summary list it.
"""
import json
import os

from grader.statefile import write_atomic

FILE = "overrides.json"


class OverrideError(ValueError):
    """An override that cannot be recorded: unknown student or check, score out of bounds."""


def load(outdir):
    """[{student, check, score, why}] sorted by student and check ([] when there is none)."""
    try:
        with open(os.path.join(outdir, FILE), encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise OverrideError(f"{os.path.join(outdir, FILE)}: unreadable ({exc})") from None
    items = data.get("overrides", []) if isinstance(data, dict) else []
    return sorted(items, key=lambda o: (o["student"], o["check"]))


def save(outdir, items):
    items = sorted(items, key=lambda o: (o["student"], o["check"]))
    write_atomic(os.path.join(outdir, FILE), json.dumps(
        {"format": 1, "overrides": items}, ensure_ascii=False, indent=1) + "\n")


def validate(the_rubric, students, student, check, score):
    """The override as data, or OverrideError saying what is wrong and what would be right."""
    if student not in students:
        near = sorted(s for s in students if student.lower() in s.lower())[:5]
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise OverrideError(f"unknown student {student!r}: not in this batch's batch.json{hint}")
    if check not in the_rubric.by_id:
        near = [c.id for c in the_rubric.checks if check.split(".")[0] in c.id][:8]
        raise OverrideError(f"unknown check {check!r}; the checks are "
                            f"{', '.join(near or [c.id for c in the_rubric.checks])}")
    points = the_rubric.by_id[check].points
    if not 0 <= score <= points:
        raise OverrideError(f"score {score:g} is outside 0..{points:g}, the points of {check}")


def record_override(outdir, item):
    """Add (or replace: one override per student and check) and save."""
    same = (item["student"], item["check"])
    items = [o for o in load(outdir) if (o["student"], o["check"]) != same]
    save(outdir, items + [item])


def combine(lists):
    """The overrides of several output folders (a merge); the same student and check overridden
    differently in two of them is refused."""
    chosen = {}
    for items in lists:
        for o in items:
            seen = chosen.setdefault((o["student"], o["check"]), o)
            if (seen["score"], seen["why"]) != (o["score"], o["why"]):
                raise OverrideError(f"{o['student']} {o['check']} is overridden differently in two "
                                    f"outputs ({seen['score']:g} and {o['score']:g})")
    return sorted(chosen.values(), key=lambda o: (o["student"], o["check"]))


def apply(record, items):
    """The record with its overrides applied (a copy; the record itself is left as read)."""
    mine = [o for o in items if o["student"] == record["student"]]
    if not mine or not record.get("report"):
        return record
    record = json.loads(json.dumps(record))
    by_check = {o["check"]: o for o in mine}
    applied = []
    for result in record["report"]["checks"]:
        o = by_check.get(result["id"])
        if o is None:
            continue
        result["override"] = {"score": o["score"], "was": result["score"], "why": o["why"]}
        applied.append({"check": result["id"], "was": result["score"], "score": o["score"],
                        "why": o["why"]})
        result["score"] = o["score"]
    record["score"] = round(sum(r["score"] for r in record["report"]["checks"]), 4)
    record["report"]["score"] = record["score"]
    record["overrides"] = applied
    return record


def note(record):
    """The gradebook's note for an overridden record."""
    return "; ".join(f"override {o['check']} {o['was']:g} -> {o['score']:g}: {o['why']}"
                     for o in record.get("overrides", []))


# -- the command --------------------------------------------------------------------------------
def add_arguments(sub):
    p = sub.add_parser("override", help="change one check's score for one student, with a reason "
                       "(kept in OUT/overrides.json, applied at every rebuild)")
    p.add_argument("out", help="the batch's output folder")
    p.add_argument("student", help="the student id (as in gradebook.csv)")
    p.add_argument("check", help="the check id (a column of gradebook.csv)")
    p.add_argument("score", type=float, help="the new score, 0..the check's points")
    p.add_argument("--why", required=True,
                   help="the reason, shown to the student and in the summary")
