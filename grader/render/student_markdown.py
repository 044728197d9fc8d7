"""A student's Markdown page in a batch: the report's Markdown with who and what was graded, the
package's notes and the TAs' overrides; or why the entry was not graded."""
from grader import words
from grader.render import report
from grader.inert import markdown_inline as md_inline
from grader.render.package import describe as describe_package


def _num(x):
    return "" if x is None else report.points(x)


def _who(record):
    """The id and the entry's name as the student wrote it: both inert (the id is made of safe
    characters, but a Markdown reader still sees _ and + in it)."""
    return f"{md_inline(record['student'])} · {md_inline(record['entry'])}"


def student_markdown(the_rubric, record, lang):
    """The student's Markdown page: the report's Markdown, or why the entry was not graded."""
    if record.get("report"):
        text = report.to_markdown(the_rubric, record["report"], lang)
        head, _, rest = text.partition("\n")
        package = "".join(f"\n- {md_inline(line)}"
                          for line in describe_package(record.get("package"), lang))
        changed = "".join(f"\n- {words.text('student_markdown', 'changed', lang)}: `{o['check']}` "
                          f"{_num(o['was'])} → {_num(o['score'])}: {md_inline(o['why'])}"
                          for o in record.get("overrides", []))
        return f"{head}\n\n{_who(record)}\n{package}{changed}{rest}"
    title = words.text("student_markdown", "title", lang)
    why = words.text("student_markdown", "not_graded", lang)
    return (f"# {title}\n\n{_who(record)}\n\n"
            f"**{why}:** {md_inline(report.error_of(record, lang))}\n\n**0 / {_num(record.get('max_score'))}**\n")
