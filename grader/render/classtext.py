"""Making a student's strings inert in the class outputs (ids, entry names, code, reasons).

Stand-ins until grader/inert.py (csv_cell / markdown / html / terminal escaping) lands: every class
output of the batch (gradebook, per-mistake lists, near-copies, overrides) calls these three and
nothing else, so switching to inert.py is this one file.
"""
import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(text):
    """Control and bidi characters shown as \\uXXXX; lone surrogates survive as \\udXXX."""
    text = _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", str(text))
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def csv_cell(value):
    """A spreadsheet never runs it: a leading = + - @ (or tab / CR) gets a quote in front."""
    text = "" if value is None else _visible(value) if isinstance(value, str) else value
    if isinstance(text, str) and text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + text
    return text


def md_inline(text):
    """Plain text inside a Markdown line or table cell: no markup, no line break, no link."""
    text = _visible(text).replace("\n", " ").replace("\r", " ").replace("\t", " ")
    return re.sub(r"([\\`*_{}\[\]()<>#+!|~&-])", r"\\\1", text)


def md_code_block(text, info="python"):
    """A fenced block longer than any backtick run in `text`."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{_visible_lines(text)}\n{fence}"


def _visible_lines(text):
    return "\n".join(_visible(line) for line in str(text).split("\n"))


def html_escape(text):
    return html.escape(_visible_lines(text), quote=True)
