"""The parts of the class summary that name students: who made each mistake, near-copies side by
side, overrides; as HTML sections for summary.html, Markdown for summary.md, and the CSVs
(mistakes.csv, similarity.csv).  Every student string goes through classtext (inert)."""
import csv
import io
import urllib.parse

from grader.render.classtext import csv_cell, html_escape as esc, md_code_block, md_inline

CSS = """<style>
.who-list { margin:4px 0 8px 0; } .who-list a { margin-right:10px; white-space:nowrap; }
details.mistake > summary, details.pair > summary { cursor:pointer; padding:4px 0; }
.pair-sides { display:flex; gap:12px; } .pair-sides > div { flex:1 1 0; min-width:0; }
.pair-sides pre { background:#fff; border:1px solid var(--line); border-radius:6px; padding:8px;
                  font:12px/1.4 ui-monospace,"DejaVu Sans Mono","Noto Sans Mono CJK SC",monospace;
                  max-height:420px; overflow:auto; white-space:pre; margin:4px 0; }
.pair-sides mark { background:#fde68a; } .figure { font-weight:700; color:var(--bad); }
</style>"""


def both(zh, en):
    return f'<span class="zh">{esc(zh)}</span><span class="en">{esc(en)}</span>'


def _page_link(student):
    href = "students/" + urllib.parse.quote(student, safe="") + "/feedback.html"
    return f'<a href="{esc(href)}"><code>{esc(student)}</code></a>'


def _percent(x):
    return f"{round(100 * x)}%"


# -- HTML ---------------------------------------------------------------------------------------
def who_html(summary):
    out = ['<h2 id="who">' + both("按错误列出学生（每人每个根本原因计一次）",
                                   "Who made which mistake (each student once per root cause)")
           + '</h2><p class="note"><a href="mistakes.csv">mistakes.csv</a></p>']
    for item in summary["mistakes"]:
        out.append(f'<details class="mistake" data-key="{esc(item["key"])}" open><summary>'
                   f'<code>{esc(item["key"])}</code> {both(item["text"]["zh"], item["text"]["en"])}'
                   f' · {item["students"]}</summary><div class="who-list">'
                   + "".join(_page_link(s) for s in item["who"]) + "</div></details>")
    if not summary["mistakes"]:
        out.append("<p>" + both("（没有）", "(none)") + "</p>")
    return "\n".join(out)


def _marked(code, regions):
    """The code, escaped, with the shared regions in <mark>."""
    out, at = [], 0
    for start, end in regions or []:
        out.append(esc(code[at:start]) + "<mark>" + esc(code[start:end]) + "</mark>")
        at = end
    return "".join(out) + esc(code[at:])


def near_copies_html(near):
    out = ['<h2 id="near-copies">' + both("疑似抄袭：高度相似的提交", "Near-copies")
           + f'</h2><p class="note">{both("阈值", "threshold")} {_percent(near["threshold"])} · '
           '<a href="similarity.csv">similarity.csv</a> · '
           + both("给定代码（模板、课上代码、检查题答案行）不计入。",
                  "Given code (the stub, the lesson's code, the quiz answer lines) never counts.")
           + "</p>"]
    if near.get("flagged", 0) > len(near["pairs"]):
        out.append("<p>" + both(f"共 {near['flagged']} 对超过阈值，这里显示最相似的 "
                                f"{len(near['pairs'])} 对；全部见 similarity.csv。",
                                f"{near['flagged']} pairs reach the threshold; the "
                                f"{len(near['pairs'])} most similar are shown, all are in "
                                "similarity.csv.") + "</p>")
    if near["groups"]:
        out.append('<ul id="groups">' + "".join(
            f'<li>{both("组", "group")} {n}: ' + " ".join(_page_link(s) for s in group) + "</li>"
            for n, group in enumerate(near["groups"], 1)) + "</ul>")
    for n, pair in enumerate(near["pairs"]):
        out.append(f'<details class="pair" data-a="{esc(pair["a"])}" data-b="{esc(pair["b"])}"'
                   f'{" open" if n == 0 else ""}><summary><span class="figure">'
                   f'{_percent(pair["similarity"])}</span> {_page_link(pair["a"])} ↔ '
                   f'{_page_link(pair["b"])} ({_percent(pair["share_a"])} / '
                   f'{_percent(pair["share_b"])})</summary><div class="pair-sides">')
        for side, code, marks in (("a", pair["code_a"], pair["regions"][0]),
                                  ("b", pair["code_b"], pair["regions"][1])):
            out.append(f'<div><code>{esc(pair[side])}</code>'
                       f'<pre>{_marked(code, marks)}</pre></div>')
        out.append("</div></details>")
    if not near["pairs"]:
        out.append("<p>" + both("（没有）", "(none)") + "</p>")
    return "\n".join(out)


