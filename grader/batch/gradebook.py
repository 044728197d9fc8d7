"""The class outputs of a batch: gradebook.csv, mistakes.csv, similarity.csv and the summary
(JSON, Markdown, HTML), computed from the students' records alone, so a resumed batch and an
uninterrupted run give the same files for the same reports.
"""
import csv
import io
import os
import statistics
import sys

from grader import rubric as rubric_module, words
from grader.batch import classhtml, classpage, overrides as overrides_module, roster, similarity
from grader.batch.mistakes import causes
from grader.batch.records import MARKDOWN, PAGE, STUDENTS
from grader.inert import csv_cell, json_text, markdown_inline as md_inline
from grader.render import feedback_html
from grader.render.report import class_points
from grader.render.student_markdown import student_markdown
from grader.statefile import write_atomic

BINS = 10


def is_named(key):
    """A named mistake (scale_sqrt_D), not an outcome (wrong_values): the rubric says which."""
    return key not in rubric_module.load().outcome_keys


def is_answer(key):
    """A quiz question answered wrong (quiz_wrong_q1_params): an outcome, yet a cause to reteach."""
    return key in rubric_module.load().answer_keys


def causes_of(record):
    """The student's causes to reteach: root causes, then the quiz questions answered wrong."""
    return causes(record["report"], is_named, is_answer)


