"""The class outputs of a batch: gradebook.csv and the summary (JSON, Markdown, HTML).

Everything here is computed from the students' report.json records alone, so a resumed batch, a
merge of shards and an uninterrupted run give the same files for the same reports.
"""
import csv
import io
import os
import statistics
import sys

from grader import rubric as rubric_module
from grader.batch import classpage, overrides as overrides_module, similarity
from grader.inert import json_text
from grader.render.classtext import csv_cell, md_inline
from grader.batch.mistakes import root_causes
from grader.batch.records import MARKDOWN, PAGE, STUDENTS
from grader.render import feedback_html
from grader.render.student_markdown import student_markdown
from grader.render.package import package_notes
from grader.statefile import write_atomic

def is_named(key):
    """A named mistake (scale_sqrt_D), not an outcome (wrong_values): the rubric says which."""
    return key not in rubric_module.load().outcome_keys


STATUS_WORDS = {"graded": "graded", "ungradable": "ungradable", "missing": "not graded"}
BINS = 10


def _num(x):
    return "" if x is None else f"{x:g}"


def gradebook_csv(the_rubric, records):
    """student, entry, one column per check (rubric order), total, max_score, status, note (why an
    entry was not graded; for a `make submit` package what its manifest check found)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    ids = [c.id for c in the_rubric.checks]
    writer.writerow(["student", "entry"] + ids + ["total", "max_score", "status", "note"])
    max_score = sum(c.points for c in the_rubric.checks)
    for record in sorted(records, key=lambda r: r["student"]):
        notes = package_notes(record.get("package"))
        if record.get("overrides"):
            notes.append(overrides_module.note(record))
        note = record.get("error") or "; ".join(notes)
        scores = {}
        if record.get("report"):
            scores = {c["id"]: c["score"] for c in record["report"]["checks"]}
        writer.writerow([csv_cell(record["student"]), csv_cell(record["entry"])]
                        + [_num(scores.get(i)) for i in ids]
                        + [_num(record.get("score") or 0), _num(record.get("max_score") or max_score),
                           csv_cell(STATUS_WORDS.get(record["status"], record["status"])),
                           csv_cell(note)])
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
                if not is_named(verdict["key"]):
                    entry = outcomes.setdefault(verdict["key"], {"who": set(), "checks": set()})
                    entry["who"].add(r["student"])
                    entry["checks"].add(check.id)
        not_passed = len(graded) - counts["passed"]
        checks.append({"id": check.id, "exercise": check.exercise, "points": check.points,
                       "visibility": check.visibility, "title": dict(check.title), **counts,
                       "not_passed": not_passed,
                       "percent_not_passed": _percent(not_passed, len(graded))})
    return checks, outcomes


def _root_causes(graded):
    """Per named mistake, the students whose root cause it is (each counted once per root cause;
    see mistakes.py) and the cards it was seen on."""
    per_key = {}
    for r in graded:
        for key, cards in root_causes(r["report"], is_named).items():
            entry = per_key.setdefault(key, {"who": set(), "checks": set()})
            entry["who"].add(r["student"])
            entry["checks"].update(cards)
    return per_key


def _items(the_rubric, per_key, graded):
    items = []
    for key, entry in per_key.items():
        items.append({"key": key, "students": len(entry["who"]),
                      "percent": _percent(len(entry["who"]), len(graded)),
                      "checks": sorted(entry["checks"]), "who": sorted(entry["who"]),
                      "text": {lang: first_sentence(the_rubric.message(key, lang), lang)
                               for lang in ("zh", "en")}})
    return sorted(items, key=lambda item: (-item["students"], item["key"]))


def _rows(records, status):
    return [{"student": r["student"], "entry": r["entry"], "error": r.get("error")}
            for r in records if r["status"] == status]


def summarize(the_rubric, records, near_copies=None):
    """The class in numbers: histogram, per check, per named mistake (who), outcomes, overrides
    and, when given, the near-copies (similarity.analyse without its full table)."""
    graded = [r for r in records if r["status"] == "graded" and r.get("report")]
    max_score = sum(c.points for c in the_rubric.checks)
    totals = [r["score"] for r in graded]
    checks, outcomes = _per_check(the_rubric, graded)
    summary = {
        "students": len(records), "graded": len(graded),
        "ungradable": _rows(records, "ungradable"), "not_graded": _rows(records, "missing"),
        "max_score": max_score,
        "mean": round(statistics.fmean(totals), 2) if totals else None,
        "median": round(statistics.median(totals), 2) if totals else None,
        "full_marks": sum(1 for t in totals if t >= max_score),
        "histogram": _histogram(totals, max_score), "checks": checks,
        "mistakes": _items(the_rubric, _root_causes(graded), graded),
        "outcomes": _items(the_rubric, outcomes, graded),
        "overrides": [dict(o, student=r["student"]) for r in records
                      for o in r.get("overrides", [])],
    }
    if near_copies is not None:
        summary["near_copies"] = {k: v for k, v in near_copies.items()
                                  if k not in ("rows", "computed", "reused")}
    return summary


def _percent(n, total):
    return round(100 * n / total) if total else 0


def summary_markdown(summary, lang):
    zh = lang == "zh"
    t = (lambda a, b: a if zh else b)
    lines = [f"# {t('全班概况', 'Class summary')}", ""]
    m = summary["max_score"]
    lines.append(t(f"学生 {summary['students']} 人 · 已评分 {summary['graded']} · "
                   f"无法评分 {len(summary['ungradable'])} · 满分 {summary['full_marks']} 人",
                   f"{summary['students']} students · {summary['graded']} graded · "
                   f"{len(summary['ungradable'])} ungradable · {summary['full_marks']} full marks"))
    if summary["mean"] is not None:
        lines += ["", t(f"平均 {summary['mean']:g} / {m:g} · 中位数 {summary['median']:g} / {m:g}",
                        f"mean {summary['mean']:g} / {m:g} · median {summary['median']:g} / {m:g}")]
    lines += ["", f"## {t('分数分布', 'Score histogram')}", "", "```text"]
    top = max([b["count"] for b in summary["histogram"]] + [1])
    for b in summary["histogram"]:
        bar = "█" * round(20 * b["count"] / top)
        lines.append(f"{b['from']:>3}–{b['to']:<3}% | {bar} {b['count']}")
    lines += ["```", "", f"## {t('常见错误（按人数）', 'Named mistakes (by students)')}", ""]
    if summary["mistakes"]:
        lines += [t("| 人数 | 比例 | 错误 | 检查 |", "| students | share | mistake | checks |"),
                  "|---:|---:|---|---|"]
        for item in summary["mistakes"]:
            lines.append(f"| {item['students']} | {item['percent']}% | `{item['key']}` "
                         f"{item['text'][lang]} | {', '.join(item['checks'])} |")
    else:
        lines.append(t("（没有）", "(none)"))
    lines += ["", f"## {t('各项检查', 'Checks')}", "",
              t("| 检查 | 分值 | 通过 | 未通过 | 未通过比例 |",
                "| check | points | passed | not passed | share not passed |"),
              "|---|---:|---:|---:|---:|"]
    for c in summary["checks"]:
        lines.append(f"| `{c['id']}` {c['title'][lang]} | {c['points']:g} | {c['passed']} | "
                     f"{c['not_passed']} | {c['percent_not_passed']}% |")
    if summary["outcomes"]:
        lines += ["", f"## {t('其他结果', 'Other outcomes')}", "",
                  t("| 人数 | 比例 | 结果 |", "| students | share | outcome |"), "|---:|---:|---|"]
        for item in summary["outcomes"]:
            lines.append(f"| {item['students']} | {item['percent']}% | `{item['key']}` "
                         f"{item['text'][lang]} |")
    for title, rows in ((t("无法评分", "Could not be graded"), summary["ungradable"]),
                        (t("未评分（评分器出错，请重跑）", "Not graded (grader error: run again)"),
                         summary["not_graded"])):
        if rows:
            lines += ["", f"## {title}", ""]
            lines += [f"- {md_inline(r['student'])} ({md_inline(r['entry'])}): "
                      f"{md_inline(r['error'])}" for r in rows]
    return "\n".join(lines) + "\n" + classpage.summary_sections_markdown(summary, lang)


def write_class_outputs(outdir, records, lang, threshold=None, jobs=1):
    """gradebook.csv, mistakes.csv, similarity.csv and the summary (JSON, Markdown, HTML), from
    the records with the folder's overrides applied; the overridden students' pages redrawn."""
    the_rubric = rubric_module.load()
    items = overrides_module.load(outdir)
    records = [overrides_module.apply(r, items) for r in records]
    near = None if threshold is None else _near_copies(outdir, records, threshold, jobs)
    summary = summarize(the_rubric, records, near)
    write_atomic(os.path.join(outdir, "gradebook.csv"), gradebook_csv(the_rubric, records))
    write_atomic(os.path.join(outdir, "mistakes.csv"),
                 classpage.mistakes_csv(summary, records, is_named))
    if near is not None:
        write_atomic(os.path.join(outdir, similarity.TABLE), classpage.similarity_csv(near["rows"]))
    write_atomic(os.path.join(outdir, "summary.json"),
                 json_text(summary, ensure_ascii=False, indent=1) + "\n")
    write_atomic(os.path.join(outdir, "summary.md"), summary_markdown(summary, lang))
    write_atomic(os.path.join(outdir, "summary.html"), feedback_html.summary_page(
        summary, lang, extra=classpage.summary_sections_html(summary)))
    for record in records:
        if record.get("overrides"):
            _redraw_student(outdir, the_rubric, record, lang)
    return summary


def _near_copies(outdir, records, threshold, jobs):
    """The near-copies among the records whose code was kept (similarity/sources)."""
    sources = []
    for r in records:
        saved = similarity.read_source(outdir, r["student"])
        if saved is not None and saved.get("digest") == r.get("digest"):
            sources.append(saved)
    return similarity.analyse(outdir, sources, threshold, log=sys.stderr, jobs=jobs)


def _redraw_student(outdir, the_rubric, record, lang):
    folder = os.path.join(outdir, STUDENTS, record["student"])
    write_atomic(os.path.join(folder, PAGE), feedback_html.student_page(
        the_rubric, record, lang, extra=classpage.override_notice_html(record)))
    write_atomic(os.path.join(folder, MARKDOWN), student_markdown(the_rubric, record, lang))
