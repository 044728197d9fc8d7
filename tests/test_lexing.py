"""The near-copies' tokens (grader/batch/lexing.py): pygments' own, item for item, and copydetect's
filtered code, value for value, however the text is written; the rules left out for a first
character are only those that cannot match there."""
import json
import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.batch import lexing, similarity  # noqa: E402

pygments = pytest.importorskip("pygments")
from pygments.lexer import RegexLexer, bygroups, default, include  # noqa: E402
from pygments.token import Name, Number, Operator, String, Text  # noqa: E402

# Text written to reach the lexer's corners: every kind of string prefix and quote, f-strings
# nested and broken off, continuations, tabs and form feeds, CR and CRLF, a byte-order mark,
# names beyond ASCII, soft keywords, numbers of every form, text no rule takes, unfinished text.
HOSTILE = [
    "", "\n", "x", "'", '"', '"""', "'''", "f'", 'rb"\\', "#", "\\", "\\\n", "\t\t\n\x0c",
    "\ufeffimport torch\n", "a = 1\r\nb = 2\rc = 3\n",
    "s = f'{x!r:>{width}} {y:{w}.{p}f} {{}} {z=}'\n", 'u = F"{a[\'k\']}" Rb\'\\x00\' bR"""\n"""\n',
    "t = rf'{x}\\d' fr\"{y}\" RF'''{z}\n'''\nb = BR'x' rB'''y'''\n",
    "def 函数(变量, *, 参数=None) -> '返回':\n    return 变量 @ 参数  # 注释\n",
    "match command:\n    case [x, *rest] if x > 0:\n        pass\n    case {'k': _}:\n        type X = int\n",
    "n = 0x_FF + 0o17 + 0b1010 + 1_000.5e-3j + .5 + 5. + 1E+10 + 0\n",
    "x = (yield) ; lambda *a, **k: ... ; a := 1 ; @decorator\nclass C(B, metaclass=M): pass\n",
    "print(f'{f\"{f'{1}'}\"}')\n", "`$?!\x00\x01\u200b\U0001f600\n", "'''unterminated\n" * 3,
    "x = '''a\nb''' + \"c\\\nd\"\n", "async def f():\n    await g()\n    async with a as b: ...\n",
    "from . import (a as b,\n    c)\nimport os.path as p, sys\n", "if x:\n\tpass\n \telse\n",
]


