"""Student strings made inert for the medium they are written to: one rule per medium.

Every writer passes student strings (output, messages, file and member names, ids, manifest
fields) through one of these.  Each takes any `str`, lone surrogates included, and returns text
that encodes as UTF-8.
"""
import html as _html
import json
import re

# C0 controls but newline and tab, DEL, C1 controls, bidirectional overrides and isolates (which
# reorder what the reader sees), the line and paragraph separators, and lone surrogates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                      "\u2066-\u2069\ud800-\udfff]")
# What can start a link or image ([), raw HTML (<), code (`), emphasis (* _ ~), a table cell (|)
# or a heading (#); other punctuation stays as it is, so a path reads as a path.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|<>~])")
_BACKTICKS = re.compile("`+")
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _visible(match):
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text):
    """Every control character except newline and tab shown as a \\xNN / \\uNNNN escape."""
    return _CONTROL.sub(_visible, str(text))


def one_line(text):
    """for_terminal, with newlines and tabs shown too: for a progress line or a table cell."""
    return for_terminal(str(text)).replace("\n", "\\n").replace("\t", "\\t")


def markdown_fence(text, info="text"):
    """A fenced code block whose fence is longer than any run of backticks inside."""
    body = for_terminal(text)
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def markdown_inline(text):
    """Text outside fences: one line, every Markdown and HTML special character backslashed."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", one_line(text))


def csv_cell(text):
    """A CSV cell that a spreadsheet shows as text (OWASP: a formula prefix gets a quote)."""
    text = str(text)
    if text.startswith(CSV_FORMULA_STARTS):
        text = "'" + text
    return for_terminal(text)


def html(text):
    """HTML-escaped (quotes too), control characters visible."""
    return _html.escape(for_terminal(text), quote=True)


def json_text(obj, lines=None, **options):
    """json.dumps whose text is safe to print and encode: lone surrogates, DEL, C1 and
    bidirectional controls written as \\uXXXX escapes (the same string to a JSON reader).

    `lines` (a depth, with `indent`): the first `lines` levels laid out one member a line, anything
    deeper on its member's line (the same JSON to a reader)."""
    if lines is None:
        text = json.dumps(obj, **options)
    else:
        indent = options.pop("indent", 1)
        pad = " " * indent if isinstance(indent, int) else str(indent)
        text = _shallow(obj, lines, pad, "\n", options)
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _shallow(value, lines, pad, newline, options):
    """json_text's layout of `value`: one member a line down to `lines` levels."""
    if lines <= 0 or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, **options)
    inner = newline + pad
    if isinstance(value, dict):  # keys as json writes them (1 -> "1", True -> "true")
        items = sorted(value.items()) if options.get("sort_keys") else value.items()
        members = (f"{json.dumps(k if isinstance(k, str) else _key(k, options), **options)}: "
                   f"{_shallow(v, lines - 1, pad, inner, options)}" for k, v in items)
        return "{" + inner + ("," + inner).join(members) + newline + "}"
    members = (_shallow(v, lines - 1, pad, inner, options) for v in value)
    return "[" + inner + ("," + inner).join(members) + newline + "]"


def _key(key, options):
    """A dict key that is not a str, as json writes it (NaN refused where json refuses it)."""
    return json.dumps(key, allow_nan=options.get("allow_nan", True))
