"""Cheap imitations of the skill (tests/submissions/imitation/): each imitates the properties of
split_heads, merge_heads or attend (shapes, rows summing to 1, a zero upper triangle, answers for
the fixed examples) without doing the work.  Each must score no more than the stub on every check
of the families it imitates; the header names them:
      # imitates: attend            (exercise names, comma-separated)
      # how: <one line>
Graded with CORPUS_ISOLATION (bubblewrap where it works, like the corpus), one process each."""
import os
from pathlib import Path

import pytest

from grader.authoring import stubs as authoring
from grader.judge import grading

ROOT = Path(__file__).resolve().parent.parent
IMITATIONS = sorted((ROOT / "tests" / "submissions" / "imitation").glob("*.py"))
ISOLATION = os.environ.get("CORPUS_ISOLATION", "auto")


def families(path):
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# imitates: "):
            return [name.strip() for name in line[len("# imitates: "):].split(",")]
    return []


@pytest.fixture(scope="module")
def stub_scores():
    data = grading.grade(authoring.EXERCISE, isolation=ISOLATION)
    return {c["id"]: c["score"] for c in data["checks"]}


def test_the_suite_imitates_every_family():
    covered = {family for path in IMITATIONS for family in families(path)}
    assert covered >= {"split_heads", "merge_heads", "attend"}
    assert len(IMITATIONS) >= 6


@pytest.mark.parametrize("path", IMITATIONS, ids=[p.name for p in IMITATIONS])
def test_imitation_scores_no_more_than_the_stub(path, stub_scores):
    imitated = families(path)
    assert imitated, "a '# imitates:' line"
    data = grading.grade(str(path), isolation=ISOLATION)
    gained = {c["id"]: c["score"] for c in data["checks"]
              if c["exercise"] in imitated and c["score"] > stub_scores[c["id"]]}
    assert gained == {}
    assert all(c["status"] != "passed" for c in data["checks"] if c["exercise"] in imitated)
