"""The checks run by plain pytest (grader/judge/checks/conftest.py), their results written by
pytest-json-report: the reference passes every test and its points add up to `grade`'s total;
a wrong file fails the tests of its failing checks, each with its rubric id and verdict."""
import json
import os
import subprocess
import sys

import pytest

from door_matrix import batched  # noqa: F401
from grader import rubric as rubric_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRONG = os.path.join(ROOT, "tests", "submissions", "wrong")


def pytest_json(tmp_path, submission, *args):
    """Run the checks on `submission` with plain pytest; (exit code, the JSON report)."""
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "grader/judge/checks", "--submission", submission,
         "--json-report", "--json-report-file", str(out), "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.exists(), done.stdout + done.stderr
    return done.returncode, json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def grade(batched):
    """`grade`'s report of a corpus file by its door-matrix name: the batch of the corpus, which
    test_doors.py holds `python -m grader grade` to, check by check."""
    return batched[1].__getitem__


def by_check(report):
    points = {}
    for test in report["tests"]:
        meta = test["metadata"]
        points[meta["check"]] = points.get(meta["check"], 0.0) + meta["points"]
    return points


def test_reference_passes_every_test_and_its_points_are_grades(tmp_path, grade):
    code, report = pytest_json(tmp_path, "solutions/attention.py", "--hidden")
    assert code == 0
    assert report["summary"]["passed"] == report["summary"]["total"] > 0
    graded = grade("reference")
    assert sum(by_check(report).values()) == pytest.approx(graded["score"])
    assert set(by_check(report)) == {c["id"] for c in graded["checks"]}
    assert sum(t["metadata"]["max_points"] for t in report["tests"]) == \
        pytest.approx(sum(c.points for c in rubric_module.load().checks))


def test_a_wrong_file_fails_its_checks_by_rubric_id_with_the_same_points(tmp_path, grade):
    path = os.path.join(WRONG, "scale_by_d.py")
    code, report = pytest_json(tmp_path, path, "--hidden")
    assert code == 1
    failed = [t for t in report["tests"] if t["outcome"] == "failed"]
    assert {t["metadata"]["check"] for t in failed} >= {"attend.scale", "attend.reference"}
    assert all(t["metadata"]["points"] == 0 and t["metadata"]["verdict"]["key"] for t in failed)
    assert any(t["metadata"]["verdict"]["key"] == "scale_by_d" for t in failed)
    graded = {c["id"]: c["score"] for c in grade("wrong-scale_by_d")["checks"]}
    assert by_check(report) == pytest.approx(graded)


def test_plain_pytest_options_select_checks(tmp_path):
    """One run proves both: `-k` deselects (no split_heads check runs, every other public one
    does), and without --hidden no hidden check runs (each is kept by `-k "not split"`)."""
    code, report = pytest_json(tmp_path, "solutions/attention.py", "-k", "not split")
    assert code == 0
    checks = rubric_module.load().checks
    ran = {t["metadata"]["check"] for t in report["tests"]}
    assert ran == {c.id for c in checks if c.visibility == "public"
                   and c.exercise != "split_heads"}
    hidden = {c.id for c in checks if c.visibility == "hidden"}
    assert hidden and not ran & hidden


def test_without_a_submission_pytest_says_how_to_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "grader/judge/checks", "-q"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "--submission" in done.stderr + done.stdout
