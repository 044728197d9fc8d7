"""Self-contained HTML pages (no network needed): one per student (feedback.html) and the class summary.

Every text is in the page twice, zh and en (elements with class `zh` / `en`); the button toggles
the class on <html>, and `#lang=en` in the address opens the English view.  Everything the student
controls (their output, messages with their values) is escaped.
"""
import itertools

from grader import words
from grader.inert import html as esc
from grader.rubric import in_lang
from grader.render import report

MARKS = report.STATUS_MARK  # a status's mark; its words are words.toml's [status]

CSS = """
:root { --ok:#15803d; --bad:#b91c1c; --warn:#b45309; --ink:#1f2937; --muted:#6b7280;
        --line:#e5e7eb; --card:#ffffff; --bg:#f3f4f6; --blue:37,99,235; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC",
       "Noto Sans SC","PingFang SC","Microsoft YaHei","WenQuanYi Micro Hei",sans-serif; color:var(--ink); background:var(--bg); }
.lang-zh .en, .lang-en .zh { display:none !important; }
header { background:#111827; color:#fff; padding:18px 28px; display:flex; align-items:center;
         gap:24px; flex-wrap:wrap; }
header h1 { font-size:20px; margin:0; flex:1 1 auto; }
header .who { color:#d1d5db; font-size:14px; }
.total { font-size:28px; font-weight:700; padding:4px 14px; border-radius:8px; background:#374151; }
.total.full { background:var(--ok); }
button#lang-toggle { font:inherit; padding:6px 14px; border-radius:6px; border:1px solid #9ca3af;
                     background:#fff; color:#111827; cursor:pointer; }
main { max-width:1100px; margin:0 auto; padding:20px 24px 40px; }
h2 { font-size:17px; margin:26px 0 10px; color:#374151; border-bottom:2px solid var(--line);
     padding-bottom:4px; }
.card { background:var(--card); border:1px solid var(--line); border-left:6px solid var(--ok);
        border-radius:8px; padding:12px 16px; margin:10px 0; }
.card.failed { border-left-color:var(--bad); } .card.error, .card.timeout { border-left-color:var(--warn); }
.card-head { display:flex; align-items:baseline; gap:12px; }
.card-head h3 { font-size:15px; margin:0; flex:1 1 auto; font-weight:600; }
.card-head code { color:var(--muted); font-size:12px; font-weight:400; margin-left:6px; }
.badge { font-size:13px; font-weight:700; padding:1px 8px; border-radius:10px; color:#fff;
         background:var(--ok); white-space:nowrap; }
.failed .badge { background:var(--bad); } .error .badge, .timeout .badge { background:var(--warn); }
.card.overridden { border-left-color:#6d28d9; } .card .badge.override { background:#6d28d9; }
.was { font-size:12px; color:var(--muted); white-space:nowrap; }
.override-why { margin:8px 0 0; font-size:14px; }
.points { font-weight:700; white-space:nowrap; }
.tag { font-size:11px; color:var(--muted); border:1px solid var(--line); border-radius:8px;
       padding:0 6px; }
pre.feedback { background:#f9fafb; border:1px solid var(--line); border-radius:6px; padding:10px;
               white-space:pre-wrap; word-break:break-word; font:13px/1.45 ui-monospace,
               "DejaVu Sans Mono","Noto Sans Mono CJK SC",monospace; margin:10px 0 4px; }
.heatmaps { display:flex; gap:28px; flex-wrap:wrap; margin:12px 0 4px; align-items:flex-start; }
.heatmaps figure { margin:0; }
.heatmaps figcaption { font-size:13px; font-weight:600; margin-bottom:4px; }
table.heatmap { border-collapse:collapse; font:11px ui-monospace,"DejaVu Sans Mono",monospace; }
table.heatmap th { color:var(--muted); font-weight:400; padding:0 4px; }
table.heatmap td { width:40px; height:30px; text-align:center; border:1px solid #d1d5db;
                   position:relative; }
table.heatmap td.masked { background-image:repeating-linear-gradient(45deg,transparent 0 4px,
                          rgba(0,0,0,.06) 4px 6px); }
table.heatmap td.leak { outline:3px solid var(--bad); outline-offset:-3px; color:var(--bad);
                        font-weight:700; }
table.heatmap td.leak::after { content:"!"; position:absolute; top:0; right:2px; font-size:10px; }
table.heatmap td.differs:not(.leak) { outline:2px dashed var(--warn); outline-offset:-3px; }
table.heatmap td.nan { background:#fde68a; color:var(--bad); font-weight:700; }
.legend, .note { font-size:12px; color:var(--muted); margin:4px 0; }
.probe-error { font-size:13px; color:var(--warn); }
details { margin-top:24px; } details pre { white-space:pre-wrap; font-size:12px; background:#fff;
          border:1px solid var(--line); padding:8px; }
footer { font-size:12px; color:var(--muted); margin-top:28px; }
.bars div.row { display:flex; align-items:center; gap:8px; margin:2px 0; font-size:13px; }
.bars .label { width:90px; text-align:right; color:var(--muted); font-variant-numeric:tabular-nums; }
.bars .bar { height:16px; background:rgb(var(--blue)); border-radius:3px; min-width:1px; }
table.list { border-collapse:collapse; width:100%; background:#fff; font-size:13px; }
table.list th, table.list td { border:1px solid var(--line); padding:4px 8px; text-align:left;
                               vertical-align:top; }
table.list td.n { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
.share { display:inline-block; height:10px; background:var(--bad); border-radius:2px;
         vertical-align:middle; margin-right:6px; }
"""

