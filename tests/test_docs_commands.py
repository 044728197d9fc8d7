"""The commands the docs show are commands the kit has: every `make TARGET` is a target of the
kit's Makefile (or, for the student bundle's, of release/Makefile), every `python -m grader ...`
line parses with the grader's own argument parser, and every other `python -m grader.X` module
exists.  Docs cannot promise a flag or a target that is gone."""
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from grader import __main__ as cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "release" / "README.md"]
MAKE = re.compile(r"(?<![\w-])make ([a-z][\w-]*)((?: [A-Z_]+=\S+)*)")
INLINE_MAKE = re.compile(r"`make [a-z][\w-]*[^`]*`")
PYTHON = re.compile(r"python -m (grader[\w.]*)((?: (?![|#`])[^\s`|#]+)*)")


def targets(makefile):
    text = makefile.read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", text, re.M))


def shown(pattern, blocks_only=False):
    """(doc, command) for each match; with `blocks_only`, only lines of fenced code blocks (a
    sentence may name a subcommand without its arguments)."""
    found = set()
    for doc in DOCS:
        fenced = False
        for line in doc.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if blocks_only and not fenced:
                continue
            found |= {(doc.name, m.group(0)) for m in pattern.finditer(line)}
    return sorted(found)


def test_every_make_target_shown_exists():
    known = targets(ROOT / "Makefile") | targets(ROOT / "release" / "Makefile")
    commands = shown(MAKE, blocks_only=True) + shown(INLINE_MAKE)
    missing = [(doc, text) for doc, text in commands
               if MAKE.search(text).group(1) not in known]
    assert commands, "the docs show make targets"
    assert not missing, missing


def placeholder_free(args):
    """The shown arguments with the docs' placeholders (..., [optional parts]) dropped."""
    out = []
    for arg in args:
        if arg.startswith("[") or arg.endswith("]") or arg == "..." or arg.startswith("<"):
            continue
        out.append(arg)
    return out


@pytest.mark.parametrize("doc,text", [s for s in shown(PYTHON, blocks_only=True)
                                      if s[1].split()[2] == "grader"])
def test_every_grader_command_shown_parses(doc, text):
    text = re.sub(r"\[[^\]]*(\]|$)", "", text.replace('"..."', "why"))  # [optional parts]
    words = shlex.split(text, posix=True)
    args = placeholder_free(words[3:])
    if not args:
        return  # `python -m grader` alone, named in a sentence
    try:
        cli.parse(args)
    except SystemExit as exc:
        pytest.fail(f"{doc}: `{text}` does not parse (exit {exc.code})")


def test_every_grader_module_shown_exists():
    modules = {text.split()[2] for _, text in shown(PYTHON)}
    assert "grader" in modules
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    assert not missing, missing