def corpus():
    """The kit's own Python files and the test corpus: every submission written for the tests."""
    files = [p for p in sorted(ROOT.glob("**/*.py")) if ".venv" not in p.parts and
             "node_modules" not in p.parts and p.stat().st_size < 400_000]
    texts = [p.read_text(encoding="utf-8", errors="surrogateescape") for p in files]
    for notebook in sorted((ROOT / "tests" / "submissions").glob("**/*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
        texts.append("\n".join("".join(c.get("source", "")) for c in cells
                               if c.get("cell_type") == "code"))
    return texts


def edited(texts, count, seed=12):
    """Random edits of real files: quotes, brackets, prefixes and line ends put in or taken out."""
    rng = random.Random(seed)
    out = []
    for text in rng.sample(texts, min(count, len(texts))):
        chars = list(text[:6000])
        for _ in range(rng.randint(1, 10)):
            chars.insert(rng.randrange(len(chars) + 1),
                         rng.choice(list("'\"\\\n\t#{}()[]frbRBu:=!%\r\x0c中 ") + ["'''", 'f"{']))
        for _ in range(rng.randint(0, 6)):
            if chars:
                del chars[rng.randrange(len(chars))]
        out.append("".join(chars))
    return out


@pytest.fixture(scope="module")
def texts():
    found = corpus()
    assert len(found) > 200  # the corpus is there: the comparison is not over nothing
    return found + HOSTILE + edited(found, 400)


def test_tokens_are_pygments_own_and_the_filtered_code_copydetects(texts):
    utils = similarity.load_copydetect().utils
    lexer = lexing.python_lexer()
    for text in texts:
        assert lexing.tokens(text) == list(lexer.get_tokens(text)), text[:200]
        ours, theirs = lexing.filter_code(text), utils.filter_code(text, "attention.py", "python")
        assert ours[0] == theirs[0], text[:200]
        assert np.array_equal(ours[1], theirs[1]) and ours[1].shape == theirs[1].shape, text[:200]


def test_every_state_of_pythons_lexer_is_joined():
    """Else the speed would be pygments' again without anyone seeing it."""
    lexing.tokens("x = 1\n")
    plan = lexing._plans[type(lexing.python_lexer())]
    assert plan is not None and all(plan.joinable.values())
    starts = [plan.starts_of(state) for state in plan.rules]
    kept = sum(start is not None for each in starts for start in each)
    assert kept > 0.8 * sum(len(each) for each in starts)


# Patterns of every construct _first reads, and strings to try them on.
PATTERNS = [r"abc", r"[a-c]x|y", r"[^\W\d]\w*", r"\d+(\.\d*)?", r"\s*x", r"(a|b?)c", r"(?:ab)*c",
            r"a?b?c?", r"(?<!\.)(abs|all)\b", r"(?=x)\w", r"^\s*#", r"\bif\b", r"(?i:rb)'", r"(?i)f'",
            r"[\s\S]", r"x*+y", r"(?>ab|a)c", r"[^'\\\n]+", r"\\\n", r"\.\.\.", r"(?-i:x)", r"(?s:.)",
            r"(a)\1", r"(x)?(?(1)a|b)", r".", r"(?i)[a-z]+", r"(x|)", r"", r"$", r"[\d_]+j", r"[-+*/%]=?"]
STRINGS = ["abc", "axy", "y", "ab", "c", "if x", "abs(", "'", "f'", "F'", "rB'", "RB'", "_x1",
           "1.5", "   x", "\n#", "...", "\\\n", "aac", "xxy", "x", "zz", "-=", "3_0j", "中文", "É"]


def test_a_rule_is_left_out_only_for_a_first_character_it_cannot_begin_with():
    for pattern in PATTERNS:
        compiled = re.compile(pattern, re.MULTILINE)
        start = lexing._first_char(compiled)
        for text in STRINGS + [chr(c) + "abc" for c in range(0, 0x250)]:
            if compiled.match(text) and start is not None:
                assert start(text[0]), (pattern, text)
    # what it cannot read, or what may match nothing, is kept for every character
    for pattern in (r".", r"(x)?(?(1)a|b)", r"", r"$", r"a?b?", r"(?-i:x)", r"(?s:.)", r"(x|)"):
        assert lexing._first_char(re.compile(pattern)) is None, pattern
    assert not lexing._first_char(re.compile(r"(?i)f'"))("x")  # and it does leave rules out
    assert lexing._first_char(re.compile(r"(?i)f'"))("F")


class Tricky(RegexLexer):
    """Rules that cannot be joined (a backreference, a named group, a verbose flag), a state
    entered and left, a callback, an empty default, in one small lexer."""
    name = "tricky"
    tokens = {
        "root": [
            (r"(['\"])(.*?)(\1)", bygroups(String, String, String)),
            (r"\s+", Text),
            (r"[a-z]+", Name, "after"),
            (r"\d+", Number),
        ],
        "after": [
            (r"(?P<op>[=+])", Operator),
            include("spacing"),
            default("#pop"),
        ],
        "spacing": [(r"(?x) [ ]+ ", Text)],
    }


class Plain(RegexLexer):
    name = "plain"
    tokens = {"root": [(r"(?i)if\b", Name), (r"(\w+)(\s*)(\()", bygroups(Name, Text, Operator)),
                       (r"\w+", Name), (r"\s+", Text), default("word")],
              "word": [(r"[a-z]", Name, "#pop")]}


class Driven(RegexLexer):
    """A lexer with a driver of its own: pygments' get_tokens is used as it is."""
    name = "driven"
    tokens = {"root": [(r".", Text)]}

    def get_tokens_unprocessed(self, text, stack=("root",)):
        for i, char in enumerate(text):
            yield i, Name if char.isalpha() else Text, char


@pytest.mark.parametrize("cls", [Tricky, Plain, Driven])
def test_other_lexers_give_pygments_tokens_too(cls):
    lexer = cls()
    samples = ["a = 'x' + \"y\" ", "abc  = 12 'q", "If f (x)\n?", "'unclosed\nb+c", "x\n\n=", ""]
    for text in samples + edited(samples, 6, seed=3):
        assert lexing.tokens(text, lexer) == list(lexer.get_tokens(text)), text
    plan = lexing._plans[cls]
    if cls is Tricky:  # the states with a rule that cannot be joined are tried rule by rule
        assert plan.joinable == {"root": False, "after": False, "spacing": False}
    elif cls is Plain:
        assert all(plan.joinable.values())
    else:
        assert plan is None


def test_many_different_characters_make_no_more_regexes():
    """Past ASCII a state's rules are joined once: a file of thousands of different characters
    (names, strings, stray text) costs no regex per character."""
    text = "".join(f"名{chr(0x4e00 + i)} = '{chr(0x3400 + i)}' {chr(0x1f300 + i % 700)}\n"
                   for i in range(1500))
    lexer = lexing.python_lexer()
    assert lexing.tokens(text) == list(lexer.get_tokens(text))
    plan = lexing._plans[type(lexer)]
    assert all(len(by_char) <= 129 for by_char in plan.by_char.values())


def test_a_state_whose_joined_regex_will_not_compile_is_tried_rule_by_rule(monkeypatch):
    class Broken(RegexLexer):
        name = "broken"
        tokens = {"root": [(r"\w+", Name), (r"\s+", Text), (r"[=+]", Operator)]}

    monkeypatch.setattr(lexing, "_scoped", lambda pattern: "(")  # every join fails to compile
    lexer = Broken()
    for text in ("a = b + c\n", "x+=1 ?", ""):
        assert lexing.tokens(text, lexer) == list(lexer.get_tokens(text))
    assert lexing._plans[Broken].joinable == {"root": False}