def overrides_html(summary):
    if not summary["overrides"]:
        return ""
    rows = "".join(f'<tr><td>{_page_link(o["student"])}</td><td><code>{esc(o["check"])}</code></td>'
                   f'<td class="n">{o["was"]:g} → {o["score"]:g}</td><td>{esc(o["why"])}</td></tr>'
                   for o in summary["overrides"])
    return ('<h2 id="overrides">' + both("人工改分", "Overrides") + '</h2><table class="list">'
            "<tr><th>" + "</th><th>".join(both(*w) for w in (("学生", "student"), ("检查", "check"),
                                                           ("分数", "score"), ("理由", "why")))
            + f"</th></tr>{rows}</table>")


def summary_sections_html(summary):
    parts = [CSS, who_html(summary)]
    if "near_copies" in summary:
        parts.append(near_copies_html(summary["near_copies"]))
    parts.append(overrides_html(summary))
    return "\n".join(p for p in parts if p)


def override_notice_html(record):
    """On the student's page, above the cards."""
    if not record.get("overrides"):
        return ""
    items = "".join(f'<li><code>{esc(o["check"])}</code> {o["was"]:g} → {o["score"]:g}: '
                    f'{esc(o["why"])}</li>' for o in record["overrides"])
    return ('<article class="card" id="overrides" data-check="overrides">'
            '<div class="card-head"><h3>'
            + both("助教改分", "Changed by a TA") + f"</h3></div><ul>{items}</ul></article>")


# -- Markdown -----------------------------------------------------------------------------------
def summary_sections_markdown(summary, lang):
    t = (lambda a, b: a if lang == "zh" else b)
    lines = ["", f"## {t('按错误列出学生', 'Who made which mistake')}", "",
             t("每人每个根本原因计一次；可筛选的表：mistakes.csv。",
               "Each student once per root cause; a table to filter: mistakes.csv."), ""]
    for item in summary["mistakes"]:
        lines.append(f"- `{item['key']}` ({item['students']}): "
                     + ", ".join(md_inline(s) for s in item["who"]))
    near = summary.get("near_copies")
    if near is not None:
        lines += ["", f"## {t('疑似抄袭', 'Near-copies')}", "",
                  t(f"阈值 {_percent(near['threshold'])}；全部配对见 similarity.csv。",
                    f"threshold {_percent(near['threshold'])}; every pair in similarity.csv."), ""]
        lines += [f"- {t('组', 'group')} {n}: " + ", ".join(md_inline(s) for s in g)
                  for n, g in enumerate(near["groups"], 1)]
        for pair in near["pairs"]:
            lines += ["", f"### {_percent(pair['similarity'])} {md_inline(pair['a'])} ↔ "
                          f"{md_inline(pair['b'])} ({_percent(pair['share_a'])} / "
                          f"{_percent(pair['share_b'])})", ""]
            lines += [md_inline(pair["a"]) + t("（共享部分）", " (shared regions)") + ":", "",
                      md_code_block(_shared_text(pair["code_a"], pair["regions"][0]))]
    if summary["overrides"]:
        lines += ["", f"## {t('人工改分', 'Overrides')}", "",
                  t("| 学生 | 检查 | 分数 | 理由 |", "| student | check | score | why |"),
                  "|---|---|---|---|"]
        lines += [f"| {md_inline(o['student'])} | `{o['check']}` | {o['was']:g} → {o['score']:g} | "
                  f"{md_inline(o['why'])} |" for o in summary["overrides"]]
    return "\n".join(lines) + "\n"


def _shared_text(code, regions):
    """The whole lines that hold a shared region, '# ...' where lines are left out."""
    starts = [0] + [i + 1 for i, ch in enumerate(code) if ch == "\n"]
    line_of = lambda at: max(n for n, s in enumerate(starts) if s <= at)  # noqa: E731
    keep = sorted({n for s, e in regions for n in range(line_of(s), line_of(max(s, e - 1)) + 1)})
    lines, out, last = code.split("\n"), [], None
    for n in keep:
        if last is not None and n != last + 1:
            out.append("# ...")
        out.append(lines[n])
        last = n
    return "\n".join(out)


# -- CSV ----------------------------------------------------------------------------------------
def mistakes_csv(summary, records, is_named):
    """One row per named mistake and student (a TA filters by mistake), with the cards where
    that student's mistake was seen."""
    from grader.batch.mistakes import root_causes

    entries = {r["student"]: r for r in records}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["mistake", "student", "entry", "score", "max_score", "checks",
                     "mistake_zh", "mistake_en"])
    for item in summary["mistakes"]:
        for student in item["who"]:
            r = entries[student]
            cards = root_causes(r["report"], is_named).get(item["key"], [])
            writer.writerow([item["key"], csv_cell(student), csv_cell(r["entry"]),
                             f"{r['score']:g}", f"{r['max_score']:g}", " ".join(cards),
                             item["text"]["zh"], item["text"]["en"]])
    return out.getvalue()


def similarity_csv(rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student_a", "student_b", "similarity", "share_a", "share_b",
                     "shared_chars", "flagged"])
    for r in rows:
        writer.writerow([csv_cell(r["a"]), csv_cell(r["b"]), f"{r['similarity']:.4f}",
                         f"{r['share_a']:.4f}", f"{r['share_b']:.4f}",
                         r["shared"], "yes" if r["flagged"] else ""])
    return out.getvalue()
