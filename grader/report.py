"""The result model and its renderers: text, JSON, Markdown and Gradescope's results.json.

Scores and verdicts are computed once (`build`); every renderer only formats them, in zh or en.
"""
from . import inert

STATUS_MARK = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "⏱"}
STATUS_ZH = {"passed": "通过", "failed": "未通过", "error": "出错", "timeout": "超时"}


def build(rubric, checks, parts, metadata):
    """One entry per rubric check: status, score and the verdict data of its failing parts."""
    results = []
    for check in checks:
        runs = parts.get(check.id) or [{"name": "", "status": "error",
                                        "verdict": {"status": "error", "key": "internal",
                                                    "fields": {"message": "the check did not run"}}}]
        passed = sum(1 for r in runs if r["status"] == "passed")
        failing = [r for r in runs if r["status"] != "passed"]
        status = "passed" if not failing else _worst(r["status"] for r in failing)
        results.append({
            "id": check.id, "exercise": check.exercise, "visibility": check.visibility,
            "status": status, "max_score": check.points,
            "score": round(check.points * passed / len(runs), 4),
            "parts": [{"name": r["name"], "status": r["status"]} for r in runs],
            "verdicts": [r["verdict"] for r in failing if r["verdict"]],
        })
    return {"score": round(sum(r["score"] for r in results), 4),
            "max_score": sum(r["max_score"] for r in results),
            "checks": results, "metadata": metadata}


def _worst(statuses):
    order = ["failed", "timeout", "error"]
    return max(statuses, key=order.index)


def feedback(rubric, result, lang):
    """What was checked -> what went wrong (named mistake, expected vs got) -> where to look."""
    if result["status"] == "passed":
        return ""
    check = rubric.by_id[result["id"]]
    lines, seen = [], set()
    for verdict in result["verdicts"]:
        text = rubric.message(verdict["key"], lang, **verdict.get("fields", {}))
        if text in seen:
            continue
        seen.add(text)
        lines.append(text)
        if verdict.get("detail"):
            lines.append(("   细节 detail: " if lang == "zh" else "   detail: ") + verdict["detail"])
        if verdict.get("heatmap"):
            lines.append(verdict["heatmap"])
    keys = {v["key"] for v in result["verdicts"]}
    if keys & {"not_implemented", "import_failed"}:
        return "\n".join(lines)
    checked = ("检查内容：" if lang == "zh" else "Checked: ") + check.checked[lang]
    where = ("去看：" if lang == "zh" else "See: ") + rubric.sections.get(check.section, "")
    return "\n".join([checked] + lines + [where])


def misconception(result):
    keys = [v["key"] for v in result["verdicts"]]
    return keys[0] if keys else None


def to_json(rubric, report, lang):
    out = {"score": report["score"], "max_score": report["max_score"], "checks": []}
    for r in report["checks"]:
        out["checks"].append({
            "id": r["id"], "title": rubric.by_id[r["id"]].title[lang], "status": r["status"],
            "score": r["score"], "max_score": r["max_score"], "visibility": r["visibility"],
            "exercise": r["exercise"], "misconception": misconception(r),
            "feedback": feedback(rubric, r, lang), "parts": r["parts"],
        })
    out.update({k: v for k, v in report.items() if k not in ("score", "max_score", "checks")})
    return inert.json_text(out, ensure_ascii=False, indent=2)