SCRIPT = """
function setLang(l) { document.documentElement.className = 'lang-' + l;
  document.documentElement.lang = l === 'zh' ? 'zh-CN' : 'en'; }
function toggleLang() {
  setLang(document.documentElement.className === 'lang-zh' ? 'en' : 'zh'); }
(function () { var m = /lang=(zh|en)/.exec(location.hash); if (m) setLang(m[1]); })();
"""


def both(zh, en, tag="span", cls=""):
    extra = f" {cls}" if cls else ""
    return f'<{tag} class="zh{extra}">{esc(zh)}</{tag}><{tag} class="en{extra}">{esc(en)}</{tag}>'


def said_both(section, key, tag="span", cls="", **fields):
    """both() of a words.toml entry, its {placeholders} filled in each language."""
    return both(words.text(section, key, "zh", **fields), words.text(section, key, "en", **fields),
                tag=tag, cls=cls)


def said(value, key):
    """A value that is data, or said in both languages ({"zh", "en"}), within the zh and the en
    frame of [feedback_html] `key` (its {value}): each language's element holds only its own words."""
    frame = words.pair("feedback_html", key)
    return both(*(frame[lang].format(value=in_lang(value, lang)) for lang in words.LANGS))


def _page(title, lang, body, head=""):
    lang, tag = ("en", "en") if lang == "en" else ("zh", "zh-CN")
    return (f'<!DOCTYPE html>\n<html class="lang-{lang}" lang="{tag}">'
            f'<head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
            f"<title>{esc(title)}</title><style>{CSS}</style>{head}</head>\n<body>\n{body}\n"
            f"<script>{SCRIPT}</script>\n</body></html>\n")


def _toggle():
    return ('<button id="lang-toggle" type="button" onclick="toggleLang()">'
            + said_both("feedback_html", "toggle") + "</button>")


_num = report.class_points  # scores on the page: as in the gradebook (28.6667 -> 28.67)


# -- heatmaps ------------------------------------------------------------------------------------
def heatmap_table(grid, allowed, kind, leaks=None, differs=None):
    """[T][T] weights as a table; background = weight; leaking cells (non-zero where the mask
    forbids) outlined red with '!'; cells unlike the reference dashed."""
    t = len(grid)
    rows = ['<tr><th></th>' + "".join(f"<th>k{j}</th>" for j in range(t)) + "</tr>"]
    for i, row in enumerate(grid):
        cells = []
        for j, value in enumerate(row):
            classes = []
            if not allowed[i][j]:
                classes.append("masked")
            if leaks and leaks[i][j]:
                classes.append("leak")
            if differs and differs[i][j]:
                classes.append("differs")
            if value is None:
                classes.append("nan")
                style, text = "", "NaN"
            else:
                alpha = max(0.0, min(1.0, abs(value)))
                style = (f' style="background-color:rgba(var(--blue),{alpha:.3f});'
                         f'color:{"#fff" if alpha > 0.55 else "inherit"}"')
                text = f"{value:.2f}"
            cls = f' class="{" ".join(classes)}"' if classes else ""
            # text is "NaN" or a number as formatted here (abs() refused anything else): no escape
            cells.append(f"<td{cls}{style} title=\"q{i} k{j}: {text}\">{text}</td>")
        rows.append(f"<tr><th>q{i}</th>{''.join(cells)}</tr>")
    return f'<table class="heatmap" data-kind="{kind}">{"".join(rows)}</table>'


PROBES = {"causal": "probe_causal", "band": "probe_band"}  # their [feedback_html] keys
# A failing card draws the call its text shows (the same numbers as the text above it).
FAILED_CALL = "probe_failed_call"


