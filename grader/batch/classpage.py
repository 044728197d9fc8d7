"""The parts of the class summary that name students, as Markdown for summary.md (the students,
what to reteach and who, the near-copy groups, the overrides) and as CSVs (mistakes.csv,
similarity.csv); their HTML for summary.html is classhtml.py's.  Every student string goes through
classtext (inert)."""
import csv
import io

from grader.batch.roster import ACTIONS, WORDS
from grader.render.report import class_points
from grader.render.classtext import csv_cell, md_code_block, md_inline


def _percent(x):
    return f"{round(100 * x)}%"


# -- Markdown -----------------------------------------------------------------------------------
def students_markdown(summary, lang):
    """The students, neediest first (the page's first table)."""
    t = (lambda a, b: a if lang == "zh" else b)
    lines = [f"## {t('学生：先帮谁', 'Students: whom to help first')}", "",
             t("| # | 学生 | 状态 | 得分 | 该重讲的 | 留意 |",
               "| # | student | status | score | to reteach | look twice |"),
             "|---:|---|---|---:|---|---|"]
    for n, row in enumerate(summary["roster"], 1):
        status = WORDS[row["status"]][0 if lang == "zh" else 1]
        note = row["note"][lang]
        lines.append(f"| {n} | {md_inline(row['student'])} | {status}"
                     f"{': ' + md_inline(note) if note else ''} | {class_points(row['score'])} / "
                     f"{class_points(row['max_score'])} | "
                     f"{', '.join('`' + k + '`' for k in row['causes'])} | "
                     f"{md_inline(', '.join(_flag_words(row['flags'], lang)))} |")
    return lines


def _flag_words(flags, lang):
    zh = lang == "zh"
    words = [(f"近似抄袭组 {flags['group']}" if zh else f"near-copy group {flags['group']}")] \
        if "group" in flags else []
    words += [(f"助教改分 {c}" if zh else f"override {c}") for c in flags.get("overrides", [])]
    if "identity" in flags:
        words.append(f"清单写的学生是 {flags['identity']}" if zh
                     else f"manifest names {flags['identity']}")
    n = flags.get("left_out")
    if n:
        words.append(f"笔记本有 {n} 条语句未运行" if zh
                     else f"{n} notebook statement{'s' * (n != 1)} left out")
    return words


def reteach_markdown(summary, lang):
    """Every cause to reteach with how many, who and the lesson section."""
    t = (lambda a, b: a if lang == "zh" else b)
    lines = [f"## {t('该重讲什么', 'What to reteach')}", "",
             t("每个原因每人计一次，检查题的每道题各算一个原因；可筛选的表：mistakes.csv。",
               "Each cause counts a student once, each quiz question is a cause of its own; a "
               "table to filter: mistakes.csv."), ""]
    if not summary["mistakes"]:
        return lines + [t("（没有）", "(none)")]
    lines += [t("| 人数 | 比例 | 原因 | 哪些学生 | 课上去看 |",
                "| students | share | cause | who | lesson section |"), "|---:|---:|---|---|---|"]
    lines += [f"| {item['students']} | {item['percent']}% | `{item['key']}` {item['text'][lang]} | "
              f"{', '.join(md_inline(s) for s in item['who'])} | {item['section'][lang]} |"
              for item in summary["mistakes"]]
    return lines


def near_copies_markdown(near, lang):
    t = (lambda a, b: a if lang == "zh" else b)
    lines = ["", f"## {t('疑似抄袭', 'Near-copies')}", "",
             t(f"阈值 {_percent(near['threshold'])}；全部配对见 similarity.csv。",
               f"threshold {_percent(near['threshold'])}; every pair in similarity.csv."), ""]
    lines += [f"- {t('组', 'group')} {n}: " + ", ".join(md_inline(s) for s in g["members"])
              + f" ({t('最相似', 'strongest')} {_percent(g['strongest'])}, "
              f"{g['pairs']} {t('对', 'pairs')})"
              for n, g in enumerate(near.get("group_figures") or [], 1)]
    for pair in near["pairs"]:
        lines += ["", f"### {_percent(pair['similarity'])} {md_inline(pair['a'])} ↔ "
                      f"{md_inline(pair['b'])} ({_percent(pair['share_a'])} / "
                      f"{_percent(pair['share_b'])})", ""]
        lines += [md_inline(pair["a"]) + t("（共享部分）", " (shared regions)") + ":", "",
                  md_code_block(_shared_text(pair["code_a"], pair["regions"][0]))]
    return lines


def overrides_markdown(summary, lang):
    t = (lambda a, b: a if lang == "zh" else b)
    history = summary.get("override_history", [])
    if not summary["overrides"] and not history:
        return []
    lines = ["", f"## {t('助教改分', 'Overrides')}", "",
             t("| 学生 | 检查 | 分数 | 理由 | 谁、何时 |", "| student | check | score | why | who, when |"),
             "|---|---|---|---|---|"]
    lines += [f"| {md_inline(o['student'])} | `{o['check']}` | {class_points(o['was'])} → "
              f"{class_points(o['score'])} | {md_inline(o['why'])} | "
              f"{md_inline(o.get('who') or '')} {md_inline(o.get('when') or '')} |"
              for o in summary["overrides"]]
    if history:
        lines += ["", t("改分记录：", "History:"), ""]
        lines += [f"- {md_inline(e.get('when') or '')} {md_inline(e.get('who') or '')} "
                  f"{ACTIONS[e['action']][0 if lang == 'zh' else 1]} {md_inline(e['student'])} "
                  f"`{e['check']}` {class_points(e['replaced'])} → "
                  f"{class_points(e['score'])}: {md_inline(e['why'])}" for e in history]
    return lines


def summary_sections_markdown(summary, lang):
    lines = [""] + students_markdown(summary, lang) + [""] + reteach_markdown(summary, lang)
    if summary.get("near_copies") is not None:
        lines += near_copies_markdown(summary["near_copies"], lang)
    return "\n".join(lines + overrides_markdown(summary, lang)) + "\n"


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
                         f"{r['share_a']:.4f}", f"{r['share_b']:.4f}",
                         r["shared"], "yes" if r["flagged"] else ""])
    return out.getvalue()
