"""The parts of the class summary that name students, as Markdown for summary.md (the students,
what to reteach and who, the near-copy groups, the overrides) and as CSVs (mistakes.csv,
similarity.csv); their HTML for summary.html is classhtml.py's.  Every student string goes through
grader/inert.py."""
import csv
import io

from grader import words
from grader.batch.overrides import lapsed, stale_text
from grader.batch.roster import ACTION_WORDS
from grader.render.report import class_points, plural
from grader.inert import csv_cell, markdown_fence, markdown_inline as md_inline

SHOWN_CHECKS = 3  # an outcome's sentence names this many cards, then how many in all


def percent(x):
    """A share (0..1) as a whole percent."""
    return f"{round(100 * x)}%"


def said_in(section, lang):
    """words.toml's [section] in `lang`: said(key, **fields)."""
    return lambda key, **fields: words.text(section, key, lang, **fields)


def outcome_sentence(item, lang, name=str, check=str):
    """An outcome that names no cause (summary["outcomes"]'s item) as one sentence of `lang`: what
    happened, to whom, on which cards; `name` and `check` make a student id and a check id safe
    for the medium (plain text: the page escapes it whole)."""
    said = said_in("outcome", lang)
    join = words.text("report", "and", lang).join
    checks = [check(c) for c in item["checks"]]
    shown = join(checks[:SHOWN_CHECKS])
    if len(checks) > SHOWN_CHECKS:
        shown = said("checks_more", shown=shown, n=len(checks))
    return said("sentence", what=words.text("outcomes", item["key"], lang),
                who=join(name(s) for s in item["who"]), cards=shown)


def flag_items(flags):
    """(kind, [roster] key, fields) of each of a roster row's flags, in the order shown."""
    items = [("group", "flag_group", {"n": flags["group"]})] if "group" in flags else []
    items += [("override", "flag_override", {"check": c}) for c in flags.get("overrides", [])]
    if "identity" in flags:
        items.append(("identity", "flag_identity", {"manifest": flags["identity"]}))
    n = flags.get("left_out")
    if n:
        items.append(("left-out", "flag_left_out",
                      {"n": n, "statements": plural(n, "statement", "statements")}))
    if flags.get("probing"):
        items.append(("probing", "flag_probing", {"ids": ", ".join(flags["probing"])}))
    return items


# -- Markdown -----------------------------------------------------------------------------------
def students_markdown(summary, lang):
    """The students, neediest first (the page's first table)."""
    said = said_in("classpage", lang)
    lines = [f"## {said('students_head')}", "", said("students_table"),
             "|---:|---|---|---:|---|---|"]
    for n, row in enumerate(summary["roster"], 1):
        status = words.text("roster", row["status"], lang)
        note = row["note"][lang]
        lines.append(f"| {n} | {md_inline(row['student'])} | {status}"
                     f"{': ' + md_inline(note) if note else ''} | {class_points(row['score'])} / "
                     f"{class_points(row['max_score'])} | "
                     f"{', '.join('`' + k + '`' for k in row['causes'])} | "
                     f"{md_inline(', '.join(_flag_words(row['flags'], lang)))} |")
    return lines


def _flag_words(flags, lang):
    return [words.text("roster", key, lang, **fields) for _, key, fields in flag_items(flags)]


def reteach_markdown(summary, lang):
    """Every cause to reteach with how many, who and the lesson section."""
    said = said_in("classpage", lang)
    lines = [f"## {said('reteach_head')}", "", said("reteach_note"), ""]
    if not summary["mistakes"]:
        return lines + [said("none")]
    lines += [said("reteach_table"), "|---:|---:|---|---|---|"]
    lines += [f"| {item['students']} | {item['percent']}% | `{item['key']}` {item['text'][lang]} | "
              f"{', '.join(md_inline(s) for s in item['who'])} | {item['section'][lang]} |"
              for item in summary["mistakes"]]
    return lines


def near_copies_markdown(near, lang):
    said = said_in("classpage", lang)
    lines = ["", f"## {said('near_head')}", "",
             said("near_note", threshold=percent(near["threshold"])), ""]
    lines += [f"- {said('group')} {n}: " + ", ".join(md_inline(s) for s in g["members"])
              + f" ({said('strongest')} {percent(g['strongest'])}, "
              f"{g['pairs']} {said('pairs')})"
              for n, g in enumerate(near.get("group_figures") or [], 1)]
    for pair in near["pairs"]:
        lines += ["", f"### {percent(pair['similarity'])} {md_inline(pair['a'])} ↔ "
                      f"{md_inline(pair['b'])} ({percent(pair['share_a'])} / "
                      f"{percent(pair['share_b'])})", ""]
        lines += [md_inline(pair["a"]) + said("shared") + ":", "",
                  markdown_fence(_shared_text(pair["code_a"], pair["regions"][0]), "python")]
    return lines


def overrides_markdown(summary, lang):
    said = said_in("classpage", lang)
    history = summary.get("override_history", [])
    if not summary["overrides"] and not history:
        return []
    lines = ["", f"## {said('overrides_head')}", ""]
    stale = [f"- {stale_text(e, lang, md_inline)}" for e in lapsed(history)]
    lines += stale + [""] * bool(stale) + [said("overrides_table"), "|---|---|---|---|---|"]
    lines += [f"| {md_inline(o['student'])} | `{o['check']}` | {class_points(o['was'])} → "
              f"{class_points(o['score'])} | {md_inline(o['why'])} | "
              f"{md_inline(o.get('who') or '')} {md_inline(o.get('when') or '')} |"
              for o in summary["overrides"]]
    if history:
        lines += ["", said("history"), ""]
        lines += [f"- {md_inline(e.get('when') or '')} {md_inline(e.get('who') or '')} "
                  f"{words.text('roster', ACTION_WORDS[e['action']], lang)} "
                  f"{md_inline(e['student'])} `{e['check']}` {class_points(e['replaced'])} → "
                  f"{class_points(e['score'])}: {md_inline(e['why'])}" for e in history]
    return lines


def _shared_text(code, regions):
    """The whole lines that hold a shared region, '# ...' where lines are left out."""
    keep = sorted({n for s, e in regions
                   for n in range(code.count("\n", 0, s), code.count("\n", 0, max(s, e - 1)) + 1)})
    lines, out, last = code.split("\n"), [], None
    for n in keep:
        if last is not None and n != last + 1:
            out.append("# ...")
        out.append(lines[n])
        last = n
    return "\n".join(out)


# -- CSV ----------------------------------------------------------------------------------------
def mistakes_csv(summary, records, causes_of):
    """One row per cause to reteach and student (a TA filters by mistake), with the cards where
    that student's mistake was seen."""
    entries = {r["student"]: r for r in records}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["mistake", "student", "entry", "score", "max_score", "checks",
                     "mistake_zh", "mistake_en"])
    for item in summary["mistakes"]:
        for student in item["who"]:
            r = entries[student]
            cards = causes_of(r).get(item["key"], [])
            writer.writerow([item["key"], csv_cell(student), csv_cell(r["entry"]),
                             class_points(r["score"]), class_points(r["max_score"]), " ".join(cards),
                             item["text"]["zh"], item["text"]["en"]])
    return out.getvalue()


def similarity_csv(rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student_a", "student_b", "similarity", "share_a", "share_b",
                     "shared_chars", "flagged"])
    for r in rows:
        writer.writerow([csv_cell(r["a"]), csv_cell(r["b"]), f"{r['similarity']:.4f}",
                         f"{r['share_a']:.4f}", f"{r['share_b']:.4f}", r["shared"],
                         "yes" if r["flagged"] else ""])
    return out.getvalue()