def heatmaps_figure(maps, probe):
    data = (maps or {}).get(probe)
    if not data:
        return ""
    caption = words.pair("feedback_html", PROBES.get(probe, FAILED_CALL))
    if data.get("student") is not None:
        leaks = data.get("leaks")
        n_leaks = sum(sum(1 for x in row if x) for row in leaks)
        yours = heatmap_table(data["student"], data["allowed"], "student", leaks,
                              data.get("differs"))
    else:
        n_leaks = 0
        yours = '<p class="probe-error">' + said(data.get("error", ""), "not_available") + "</p>"
    expected = heatmap_table(data["expected"], data["allowed"], "expected")
    figures = "".join("<figure><figcaption>" + said_both("feedback_html", key) + "</figcaption>"
                      + table + "</figure>"
                      for key, table in (("your_weights", yours), ("expected_weights", expected)))
    legend = both(*(words.text("feedback_html", "legend", lang, probe=caption[lang], T=data["T"],
                               leaks=n_leaks) for lang in words.LANGS), tag="p", cls="legend")
    return f'<div class="heatmaps" data-probe="{esc(probe)}">{figures}</div>{legend}'


def _probe_for(result, maps):
    """The map a card draws: the call its own text heatmap shows when it failed with one, else
    the probe of its kind."""
    if result["id"] in (maps or {}):
        return result["id"]
    return "band" if result["id"] == "attend.mask_arg" else "causal"


# -- the student's page --------------------------------------------------------------------------
def student_page(the_rubric, record, lang="zh", extra=""):
    student, entry = record["student"], record["entry"]
    data = record.get("report")
    max_score = record.get("max_score") or sum(c.points for c in the_rubric.checks)
    score = record.get("score") or 0
    full = data is not None and score >= max_score
    body = ["<header>", "<h1>" + said_both("feedback_html", "title") + "</h1>",
            f'<div class="who"><code>{esc(student)}</code> · {esc(entry)}</div>',
            f'<div id="total" class="total{" full" if full else ""}" data-score="{_num(score)}" '
            f'data-max="{_num(max_score)}">{_num(score)} / {_num(max_score)}</div>', _toggle(),
            "</header>", "<main>", extra]
    if data is None:
        body.append('<article class="card error" data-check="submission" data-status="error">'
                    '<div class="card-head"><span class="badge">'
                    + said_both("feedback_html", "not_graded_badge") + "</span><h3>"
                    + said_both("feedback_html", "not_graded") + "</h3>"
                    f'<span class="points">0 / {_num(max_score)}</span></div>'
                    + both(report.error_of(record, "zh"), report.error_of(record, "en"), tag="pre",
                           cls="feedback")
                    + said_both("feedback_html", "check_submission", tag="p", cls="note")
                    + "</article>")
    else:
        maps = record.get("attention_maps") or {}
        attend = [r for r in data["checks"] if r["exercise"] == "attend"]
        failing = [r for r in attend if r["status"] != "passed"]
        with_maps = ({r["id"] for r in failing} or {attend[0]["id"]}) if attend else set()
        for exercise, results in itertools.groupby(data["checks"], key=lambda r: r["exercise"]):
            body.append(f'<section class="exercise" data-exercise="{esc(exercise)}">'
                        f"<h2>{esc(exercise)}</h2>")
            body += [_card(the_rubric, r, maps if r["id"] in with_maps else None) for r in results]
            body.append("</section>")
        if isinstance(maps, dict) and maps.get("error"):
            body.append(f'<p class="note">{said(maps["error"], "heatmaps_error")}</p>')
        body.append(_footer(data))
    body.append("</main>")
    return _page(f"{student} · attention", lang, "\n".join(body))


def _card(the_rubric, result, maps):
    check = the_rubric.by_id[result["id"]]
    hidden = said_both("feedback_html", "hidden_check", cls="tag") \
        if check.visibility == "hidden" else ""
    override = result.get("override")
    status = "overridden" if override else result["status"]
    parts = [f'<article class="card {result["status"]}{" overridden" if override else ""}" '
             f'id="check-{esc(result["id"])}" data-check="{esc(result["id"])}" '
             f'data-status="{status}">', '<div class="card-head">', _badge(result),
             f"<h3>{both(check.title['zh'], check.title['en'])}<code>{esc(result['id'])}</code></h3>",
             hidden, f'<span class="points">{_num(result["score"])} / {_num(result["max_score"])}</span>',
             "</div>"]
    if override:
        parts.append(_override_line(override))
    if result["status"] != "passed" or result.get("notes"):
        parts.append(f'<pre class="feedback zh">{esc(report.feedback(the_rubric, result, "zh"))}</pre>'
                     f'<pre class="feedback en">{esc(report.feedback(the_rubric, result, "en"))}</pre>')
    if maps is not None:
        parts.append(heatmaps_figure(maps, _probe_for(result, maps)))
    parts.append("</article>")
    return "".join(parts)


