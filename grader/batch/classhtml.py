"""The sections of summary.html that name students, in the order a TA reads them: the students
(neediest first, filterable, sortable, printable), what to reteach (every cause, the quiz's too),
then the near-copy groups (one line each, the code side by side on demand) and the overrides with
their history.  Every student string is escaped (grader/inert.py); the page
works without its script (the table comes sorted by need and whole).
"""
import urllib.parse

from grader import words
from grader.batch.classpage import flag_items, percent
from grader.batch.overrides import lapsed, stale_text
from grader.batch.roster import ACTION_WORDS, RANK
from grader.render.report import class_points
from grader.inert import html as esc
from grader.render.feedback_html import both

STYLE = """<style>
.controls { display:flex; gap:12px; align-items:center; margin:6px 0 8px; font-size:13px; }
.controls input, .controls select { font:inherit; padding:3px 6px; }
table.sortable th[data-sort] { cursor:pointer; user-select:none; white-space:nowrap; }
table.sortable th[data-sort]::after { content:" ↕"; color:var(--muted); font-size:11px; }
#students td.status span.st { font-size:12px; font-weight:700; padding:0 6px; border-radius:8px;
  color:#fff; background:var(--muted); white-space:nowrap; }
#students tr[data-status=ungradable] span.st, #students tr[data-status=not_graded] span.st,
#students tr[data-status=untouched_stub] span.st { background:var(--bad); }
#students tr[data-status=timed_out] span.st, #students tr[data-status=crashed] span.st,
#students tr[data-status=import_failed] span.st { background:var(--warn); }
#students tr[data-status=graded] span.st { background:var(--ok); }
.flag { display:inline-block; font-size:11px; border:1px solid var(--line); border-radius:8px;
        padding:0 6px; margin:1px 2px; white-space:nowrap; background:#f9fafb; }
.flag.group { border-color:var(--bad); color:var(--bad); }
.flag.override { border-color:#6d28d9; color:#6d28d9; }
.flag.identity { border-color:var(--warn); color:var(--warn); }
.flag.probing { border-color:var(--bad); color:var(--bad); }
.part { font-size:11px; color:var(--muted); }
.who-list a, .members a { margin-right:8px; white-space:nowrap; }
details.group > summary { cursor:pointer; padding:4px 0; }
.pair-sides { display:flex; gap:12px; } .pair-sides > div { flex:1 1 0; min-width:0; }
.pair-sides pre { background:#fff; border:1px solid var(--line); border-radius:6px; padding:8px;
  font:12px/1.4 ui-monospace,"DejaVu Sans Mono","Noto Sans Mono CJK SC",monospace;
  max-height:420px; overflow:auto; white-space:pre; margin:4px 0; }
.pair-sides mark { background:#fde68a; } .figure { font-weight:700; color:var(--bad); }
@media print {
  header button, .controls, details.group .pair-sides { display:none !important; }
  body { background:#fff; font-size:11px; } main { max-width:none; padding:0; }
  table.list tr { break-inside:avoid; } a { color:inherit; text-decoration:none; }
  #students, #reteach { font-size:11px; }
}
</style>"""

SCRIPT = """<script>
(function () {
  var table = document.getElementById('students'); if (!table) return;
  var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
  var text = document.getElementById('student-filter');
  var status = document.getElementById('status-filter');
  function filter() {
    var q = text.value.trim().toLowerCase(), s = status.value;
    rows.forEach(function (r) {
      var show = (!q || r.textContent.toLowerCase().indexOf(q) >= 0)
        && (!s || r.dataset.status === s);
      r.style.display = show ? '' : 'none'; });
  }
  text.addEventListener('input', filter); status.addEventListener('change', filter);
  var preset = /status=([a-z_]+)/.exec(location.hash), q = /q=([^&]*)/.exec(location.hash);
  if (preset) status.value = preset[1];
  if (q) text.value = decodeURIComponent(q[1]);
  if (preset || q) filter();
  Array.prototype.forEach.call(table.querySelectorAll('th[data-sort]'), function (th) {
    th.addEventListener('click', function () {
      var key = th.dataset.sort, up = th.dataset.dir !== 'up'; th.dataset.dir = up ? 'up' : 'down';
      rows.sort(function (a, b) {
        var x = a.dataset[key], y = b.dataset[key], nx = parseFloat(x), ny = parseFloat(y);
        var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
        return up ? c : -c; });
      rows.forEach(function (r) { body.appendChild(r); }); });
  });
  document.querySelector('.controls').hidden = false;
})();
</script>"""


def said_both(key, section="classhtml", **fields):
    """both() of words.toml's [section] `key`, its {placeholders} filled in each language."""
    return both(*(words.text(section, key, lang, **fields) for lang in words.LANGS))


