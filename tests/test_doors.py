"""The door matrix, part one: the batch every door is held to, `grade`, `check` and the gradebook
(what the matrix holds, and how it is split in three files: tests/door_matrix.py)."""
import csv

import pytest

from door_matrix import (CLI_SAMPLE, FILES, MAX, RUBRIC, baseline, batched, cli_report,  # noqa: F401
                         each, public, verdict, verdict_of_checks)


def test_the_report_model_agrees_with_the_pytest_document(batched):
    for name, data in batched[1].items():
        assert verdict_of_checks(data["checks"]) == verdict(data), name
        summary = data["pytest"]["summary"]
        assert summary.get("passed", 0) + summary.get("failed", 0) + summary.get("error", 0) == \
            len(data["pytest"]["tests"]), name


def test_the_baseline_covers_every_check_and_the_extremes(batched, baseline):
    graded = batched[1]
    for name, table in baseline.items():
        assert set(table) == {c.id for c in RUBRIC.checks}, name
    assert graded["reference"]["score"] == MAX
    assert graded["stub"]["score"] == 0
    for name in FILES:
        if name.startswith("correct-"):
            assert graded[name]["score"] == MAX, (name, [c for c in graded[name]["checks"]
                                                         if c["status"] != "passed"])
        elif name.startswith("wrong-"):
            assert graded[name]["score"] < MAX, name


def test_grade_gives_the_batchs_verdict(baseline):
    graded = each(lambda name: cli_report("grade", FILES[name]), CLI_SAMPLE)
    for name, data in graded.items():
        assert verdict(data) == baseline[name], name


def test_check_gives_the_public_part_of_grade(baseline):
    checked = each(lambda name: cli_report("check", FILES[name]), CLI_SAMPLE)
    for name, data in checked.items():
        assert verdict(data) == public(baseline[name]), name


def test_the_gradebook_gives_the_reports_verdict(batched, baseline):
    with open(batched[0] / "gradebook.csv", encoding="utf-8", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    for name in FILES:
        row = rows[name]
        # The gradebook writes scores to two decimals (28.67), the same as the class page.
        assert {c: float(row[c]) for c in baseline[name]} == \
            {c: round(score, 2) for c, (_, score) in baseline[name].items()}, name
        assert float(row["total"]) == pytest.approx(sum(s for _, s in baseline[name].values()),
                                                    abs=0.005)