def _badge(result):
    """The card's badge: the grader's verdict, or for an overridden card the TA's, with the
    grader's own verdict beside it (never a red "failed" next to full points)."""
    override = result.get("override")
    if not override:
        status = result["status"]
        return f'<span class="badge">{MARKS[status]} {said_both("status", status)}</span>'
    status = override.get("status") or result["status"]
    return ('<span class="badge override">✎ ' + said_both("feedback_html", "changed") + "</span>"
            f'<span class="was" data-was="{_num(override["was"])}">'
            + both(*(words.text("feedback_html", "was", lang, mark=MARKS[status],
                                status=words.text("status", status, lang),
                                was=_num(override["was"]), max_score=_num(result["max_score"]))
                     for lang in words.LANGS))
            + "</span>")


def _override_line(override):
    who = " · ".join(esc(x) for x in (override.get("who"), override.get("when")) if x)
    return ('<p class="override-why">' + said_both("feedback_html", "reason")
            + f"{esc(override['why'])}" + (f' <span class="note">({who})</span>' if who else "")
            + "</p>")


def _footer(data):
    meta = data.get("metadata", {})
    out = []
    output = meta.get("student_output")
    if output:
        out.append("<details><summary>" + said_both("feedback_html", "output")
                   + f"</summary><pre>{esc(output)}</pre></details>")
    out.append("<footer>" + both(report.meta_line(meta, "zh"), report.meta_line(meta, "en"))
               + "</footer>")
    return "".join(out)


# -- the class summary ---------------------------------------------------------------------------
def summary_page(summary, lang="zh", first="", teaching="", last="", head=""):
    """The class page: `first` (the students, grader/batch/classpage.py), `teaching` (what to
    reteach), the histogram and the per-check table, then `last` (near-copies, overrides);
    `head` goes into <head> (the page's own style and script)."""
    m = summary["max_score"]
    body = ["<header>", "<h1>" + said_both("feedback_html", "class_summary") + "</h1>",
            '<div class="who">' + said_both("feedback_html", "class_who",
                                            students=summary["students"], graded=summary["graded"])
            + "</div>"]
    if summary["mean"] is not None:
        body.append(f'<div class="total">{said_both("feedback_html", "mean")} '
                    f'{_num(summary["mean"])} / {_num(m)}</div>')
    body += [_toggle(), "</header>", "<main>", first, teaching]
    body.append('<h2 id="scores">' + said_both("feedback_html", "histogram")
                + '</h2><div class="bars" id="histogram">')
    top = max([b["count"] for b in summary["histogram"]] + [1])
    for b in summary["histogram"]:
        body.append(f'<div class="row"><span class="label">{b["from"]}–{b["to"]}%</span>'
                    f'<span class="bar" style="width:{500 * b["count"] / top:.0f}px"></span>'
                    f'<span>{b["count"]}</span></div>')
    body.append("</div>")
    body += _checks_table(summary)
    body += [last, "</main>"]
    return _page("class summary · attention", lang, "\n".join(body), head)


def _checks_table(summary):
    body = ['<h2 id="per-check">' + said_both("feedback_html", "checks") + "</h2>",
            '<table class="list" id="checks"><tr>'
            + "".join(f"<th>{said_both('feedback_html', key)}</th>"
                      for key in ("check", "points", "passed", "not_passed")) + "</tr>"]
    for c in summary["checks"]:
        body.append(f'<tr data-check="{esc(c["id"])}"><td><code>{esc(c["id"])}</code> '
                    f'{both(c["title"]["zh"], c["title"]["en"])}</td><td class="n">{_num(c["points"])}</td>'
                    f'<td class="n">{c["passed"]}</td><td class="n"><span class="share" '
                    f'style="width:{c["percent_not_passed"]}px"></span>{c["not_passed"]} '
                    f'({c["percent_not_passed"]}%)</td></tr>')
    body.append("</table>")
    if summary["outcomes"]:
        body.append('<h2 id="outcomes">' + said_both("feedback_html", "outcomes")
                    + '</h2><table class="list">')
        for item in summary["outcomes"]:
            body.append(f'<tr><td class="n">{item["percent"]}%</td><td class="n">{item["students"]}'
                        f'</td><td><code>{esc(item["key"])}</code> '
                        f'{both(item["text"]["zh"], item["text"]["en"])}</td></tr>')
        body.append("</table>")
    return body