def page_link(student):
    href = "students/" + urllib.parse.quote(student, safe="") + "/feedback.html"
    return f'<a href="{esc(href)}"><code>{esc(student)}</code></a>'


def _anchor(key):
    return "cause-" + urllib.parse.quote(key, safe="")


def _heads(*columns):
    """<tr> of headings: ([classhtml] key of the words, sort key or None)."""
    return "<tr>" + "".join((f'<th data-sort="{key}">' if key else "<th>") + said_both(name)
                            + "</th>" for name, key in columns) + "</tr>"


# -- the students ---------------------------------------------------------------------------------
def _flags(flags):
    out = []
    for kind, key, fields in flag_items(flags):
        said = said_both(key, "roster", **fields)
        out.append(f'<a class="flag group" href="#group-{fields["n"]}">{said}</a>'
                   if kind == "group" else f'<span class="flag {kind}">{said}</span>')
    return " ".join(out)


def _score_cell(row):
    parts = "".join(f'<br><span class="part">{esc(check)} {passed}/{total}</span>'
                    for check, passed, total in row["partial"])
    return f"{class_points(row['score'])} / {class_points(row['max_score'])}{parts}"


def _student_row(need, row):
    causes = " ".join(f'<a href="#{esc(_anchor(k))}"><code>{esc(k)}</code></a>'
                      for k in row["causes"])
    note = row["note"]
    return (f'<tr data-student="{esc(row["student"])}" data-status="{row["status"]}" '
            f'data-need="{need}" data-score="{class_points(row["score"])}" '
            f'data-causes="{len(row["causes"])}" data-flags="{len(row["flags"])}">'
            f'<td class="n">{need}</td><td>{page_link(row["student"])}'
            f'<br><span class="part">{esc(row["entry"])}</span></td>'
            f'<td class="status"><span class="st">{said_both(row["status"], "roster")}</span>'
            + (f'<br><span class="part">{both(note["zh"], note["en"])}</span>'
               if note["en"] else "")
            + f'</td><td class="n">{_score_cell(row)}</td><td>{causes}</td>'
            f'<td>{_flags(row["flags"])}</td></tr>')


def students_html(summary):
    """Every student, neediest first: status, score, causes, flags, a link to the page."""
    roster = summary["roster"]
    options = "".join(f'<option value="{key}">' + " / ".join(
        esc(words.text("roster", key, lang)) for lang in words.LANGS) + "</option>"
        for key in RANK if any(r["status"] == key for r in roster))
    out = ['<h2 id="students-head">' + said_both("students_head") + "</h2>",
           '<p class="note">' + said_both("students_note") + "</p>",
           '<div class="controls" hidden><label>' + said_both("filter")
           + ' <input id="student-filter" type="search"></label><label>' + said_both("status")
           + f' <select id="status-filter"><option value="">*</option>{options}</select></label>'
           "</div>",
           '<table class="list sortable" id="students"><thead>'
           + _heads(("need", "need"), ("student", "student"), ("status", "need"),
                    ("score", "score"), ("causes", "causes"), ("flags", "flags"))
           + "</thead><tbody>"]
    out += [_student_row(n, row) for n, row in enumerate(roster, 1)]
    out.append("</tbody></table>")
    return "\n".join(out) + SCRIPT


