"""The checks and the rubric agree: every check id a test scores is in the rubric, in the folder
of its visibility; every rubric check is scored by some test; every message key a check raises
exists, with both languages."""
import ast
import json
import os
import subprocess
import sys

import pytest

from grader import paths, rubric

RUBRIC = rubric.load()


def check_files():
    for visibility in ("public", "hidden"):
        folder = os.path.join(paths.CHECKS, visibility)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py") and name != "__init__.py":
                yield visibility, os.path.join(folder, name)


def parse(path):
    with open(path, encoding="utf-8") as handle:
        return ast.parse(handle.read())


COLLECT = """
import json, sys, pytest
found = []
class Collector:
    def pytest_collection_finish(self, session):
        for item in session.items:
            marker = item.get_closest_marker("check")
            found.append([str(item.path), marker.args[0] if marker else None])
pytest.main(sys.argv[1:], plugins=[Collector()])
print("COLLECTED" + json.dumps(found))
"""


@pytest.fixture(scope="module")
def collected():
    """(file, check id) of every test the judge's pytest collects, as the judge collects them."""
    args = [os.path.join(paths.CHECKS, v) for v in ("public", "hidden")] + [
        "--collect-only", "-q", "-p", "no:cacheprovider", "--noconftest",
        "-c", os.path.join(paths.CHECKS, "pytest.ini"), "--rootdir", paths.CHECKS]
    out = subprocess.run([sys.executable, "-c", COLLECT, *args], capture_output=True, text=True,
                         cwd=paths.KIT_ROOT, timeout=300).stdout
    return json.loads(out.split("COLLECTED", 1)[1])


def raised_keys(tree):
    """Literal message keys given to Verdict(...) in a file."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Verdict" \
                and node.args and isinstance(node.args[0], ast.Constant):
            yield node.args[0].value


FILES = list(check_files())


def test_every_check_file_is_collected_and_scores_a_rubric_check(collected):
    assert {path for path, _ in collected} == {path for _, path in FILES}
    assert [path for path, check_id in collected if check_id is None] == []


def test_every_scored_id_is_in_the_rubric_with_the_visibility_of_its_folder(collected):
    for path, check_id in collected:
        folder = os.path.basename(os.path.dirname(path))
        assert check_id in RUBRIC.by_id, f"{check_id} is not in the rubric"
        assert RUBRIC.by_id[check_id].visibility == folder, \
            f"{check_id} is {RUBRIC.by_id[check_id].visibility} in the rubric but lies in {folder}/"


def test_every_rubric_check_is_scored_by_a_test(collected):
    scored = {check_id for _, check_id in collected}
    assert sorted(c.id for c in RUBRIC.checks if c.id not in scored) == []


def test_every_key_a_check_raises_has_a_message_in_both_languages():
    support = os.path.join(paths.CHECKS, "support.py")
    keys = {k for _, path in FILES for k in raised_keys(parse(path))}
    keys |= set(raised_keys(parse(support)))
    assert keys, "no Verdict found: the parser no longer sees the checks"
    for key in sorted(keys):
        assert key in RUBRIC.messages, f"Verdict({key!r}) has no [messages.{key}]"
        assert all(RUBRIC.messages[key].get(lang) for lang in rubric.LANGS), key


def test_a_message_is_a_named_mistake_or_an_outcome():
    kinds = {m.get("kind", "mistake") for m in RUBRIC.messages.values()}
    assert kinds <= {"mistake", "outcome"}
    assert {"wrong_values", "not_implemented", "timeout"} <= RUBRIC.outcome_keys
    assert "scale_none" not in RUBRIC.outcome_keys