def gradebook_csv(the_rubric, records, lang="en"):
    """student, entry, one column per check (rubric order), total, max_score, status (roster's),
    note (in `lang`), parts (the checks scored in part: `check passed/parts`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    ids = [c.id for c in the_rubric.checks]
    writer.writerow(["student", "entry"] + ids + ["total", "max_score", "status", "note", "parts"])
    max_score = sum(c.points for c in the_rubric.checks)
    for record in sorted(records, key=lambda r: r["student"]):
        scores = {c["id"]: c["score"] for c in (record.get("report") or {}).get("checks", [])}
        writer.writerow([csv_cell(record["student"]), csv_cell(record["entry"])]
                        + [class_points(scores.get(i)) for i in ids]
                        + [class_points(record.get("score") or 0),
                           class_points(record.get("max_score") or max_score),
                           roster.status_of(record), csv_cell(roster.gradebook_note(record, lang)),
                           csv_cell(roster.partial_text(record))])
    return out.getvalue()


def first_sentence(text, lang):
    """The message's first sentence; a generic outcome's text stops before its {placeholders}."""
    if "{" in text:
        text = text.split("{")[0].rstrip(" ：:，,（(") + " …"
    for mark in (("。", "：") if lang == "zh" else (". ", ": ")):
        if mark in text:
            return text.split(mark)[0] + mark.strip()
    return text


def _histogram(totals, max_score):
    histogram = []
    for b in range(BINS):
        low, high = b * 100 // BINS, (b + 1) * 100 // BINS
        count = sum(1 for t in totals
                    if low <= 100 * t / max_score < high or (b == BINS - 1 and t >= max_score))
        histogram.append({"from": low, "to": high, "count": count})
    return histogram


def _per_check(the_rubric, graded):
    """Per check: passed / failed / error / timeout counts; and per outcome key, who got it."""
    checks, outcomes = [], {}
    for check in the_rubric.checks:
        counts = {"passed": 0, "failed": 0, "error": 0, "timeout": 0}
        for r in graded:
            result = next((c for c in r["report"]["checks"] if c["id"] == check.id), None)
            if result is None:
                continue
            counts[result["status"]] = counts.get(result["status"], 0) + 1
            for verdict in result["verdicts"]:
                if not (is_named(verdict["key"]) or is_answer(verdict["key"])):
                    entry = outcomes.setdefault(verdict["key"], {"who": set(), "checks": set()})
                    entry["who"].add(r["student"])
                    entry["checks"].add(check.id)
        not_passed = len(graded) - counts["passed"]
        checks.append({"id": check.id, "exercise": check.exercise, "points": check.points,
                       "visibility": check.visibility, "title": dict(check.title), **counts,
                       "not_passed": not_passed,
                       "percent_not_passed": _percent(not_passed, len(graded))})
    return checks, outcomes


def _causes(graded):
    """Per cause to reteach, the students it is a cause of (each counted once per cause; see
    mistakes.py) and the cards it was seen on."""
    per_key = {}
    for r in graded:
        for key, cards in causes_of(r).items():
            entry = per_key.setdefault(key, {"who": set(), "checks": set()})
            entry["who"].add(r["student"])
            entry["checks"].update(cards)
    return per_key


def describe_cause(the_rubric, key, checks, lang):
    """A cause in words: a named mistake's first sentence; a wrong answer's whole message, with
    the quiz variable it is about."""
    if is_answer(key) and checks:
        return the_rubric.message(key, lang, name=the_rubric.by_id[checks[0]].checked[lang])
    return first_sentence(the_rubric.message(key, lang), lang)


def lesson_sections(the_rubric, checks, lang):
    """The lesson sections of the cards a cause was seen on (rubric order, at most two)."""
    keys = []
    for check in the_rubric.checks:
        if check.id in checks and check.section not in keys:
            keys.append(check.section)
    return words.text("gradebook", "sections_sep", lang).join(the_rubric.section(k, lang)
                                                            for k in keys[:2])


def _items(the_rubric, per_key, graded):
    items = []
    for key, entry in per_key.items():
        checks = [c.id for c in the_rubric.checks if c.id in entry["checks"]]
        items.append({"key": key, "students": len(entry["who"]),
                      "percent": _percent(len(entry["who"]), len(graded)),
                      "checks": sorted(entry["checks"]), "who": sorted(entry["who"]),
                      "answer": is_answer(key),
                      "text": {lang: describe_cause(the_rubric, key, checks, lang)
                               for lang in ("zh", "en")},
                      "section": {lang: lesson_sections(the_rubric, checks, lang)
                                  for lang in ("zh", "en")}})
    return sorted(items, key=lambda item: (-item["students"], item["key"]))


def _rows(records, status):
    return [{"student": r["student"], "entry": r["entry"], "error": r.get("error")}
            for r in records if r["status"] == status]


def summarize(the_rubric, records, near_copies):
    """The class in numbers: histogram, per check, per named mistake (who), outcomes, overrides
    and the near-copies (similarity.analyse without its full table)."""
    graded = [r for r in records if r["status"] == "graded" and r.get("report")]
    max_score = sum(c.points for c in the_rubric.checks)
    totals = [r["score"] for r in graded]
    checks, outcomes = _per_check(the_rubric, graded)
    return {
        "students": len(records), "graded": len(graded),
        "ungradable": _rows(records, "ungradable"), "not_graded": _rows(records, "missing"),
        "max_score": max_score,
        "mean": round(statistics.fmean(totals), 2) if totals else None,
        "median": round(statistics.median(totals), 2) if totals else None,
        "full_marks": sum(1 for t in totals if t >= max_score),
        "histogram": _histogram(totals, max_score), "checks": checks,
        "roster": roster.rows(records, causes_of, near_copies["groups"], max_score),
        "mistakes": _items(the_rubric, _causes(graded), graded),
        # the outcomes that name no cause, each a whole sentence (plain text: each page makes
        # it inert for its medium)
        "outcomes": [dict(item, text={lang: classpage.outcome_sentence(item, lang)
                                      for lang in words.LANGS})
                     for item in _items(the_rubric, outcomes, graded)],
        "overrides": [dict(o, student=r["student"]) for r in records
                      for o in r.get("overrides", [])],
        "near_copies": {k: v for k, v in near_copies.items()
                        if k not in ("rows", "computed", "reused")},
    }


def _percent(n, total):
    return round(100 * n / total) if total else 0


def summary_markdown(summary, lang):
    """summary.md: the counts, the students and what to reteach (classpage), the histogram, the
    checks, the outcomes that name no cause, then the near-copies and the overrides."""
    said = classpage.said_in("gradebook", lang)
    lines = [f"# {said('title')}", ""]
    m = class_points(summary["max_score"])
    mean, median = class_points(summary["mean"]), class_points(summary["median"])
    lines.append(said("counts", students=summary["students"], graded=summary["graded"],
                      ungradable=len(summary["ungradable"]), full_marks=summary["full_marks"]))
    if summary["mean"] is not None:
        lines += ["", said("mean", mean=mean, median=median, max_score=m)]
    lines += [""] + classpage.students_markdown(summary, lang) + [""]
    lines += classpage.reteach_markdown(summary, lang)
    lines += ["", f"## {said('histogram')}", "", "```text"]
    top = max([b["count"] for b in summary["histogram"]] + [1])
    for b in summary["histogram"]:
        bar = "█" * round(20 * b["count"] / top)
        lines.append(f"{b['from']:>3}–{b['to']:<3}% | {bar} {b['count']}")
    lines += ["```"] + _checks_markdown(summary, lang)
    lines += classpage.near_copies_markdown(summary["near_copies"], lang)
    return "\n".join(lines + classpage.overrides_markdown(summary, lang)) + "\n"


def _checks_markdown(summary, lang):
    said = classpage.said_in("gradebook", lang)
    lines = ["", f"## {said('checks')}", "", said("checks_table"), "|---|---:|---:|---:|---:|"]
    for c in summary["checks"]:
        lines.append(f"| `{c['id']}` {c['title'][lang]} | {class_points(c['points'])} | {c['passed']} | "
                     f"{c['not_passed']} | {c['percent_not_passed']}% |")
    if summary["outcomes"]:
        lines += ["", f"## {said('outcomes')}", "", said("outcomes_table"), "|---:|---:|---|"]
        for item in summary["outcomes"]:
            sentence = classpage.outcome_sentence(item, lang, name=md_inline,
                                                  check=lambda c: f"`{c}`")
            lines.append(f"| {item['students']} | {item['percent']}% | `{item['key']}` "
                         f"{sentence} |")
    return lines


def write_class_outputs(outdir, records, lang, threshold, verbose=False):
    """The class outputs from the records with the folder's overrides applied (those of a changed
    file lapse: said on stderr); the pages of the students an override touches (now or in its
    history) redrawn.  `verbose`: say how many pairs were compared."""
    the_rubric = rubric_module.load()
    for event in overrides_module.expire(outdir, records):  # said once: now out of force
        print(overrides_module.stale_text(event, lang), file=sys.stderr)
    items = overrides_module.load(outdir)
    history = overrides_module.load_history(outdir)
    records = [overrides_module.apply(r, items) for r in records]
    near = _near_copies(outdir, records, threshold, lang if verbose else None)
    summary = summarize(the_rubric, records, near)
    summary["override_history"] = history
    page = feedback_html.summary_page(
        summary, lang, first=classhtml.students_html(summary),
        teaching=classhtml.reteach_html(summary), last=classhtml.last_sections_html(summary),
        head=classhtml.STYLE)
    outputs = {"gradebook.csv": gradebook_csv(the_rubric, records, lang),
               "mistakes.csv": classpage.mistakes_csv(summary, records, causes_of),
               similarity.TABLE: classpage.similarity_csv(near["rows"]),
               "summary.json": json_text(summary, ensure_ascii=False, indent=1) + "\n",
               "summary.md": summary_markdown(summary, lang), "summary.html": page}
    for name, text in outputs.items():
        write_atomic(os.path.join(outdir, name), text)
    touched = {e["student"] for e in history} | {o["student"] for o in items}
    for record in records:
        if record["student"] in touched and record.get("report"):
            _redraw_student(outdir, the_rubric, record, lang)
    return summary


def _near_copies(outdir, records, threshold, verbose_lang):
    """The near-copies among the records whose code was kept (similarity/sources); with
    `verbose_lang`, how many pairs were compared is said in it."""
    sources = []
    for r in records:
        saved = similarity.read_source(outdir, r["student"])
        if saved is not None and saved.get("digest") == r.get("digest"):
            sources.append(saved)
    near = similarity.analyse(outdir, sources, threshold)
    if verbose_lang:
        print(words.text("batch", "verbose_similarity", verbose_lang, n=len(sources),
                         computed=near["computed"], reused=near["reused"]), file=sys.stderr)
    return near


def _redraw_student(outdir, the_rubric, record, lang):
    folder = os.path.join(outdir, STUDENTS, record["student"])
    write_atomic(os.path.join(folder, PAGE), feedback_html.student_page(
        the_rubric, record, lang, extra=classhtml.override_notice_html(record)))
    write_atomic(os.path.join(folder, MARKDOWN), student_markdown(the_rubric, record, lang))