# -- what to reteach ------------------------------------------------------------------------------
def reteach_html(summary):
    """Every cause, the most frequent first: description, how many, who, where in the lesson."""
    out = ['<h2 id="reteach-head">' + said_both("reteach_head") + "</h2>",
           '<p class="note">' + said_both("reteach_note")
           + ' · <a href="mistakes.csv">mistakes.csv</a></p>']
    if not summary["mistakes"]:
        return "\n".join(out + ["<p>" + said_both("none") + "</p>"])
    out.append('<table class="list" id="reteach">' + _heads(
        ("students", None), ("cause", None), ("who", None), ("section", None)))
    for item in summary["mistakes"]:
        out.append(f'<tr id="{esc(_anchor(item["key"]))}" data-key="{esc(item["key"])}">'
                   f'<td class="n"><span class="share" style="width:{item["percent"]}px"></span>'
                   f'{item["students"]} ({item["percent"]}%)</td>'
                   f'<td><code>{esc(item["key"])}</code><br>'
                   f'{both(item["text"]["zh"], item["text"]["en"])}</td>'
                   f'<td class="who-list">{" ".join(page_link(s) for s in item["who"])}</td>'
                   f'<td>{both(item["section"]["zh"], item["section"]["en"])}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


# -- near-copies ----------------------------------------------------------------------------------
def _marked(code, regions):
    """The code, escaped, with the shared regions in <mark>."""
    out, at = [], 0
    for start, end in regions or []:
        out.append(esc(code[at:start]) + "<mark>" + esc(code[start:end]) + "</mark>")
        at = end
    return "".join(out) + esc(code[at:])


def _side_by_side(pair):
    out = [f'<div class="pair-sides" data-a="{esc(pair["a"])}" data-b="{esc(pair["b"])}">']
    for side, code, marks in (("a", pair["code_a"], pair["regions"][0]),
                              ("b", pair["code_b"], pair["regions"][1])):
        out.append(f'<div><code>{esc(pair[side])}</code><pre>{_marked(code, marks)}</pre></div>')
    return "".join(out) + "</div>"


def _group(n, group, pair):
    members = " ".join(page_link(s) for s in group["members"])
    strength = said_both("strength", strongest=percent(group["strongest"]),
                         weakest=percent(group["weakest"]), pairs=group["pairs"])
    names = esc(" ".join(group["members"]))
    line = (f'<details class="group" id="group-{n}" data-members="{names}">'
            f'<summary><span class="figure">{percent(group["strongest"])}</span> '
            f'{said_both("group")} {n}: <span class="members">{members}</span> · {strength}'
            "</summary>")
    if pair is not None:
        line += ('<p class="note">' + said_both("pair_note")
                 + f" {page_link(pair['a'])} ↔ {page_link(pair['b'])} ({percent(pair['share_a'])}"
                 f" / {percent(pair['share_b'])})</p>" + _side_by_side(pair))
    return line + "</details>"


def near_copies_html(near):
    """One line per group (members, strength); its strongest pair side by side on demand."""
    out = ['<h2 id="near-copies">' + said_both("near_head")
           + f'</h2><p class="note">{said_both("threshold")} {percent(near["threshold"])} · '
           '<a href="similarity.csv">similarity.csv</a> · '
           + said_both("near_note", flagged=near["flagged"], groups=len(near["groups"]))
           + "</p>"]
    pairs = {(p["a"], p["b"]): p for p in near["pairs"]}
    for n, group in enumerate(near.get("group_figures") or [], 1):
        out.append(_group(n, group, pairs.get(tuple(group["pair"]))))
    if not near["groups"]:
        out.append("<p>" + said_both("none") + "</p>")
    return "\n".join(out)


# -- overrides ------------------------------------------------------------------------------------
def overrides_html(summary):
    """The overrides in force (who, when, why, the score replaced) and every change before."""
    items, history = summary["overrides"], summary.get("override_history", [])
    if not items and not history:
        return ""
    out = ['<h2 id="overrides">' + said_both("overrides_head") + "</h2>"]
    out += [f'<p class="note stale" data-student="{esc(e["student"])}" data-check='
            f'"{esc(e["check"])}">' + both(*(stale_text(e, lang) for lang in words.LANGS))
            + "</p>" for e in lapsed(history)]
    if items:
        out.append('<table class="list" id="overrides-now">' + _heads(
            ("student", None), ("check", None), ("override_score", None), ("why", None),
            ("who_when", None)) + "".join(
            f'<tr data-student="{esc(o["student"])}" data-check="{esc(o["check"])}">'
            f'<td>{page_link(o["student"])}</td><td><code>{esc(o["check"])}</code></td>'
            f'<td class="n">{class_points(o["was"])} → {class_points(o["score"])}</td>'
            f'<td>{esc(o["why"])}</td><td>{esc(o.get("who") or "")} {esc(o.get("when") or "")}'
            "</td></tr>" for o in items) + "</table>")
    else:
        out.append("<p>" + said_both("no_override") + "</p>")
    if history:
        out.append('<details id="override-history"><summary>'
                   + said_both("history", n=len(history))
                   + '</summary><table class="list">' + "".join(
                       f'<tr data-action="{esc(e["action"])}"><td>{esc(e.get("when") or "")}</td>'
                       f'<td>{esc(e.get("who") or "")}</td><td>{said_both(ACTION_WORDS[e["action"]], "roster")}</td>'
                       f'<td>{page_link(e["student"])}</td><td><code>{esc(e["check"])}</code></td>'
                       f'<td class="n">{class_points(e["replaced"])} → {class_points(e["score"])}</td>'
                       f'<td>{esc(e["why"])}</td></tr>' for e in history)
                   + "</table></details>")
    return "\n".join(out)


def last_sections_html(summary):
    return near_copies_html(summary["near_copies"]) + "\n" + overrides_html(summary)


def override_notice_html(record):
    """On the student's page, above the cards."""
    if not record.get("overrides"):
        return ""
    items = "".join(f'<li><a href="#check-{esc(o["check"])}"><code>{esc(o["check"])}</code></a> '
                    f'{class_points(o["was"])} → {class_points(o["score"])}: {esc(o["why"])}</li>'
                    for o in record["overrides"])
    return ('<article class="card overridden" id="overrides" data-check="overrides">'
            '<div class="card-head"><h3>'
            + said_both("notice") + f"</h3></div><ul>{items}</ul></article>")