def to_text(rubric, report, lang, hidden_not_run=0):
    lines = []
    current = None
    for r in report["checks"]:
        if r["exercise"] != current:
            current = r["exercise"]
            lines.append(f"\n== {current} ==")
        check = rubric.by_id[r["id"]]
        status = STATUS_ZH[r["status"]] if lang == "zh" else r["status"]
        lines.append(f"{STATUS_MARK[r['status']]} {r['id']}  {check.title[lang]}  "
                     f"[{_num(r['score'])}/{_num(r['max_score'])}] {status}")
        text = feedback(rubric, r, lang)
        if text:
            lines.extend("    " + line for line in text.splitlines())
    passed = sum(1 for r in report["checks"] if r["status"] == "passed")
    total = len(report["checks"])
    if lang == "zh":
        lines.append(f"\n得分 score: {_num(report['score'])} / {_num(report['max_score'])}"
                     f"（{passed}/{total} 项检查通过）")
        if hidden_not_run:
            lines.append(f"另有 {hidden_not_run} 项隐藏检查没有运行，由老师评分时运行"
                         f"（{hidden_not_run} hidden checks were not run）。")
    else:
        lines.append(f"\nscore: {_num(report['score'])} / {_num(report['max_score'])} "
                     f"({passed}/{total} checks passed)")
        if hidden_not_run:
            lines.append(f"{hidden_not_run} hidden checks were not run; your instructor runs them.")
    meta = report["metadata"]
    lines.append(f"[isolation: {meta.get('isolation')}; seed {meta.get('seed')}; "
                 f"torch {meta.get('torch')}; rubric {meta.get('rubric_hash')}]")
    output = meta.get("student_output")
    if output:
        label = "你的代码打印的内容（已截断）" if lang == "zh" else "what your code printed (truncated)"
        lines.append(f"\n--- {label} / student output ---")
        lines.extend("| " + line for line in output.splitlines()[:40])
        lines.append("--- end of student output ---")
    # The student's output, messages and values are in it: no control character reaches a terminal.
    return inert.for_terminal("\n".join(lines).lstrip("\n") + "\n")


def to_markdown(rubric, report, lang):
    title = "多头注意力 · 评分报告" if lang == "zh" else "Multi-head attention: grading report"
    lines = [f"# {title}", "",
             f"**{_num(report['score'])} / {_num(report['max_score'])}**", "",
             "| | check | points | |", "|---|---|---|---|"]
    for r in report["checks"]:
        check = rubric.by_id[r["id"]]
        lines.append(f"| {STATUS_MARK[r['status']]} | `{r['id']}` {check.title[lang]} | "
                     f"{_num(r['score'])}/{_num(r['max_score'])} | {r['status']} |")
    for r in report["checks"]:
        text = feedback(rubric, r, lang)
        if text:
            lines += ["", f"### `{r['id']}`", "", inert.markdown_fence(text)]
    meta = report["metadata"]
    lines += ["", f"<sub>isolation {meta.get('isolation')} · seed {meta.get('seed')} · "
                  f"torch {meta.get('torch')} · rubric {meta.get('rubric_hash')}</sub>", ""]
    return "\n".join(lines)


def to_gradescope(rubric, report, lang):
    """Gradescope's results.json: one test per check, error/timeout shown as failed with why."""
    tests = []
    for number, r in enumerate(report["checks"], 1):
        check = rubric.by_id[r["id"]]
        output = feedback(rubric, r, lang)
        fenced = inert.markdown_fence(output) if output else ""
        if r["status"] in ("error", "timeout"):
            fenced = f"**{r['status']}**\n\n{fenced}"
        tests.append({
            "name": f"{r['id']}: {check.title[lang]}", "number": str(number),
            "score": r["score"], "max_score": r["max_score"],
            "status": "passed" if r["status"] == "passed" else "failed",
            "output": fenced,
            "output_format": "md", "tags": [r["id"], r["exercise"]],
            "visibility": "visible" if check.visibility == "public" else "after_published",
        })
    meta = report["metadata"]
    return inert.json_text({
        "score": report["score"], "output_format": "md", "visibility": "visible", "tests": tests,
        "output": f"isolation {meta.get('isolation')} · rubric {meta.get('rubric_hash')}",
    }, ensure_ascii=False, indent=2)


def _num(x):
    return f"{x:g}"


RENDERERS = {"json": to_json, "markdown": to_markdown, "gradescope": to_gradescope}
