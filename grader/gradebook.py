"""The class outputs of a batch: gradebook.csv and the summary (JSON, Markdown, HTML).

Everything here is computed from the students' report.json records alone, so a resumed batch, a
merge of shards and an uninterrupted run give the same files for the same reports.
"""
import csv
import io
import os
import statistics

from . import report, rubric as rubric_module
from .inert import csv_cell, json_text, markdown_inline
from .manifest import describe as describe_package, package_notes
from .statefile import write_atomic

# Verdict keys that say *that* something went wrong, not *which* mistake it was.
OUTCOME_KEYS = {"not_implemented", "raised", "import_failed", "timeout", "crashed", "protocol",
                "budget", "internal", "wrong_type", "wrong_shape", "wrong_values", "no_error",
                "wrong_error", "quiz_wrong", "quiz_missing", "quiz_type", "learn_failed"}
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
        note = record.get("error") or "; ".join(package_notes(record.get("package")))
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


def summarize(the_rubric, records):
    graded = [r for r in records if r["status"] == "graded" and r.get("report")]
    max_score = sum(c.points for c in the_rubric.checks)
    totals = [r["score"] for r in graded]
    histogram = []
    for b in range(BINS):
        low, high = b * 100 // BINS, (b + 1) * 100 // BINS
        count = sum(1 for t in totals
                    if low <= 100 * t / max_score < high or (b == BINS - 1 and t >= max_score))
        histogram.append({"from": low, "to": high, "count": count})
    checks, per_key = [], {}
    for check in the_rubric.checks:
        counts = {"passed": 0, "failed": 0, "error": 0, "timeout": 0}
        for r in graded:
            result = next((c for c in r["report"]["checks"] if c["id"] == check.id), None)
            if result is None:
                continue
            counts[result["status"]] = counts.get(result["status"], 0) + 1
            for verdict in result["verdicts"]:
                entry = per_key.setdefault(verdict["key"], {"students": set(), "checks": set()})
                entry["students"].add(r["student"])
                entry["checks"].add(check.id)
        not_passed = len(graded) - counts["passed"]
        checks.append({"id": check.id, "exercise": check.exercise, "points": check.points,
                       "visibility": check.visibility, "title": dict(check.title), **counts,
                       "not_passed": not_passed,
                       "percent_not_passed": _percent(not_passed, len(graded))})
    mistakes, outcomes = [], []
    for key, entry in per_key.items():
        item = {"key": key, "students": len(entry["students"]),
                "percent": _percent(len(entry["students"]), len(graded)),
                "checks": sorted(entry["checks"]),
                "text": {lang: first_sentence(the_rubric.message(key, lang), lang)
                         for lang in ("zh", "en")}}
        (outcomes if key in OUTCOME_KEYS else mistakes).append(item)
    order = lambda item: (-item["students"], item["key"])  # noqa: E731
    return {
        "students": len(records), "graded": len(graded),
        "ungradable": [{"student": r["student"], "entry": r["entry"], "error": r.get("error")}
                       for r in records if r["status"] == "ungradable"],
        "not_graded": [{"student": r["student"], "entry": r["entry"], "error": r.get("error")}
                       for r in records if r["status"] == "missing"],
        "max_score": max_score,
        "mean": round(statistics.fmean(totals), 2) if totals else None,
        "median": round(statistics.median(totals), 2) if totals else None,
        "full_marks": sum(1 for t in totals if t >= max_score),
        "histogram": histogram, "checks": checks,
        "mistakes": sorted(mistakes, key=order), "outcomes": sorted(outcomes, key=order),
    }


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
            lines += [f"- {markdown_inline(r['student'])} ({markdown_inline(r['entry'])}): "
                      f"{markdown_inline(r['error'])}" for r in rows]
    return "\n".join(lines) + "\n"


def student_markdown(the_rubric, record, lang):
    """The student's Markdown page: the report's Markdown, or why the entry was not graded."""
    if record.get("report"):
        text = report.to_markdown(the_rubric, record["report"], lang)
        head, _, rest = text.partition("\n")
        package = "".join(f"\n- {markdown_inline(line)}"
                          for line in describe_package(record.get("package"), lang))
        return f"{head}\n\n{_who(record)}\n{package}{rest}"
    title = "多头注意力 · 评分报告" if lang == "zh" else "Multi-head attention: grading report"
    why = "无法评分" if lang == "zh" else "Could not be graded"
    return (f"# {title}\n\n{_who(record)}\n\n"
            f"**{why}:** {markdown_inline(record.get('error'))}\n\n"
            f"**0 / {_num(record.get('max_score'))}**\n")


def _who(record):
    return f"{markdown_inline(record['student'])} · {markdown_inline(record['entry'])}"


def write_class_outputs(outdir, records, lang):
    from . import feedback_html

    the_rubric = rubric_module.load()
    summary = summarize(the_rubric, records)
    write_atomic(os.path.join(outdir, "gradebook.csv"), gradebook_csv(the_rubric, records))
    write_atomic(os.path.join(outdir, "summary.json"),
                 json_text(summary, ensure_ascii=False, indent=1) + "\n")
    write_atomic(os.path.join(outdir, "summary.md"), summary_markdown(summary, lang))
    write_atomic(os.path.join(outdir, "summary.html"), feedback_html.summary_page(summary, lang))
    return summary
