"""A TA's override of one check for one student: a record, kept as data in the batch's output
folder, with who made it, when, why and the score it replaced; every change is kept as history.

    python -m grader override OUT STUDENT CHECK SCORE --why "..."     set (or change) it
    python -m grader override OUT STUDENT CHECK --remove --why "..."  remove it
    python -m grader override OUT --list                              the overrides and history

OUT/overrides.json holds {"overrides": [those in force], "history": [every event, oldest
first]}.  Every rebuild of the class outputs applies them to the records read back (report.json
keeps what the grader decided): the check's score and the total change, the student's page shows
the card as overridden beside the grader's verdict, the gradebook's note and the summary list it.
An override holds the content hash of the entry it was set on: once the file changed and was
regraded, it lapses (expire): out of force, the TA told once, kept in the history.
"""
import datetime
import getpass
import json
import os

from grader import words
from grader.batch.refusal import Refusal
from grader.render.report import class_points
from grader.statefile import write_atomic

FILE = "overrides.json"
FORMAT = 2


class OverrideError(Refusal):
    """An override that cannot be recorded (a [batch] key and its fields)."""


def _key(o):
    return (o["student"], o["check"])


def _read(outdir):
    try:
        with open(os.path.join(outdir, FILE), encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise OverrideError("unreadable", file=os.path.join(outdir, FILE), error=exc) from None
    return data if isinstance(data, dict) else {}


def load(outdir):
    """[{student, check, score, why, who, when, was, digest}] in force, by student and check (a
    format-1 file's items have no who or when)."""
    return sorted(_read(outdir).get("overrides", []), key=_key)


def load_history(outdir):
    """[{action: set | change | remove, student, check, score, replaced, why, who, when}]."""
    return list(_read(outdir).get("history", []))


def save(outdir, items, history):
    write_atomic(os.path.join(outdir, FILE), json.dumps(
        {"format": FORMAT, "overrides": sorted(items, key=_key), "history": history},
        ensure_ascii=False, indent=1) + "\n")


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_who():
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def validate(the_rubric, students, student, check, score):
    """OverrideError saying what is wrong and what would be right, where the override cannot be."""
    if student not in students:
        near = sorted(s for s in students if student.lower() in s.lower())[:5]
        hint = {lang: words.text("batch", "near_students", lang, names=", ".join(near)) if near
                else "" for lang in words.LANGS}
        raise OverrideError("unknown_student", student=repr(student), near=hint)
    if check not in the_rubric.by_id:
        near = [c.id for c in the_rubric.checks if check.split(".")[0] in c.id][:8]
        raise OverrideError("unknown_check", check=repr(check),
                            known=", ".join(near or [c.id for c in the_rubric.checks]))
    points = the_rubric.by_id[check].points
    if not 0 <= score <= points:
        raise OverrideError("score_range", score=f"{score:g}", points=f"{points:g}", check=check)


def record_override(outdir, item, graded_score):
    """Set or change (one per student and check) and keep the event; `graded_score`: the
    grader's score of that check, what a first override replaces."""
    items = load(outdir)
    before = next((o for o in items if _key(o) == _key(item)), None)
    item = dict(item, was=graded_score)
    event = {"action": "change" if before else "set", "student": item["student"],
             "check": item["check"], "score": item["score"],
             "replaced": before["score"] if before else graded_score,
             "why": item["why"], "who": item.get("who"), "when": item.get("when")}
    save(outdir, [o for o in items if _key(o) != _key(item)] + [item],
         load_history(outdir) + [event])
    return event


def remove_override(outdir, student, check, why, who, when):
    """Remove the override in force (OverrideError when there is none) and keep the event."""
    items = load(outdir)
    before = next((o for o in items if _key(o) == (student, check)), None)
    if before is None:
        raise OverrideError("nothing_to_remove", student=student, check=check)
    event = {"action": "remove", "student": student, "check": check,
             "score": before.get("was"), "replaced": before["score"], "why": why, "who": who,
             "when": when}
    save(outdir, [o for o in items if _key(o) != (student, check)],
         load_history(outdir) + [event])
    return event


def expire(outdir, records):
    """The overrides set on another content of the entry than the records' taken out of force,
    each kept in the history as a "stale" event with the new grading's score; those events."""
    regraded = {r["student"]: r for r in records if r["status"] in ("graded", "ungradable")}
    items = load(outdir)
    stale = [o for o in items if o.get("digest") and o["student"] in regraded
             and regraded[o["student"]].get("digest") != o["digest"]]
    if not stale:
        return []
    events = []
    for o in stale:
        checks = (regraded[o["student"]].get("report") or {}).get("checks", [])
        graded = next((c["score"] for c in checks if c["id"] == o["check"]), None)
        events.append({"action": "stale", "student": o["student"], "check": o["check"],
                       "score": graded, "replaced": o["score"], "why": o["why"],
                       "who": o.get("who"), "when": now()})
    save(outdir, [o for o in items if o not in stale], load_history(outdir) + events)
    return events


def lapsed(history):
    """The stale events of `history` that no later event of the same student and check follows:
    what the TA has not decided again."""
    last = {_key(e): e for e in history}
    return [e for e in last.values() if e["action"] == "stale"]


def stale_text(event, lang, name=str):
    """A stale event as the sentence the TA is told (`name` makes student strings safe for the
    medium)."""
    return words.text("batch", "override_stale", lang, student=name(event["student"]),
                      check=event["check"], score=class_points(event["replaced"]),
                      why=name(event["why"]), graded=class_points(event["score"]))


def apply(record, items):
    """A copy of the record with its overrides applied: each overridden card keeps the grader's
    status and score beside the TA's."""
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
        done = {"check": result["id"], "was": result["score"], "status": result["status"],
                "score": o["score"], "why": o["why"], "who": o.get("who"), "when": o.get("when")}
        result["override"] = {k: v for k, v in done.items() if k != "check"}
        applied.append(done)
        result["score"] = o["score"]
    record["score"] = round(sum(r["score"] for r in record["report"]["checks"]), 4)
    record["report"]["score"] = record["score"]
    record["overrides"] = applied
    return record


def add_arguments(sub):
    p = sub.add_parser("override", help="set, change or remove one check's score for one student, "
                       "with a reason (kept with its history in OUT/overrides.json, applied at "
                       "every rebuild); --list shows them")
    p.add_argument("out", help="the batch's output folder")
    p.add_argument("student", nargs="?", help="the student id (as in gradebook.csv)")
    p.add_argument("check", nargs="?", help="the check id (a column of gradebook.csv)")
    p.add_argument("score", nargs="?", type=float, help="the new score, 0..the check's points")
    p.add_argument("--why", help="the reason, shown to the student and in the summary (required "
                   "to set, change or remove)")
    p.add_argument("--remove", action="store_true", help="remove the override in force")
    p.add_argument("--who", default=None, help="who decides (default: the login name)")
    p.add_argument("--list", action="store_true", help="print the overrides and their history")
    p.add_argument("--lang", choices=words.LANGS,
                   help="language of the messages (default: the batch's)")


def history_lines(outdir, lang="en"):
    """What `override OUT --list` prints: the overrides in force, then every change."""
    from grader.batch.roster import ACTION_WORDS

    said = lambda key, **fields: words.text("batch", key, lang, **fields)  # noqa: E731
    lines = [said("in_force", student=o["student"], check=o["check"],
                  was=class_points(o.get("was")), score=class_points(o["score"]),
                  who=o.get("who") or "?", when=o.get("when") or "?", why=o["why"])
             for o in load(outdir)]
    lines += [stale_text(e, lang) for e in lapsed(load_history(outdir))]
    lines += [said("history_line", when=e.get("when") or "?", who=e.get("who") or "?",
                   action=words.text("roster", ACTION_WORDS[e["action"]], lang),
                   student=e["student"], check=e["check"], was=class_points(e["replaced"]),
                   score=class_points(e["score"]), why=e["why"])
              for e in load_history(outdir)]
    return lines or [said("no_overrides")]


def record_command(args, students):
    """Validate and record what the command asks (OverrideError when it cannot); the event."""
    from grader import rubric
    from grader.batch.records import read_record

    the_rubric = rubric.load()
    if args.student is None or args.check is None:
        raise OverrideError("say_which")
    why = (args.why or "").strip()
    if not why:
        raise OverrideError("say_why")
    who, when = args.who or default_who(), now()
    if args.remove:
        if args.student not in students:
            validate(the_rubric, students, args.student, args.check, 0)
        return remove_override(args.out, args.student, args.check, why, who, when)
    if args.score is None:
        raise OverrideError("say_score")
    validate(the_rubric, students, args.student, args.check, args.score)
    record = read_record(args.out, args.student)
    if record is None or not record.get("report"):
        raise OverrideError("no_report", student=args.student)
    graded = next(c["score"] for c in record["report"]["checks"] if c["id"] == args.check)
    return record_override(args.out, {"student": args.student, "check": args.check,
                                      "score": args.score, "why": why, "who": who,
                                      "when": when, "digest": record.get("digest")}, graded)
