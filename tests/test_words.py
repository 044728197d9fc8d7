"""One vocabulary: grader/words.toml holds the UI words of every tool and renderer (zh and en),
and the code reads them from there instead of holding its own zh/en tables."""
import ast
import os
import re
import string
import tomllib

import pytest

from grader import paths, words

ENTRIES = [(section, key, entry) for section, table in words.load().items()
           for key, entry in table.items()]
# The words of an English count, filled by report.plural(): only the English says them.
ENGLISH_ONLY_FIELDS = {"checks", "were", "are", "statements"}
# Files that may hold zh/en words of their own: the two tables' loaders, and the sandbox's
# runtime (it imports only the standard library and torch, so it cannot read words.toml).
OWN_WORDS = {"words.py", "rubric.py"}
RUNTIME = os.path.join("sandbox", "runtime") + os.sep
# Not moved yet (issue 21): their words still live in the code. Remove a file from here once its
# words are in words.toml; the test below fails for any file here that no longer needs to be.
NOT_YET_MOVED = set()


def _sources():
    for root, dirs, names in os.walk(paths.GRADER):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                yield os.path.relpath(path, paths.GRADER), path


def _fields(template):
    return {name.split(".")[0].split("[")[0]
            for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def test_the_table_is_toml_with_one_layout():
    with open(words.WORDS_PATH, "rb") as handle:
        data = tomllib.load(handle)
    assert data and all(isinstance(table, dict) and table for table in data.values())


@pytest.mark.parametrize("section,key,entry", ENTRIES, ids=[f"{s}.{k}" for s, k, _ in ENTRIES])
def test_every_entry_says_zh_then_en(section, key, entry):
    assert list(entry) == ["zh", "en"], (section, key, list(entry))  # Chinese first, nothing else
    assert all(isinstance(entry[lang], str) for lang in words.LANGS)
    assert words.pair(section, key) == {"zh": entry["zh"], "en": entry["en"]}


@pytest.mark.parametrize("section,key,entry", ENTRIES, ids=[f"{s}.{k}" for s, k, _ in ENTRIES])
def test_zh_and_en_have_the_same_placeholders(section, key, entry):
    zh, en = _fields(entry["zh"]), _fields(entry["en"])
    assert zh == en - ENGLISH_ONLY_FIELDS, (section, key, zh ^ en)
    assert not zh & ENGLISH_ONLY_FIELDS, (section, key)


def test_every_section_and_key_is_used_in_the_grader():
    source = "\n".join(open(path, encoding="utf-8").read() for rel, path in _sources()
                       if rel != "words.py")
    unused = []
    for section, table in words.load().items():
        if not re.search(rf"[\"']{re.escape(section)}[\"']", source):
            unused.append(section)
        unused += [f"{section}.{key}" for key in table
                   if not re.search(rf"[\"']{re.escape(key)}[\"']", source)]
    assert not unused, unused


def test_text_fills_placeholders_and_table_is_by_language():
    assert words.text("status", "override", "en", words="failed") == "changed by a TA (grader: failed)"
    table = words.table("status")
    assert list(table) == ["zh", "en"] and table["zh"]["passed"] == words.text("status", "passed", "zh")


def _is_text(node):
    """A string literal with words in it: a constant, or an f-string with literal text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    return isinstance(node, ast.JoinedStr) and any(
        isinstance(v, ast.Constant) and v.value.strip() for v in node.values)


def _names_zh(test):
    """`lang == "zh"`, `zh`, `args.lang == "zh"`: a test that picks the Chinese."""
    return any((isinstance(n, ast.Constant) and n.value == "zh")
               or (isinstance(n, ast.Name) and n.id == "zh") for n in ast.walk(test))


def own_tables(tree):
    """Where a module holds zh/en words of its own: a {"zh": ..., "en": ...} literal of words, a
    ternary choosing between two literals by language, a both() of two literals."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if {"zh", "en"} <= keys and any(
                    isinstance(k, ast.Constant) and k.value in ("zh", "en")
                    and (isinstance(v, ast.Dict) or _is_text(v))
                    for k, v in zip(node.keys, node.values)):
                found.append((node.lineno, "a {'zh': ..., 'en': ...} table"))
        elif isinstance(node, ast.IfExp) and _names_zh(node.test) and (
                _is_text(node.body) or _is_text(node.orelse)):
            found.append((node.lineno, "a zh/en ternary of literals"))
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("both", "t")
              and len(node.args) >= 2 and _is_text(node.args[0]) and _is_text(node.args[1])):
            found.append((node.lineno, "both() of two literals"))
    return found


MODULES = [(rel, path) for rel, path in _sources()
           if rel not in OWN_WORDS and not rel.startswith(RUNTIME)]


@pytest.mark.parametrize("rel,path", MODULES, ids=[rel for rel, _ in MODULES])
def test_no_module_holds_its_own_zh_en_table(rel, path):
    with open(path, encoding="utf-8") as handle:
        found = own_tables(ast.parse(handle.read()))
    if rel.replace(os.sep, "/") in NOT_YET_MOVED:
        assert found, f"{rel} holds no zh/en table any more: take it off NOT_YET_MOVED"
    else:
        assert not found, (rel, found)


def test_the_static_check_finds_each_kind():
    tree = ast.parse('T = {"zh": {"a": "甲"}, "en": {"a": "A"}}\n'
                     'x = "是" if lang == "zh" else "yes"\n'
                     'y = both(f"共 {n} 组", "groups")\n'
                     'z = t("平均", "mean")\n'
                     'ok = {"zh": said("zh"), "en": said("en")}\n'
                     'fine = words.text("s", "k", lang) if lang == "zh" else name\n')
    assert sorted(line for line, _ in own_tables(tree)) == [1, 2, 3, 4]


def test_the_runtime_does_not_read_the_vocabulary():
    runtime = os.path.join(paths.GRADER, "sandbox", "runtime")
    for name in os.listdir(runtime):
        if name.endswith(".py"):
            source = open(os.path.join(runtime, name), encoding="utf-8").read()
            assert "grader.words" not in source and "import words" not in source, name
