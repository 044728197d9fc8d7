"""The class as a list of students in the order a TA should look at them: who cannot be graded,
who handed in the untouched stub, whose code timed out or crashed, then everyone else from the
lowest score up; each with status, score, what to reteach and what to look at twice.  The
gradebook's status and note come from here too.
"""
from grader import words
from grader.render.package import package_notes
from grader.render.report import class_points, error_of, import_failure

# The statuses, in the order of need (a lower rank first).
RANK = {"ungradable": 0, "not_graded": 0, "untouched_stub": 1, "import_failed": 2,
        "timed_out": 2, "crashed": 2, "graded": 3}
# An override's history, in words (overrides.py's actions): their [roster] keys.
ACTION_WORDS = {"set": "action_set", "change": "action_change", "remove": "action_remove",
                "stale": "action_stale"}
# Why a status needs a look: its [roster] key.
NOTES = {"ungradable": "note_ungradable", "not_graded": "note_not_graded",
         "untouched_stub": "note_untouched_stub", "import_failed": "note_import_failed",
         "timed_out": "note_timed_out", "crashed": "note_crashed"}
STUB_KEYS = {"not_implemented", "quiz_missing"}
CRASH_KEYS = {"crashed", "memory_limit", "protocol"}
TIMEOUT_KEYS = {"timeout", "budget"}  # a call too slow, or the submission's whole time used up
# The code reached into the grading process, or asked which device the judge runs it on.
PROBING_KEYS = {"tampering", "device_probing"}


def _keys(result):
    return {v.get("key") for v in result.get("verdicts") or []}


def status_of(record):
    """One word for what happened to the entry (RANK's keys)."""
    if record["status"] == "ungradable":
        return "ungradable"
    if record["status"] != "graded" or not record.get("report"):
        return "not_graded"
    checks = record["report"]["checks"]
    keys = set().union(*(_keys(c) for c in checks)) if checks else set()
    if "import_failed" in keys:
        return "import_failed"
    if checks and not any(c["status"] == "passed" for c in checks) and keys <= STUB_KEYS:
        return "untouched_stub"
    if any(_timed_out(c) for c in checks):
        return "timed_out"
    if keys & CRASH_KEYS:
        return "crashed"
    return "graded"


def partial(record):
    """[(check id, parts passed, parts)] of the checks scored in part (from the report's parts)."""
    out = []
    for result in (record.get("report") or {}).get("checks", []):
        parts = result.get("parts") or []
        if 0 < result["score"] < result["max_score"] and len(parts) > 1:
            out.append((result["id"], sum(1 for p in parts if p["status"] == "passed"),
                        len(parts)))
    return out


def partial_text(record):
    return "; ".join(f"{check} {passed}/{total}" for check, passed, total in partial(record))


def _timed_out(result):
    return result["status"] == "timeout" or bool(_keys(result) & TIMEOUT_KEYS)


def _failed_checks(record, status):
    """The checks that timed out (status timed_out) or crashed."""
    checks = record["report"]["checks"]
    if status == "timed_out":
        return [c["id"] for c in checks if _timed_out(c)]
    return [c["id"] for c in checks if _keys(c) & CRASH_KEYS]


def status_note(record, status, lang):
    """Why the entry needs a look, in one sentence of `lang` ('' for a plain graded one)."""
    if status in ("ungradable", "not_graded"):
        return words.text("roster", NOTES[status], lang, error=error_of(record, lang))
    if status == "untouched_stub":
        return words.text("roster", NOTES[status], lang)
    if status == "import_failed":
        fields = (import_failure(record["report"]) or {}).get("fields", {})
        why = f"{fields.get('type', '')}: {fields.get('message', '')}".strip(": ")
        return words.text("roster", NOTES[status], lang, why=why)
    if status in ("timed_out", "crashed"):
        checks = _failed_checks(record, status)
        shown = ", ".join(checks[:4]) + (" …" if len(checks) > 4 else "")
        return words.text("roster", NOTES[status], lang, n=len(checks), shown=shown)
    return ""


def override_lines(record, lang):
    return [words.text("roster", "override", lang, check=o["check"], was=class_points(o["was"]),
                       score=class_points(o["score"]), why=o["why"])
            + words.text("roster", "override_by", lang, who=o["who"], when=o["when"])
            * bool(o.get("who")) for o in record.get("overrides", [])]


def gradebook_note(record, lang):
    """The gradebook's note: the status, the package's findings, the overrides (in `lang`)."""
    status = status_of(record)
    lines = [status_note(record, status, lang)] if status != "graded" else []
    lines += package_notes(record.get("package"), lang)
    lines += override_lines(record, lang)
    return "; ".join(line for line in lines if line)


def flags(record, group_of):
    """What to look at twice: {'group': n, 'overrides': [check], 'identity': manifest id,
    'left_out': n statements, 'probing': [check]}, only those that apply."""
    found = {}
    if record["student"] in group_of:
        found["group"] = group_of[record["student"]]
    if record.get("overrides"):
        found["overrides"] = [o["check"] for o in record["overrides"]]
    identity = (record.get("package") or {}).get("identity")
    if identity:
        found["identity"] = identity["manifest"]
    left_out = ((record.get("report") or {}).get("metadata") or {}).get("left_out")
    if left_out:
        found["left_out"] = len(left_out)
    probing = [c["id"] for c in (record.get("report") or {}).get("checks") or ()
               if _keys(c) & PROBING_KEYS]
    if probing:
        found["probing"] = probing
    return found


def rows(records, causes_of, groups, max_score):
    """One row per student, the neediest first (summary['roster'])."""
    group_of = {s: n for n, group in enumerate(groups, 1) for s in group}
    out = []
    for record in records:
        status = status_of(record)
        out.append({"student": record["student"], "entry": record["entry"], "status": status,
                    "score": record.get("score") or 0,
                    "max_score": record.get("max_score") or max_score,
                    "partial": [list(p) for p in partial(record)],
                    "causes": list(causes_of(record)) if record.get("report") else [],
                    "flags": flags(record, group_of),
                    "note": {lang: status_note(record, status, lang) for lang in ("zh", "en")}})
    return sorted(out, key=lambda r: (RANK[r["status"]], r["score"], r["student"]))
