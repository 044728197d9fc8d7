"""The door matrix, part one: the batch every door is held to, `grade`, `check` and the gradebook
(what the matrix holds, and how it is split in three files: tests/door_matrix.py)."""
import contextlib
import csv
import io
import json

import pytest

from door_matrix import (FILES, MAX, RUBRIC, baseline, batched, cli_report,  # noqa: F401
                         public, verdict, verdict_of_checks)

# `grade` and `check` are one code path (grader/__main__.py's grade_command: a judge with a cold
# worker) that differs only in the visibilities it asks, and each file costs a cold worker.
# `grade` takes a named mistake and a quiz mistake, and what a cold worker meets first that a
# forked one has done before the student's code (the meta device's kernels, a float dtype, the
# refusal of torch's ready-made attention).  Its full marks are test_kit.py's: the same command on
# the reference (test_cli_writes_gradescope_results) holds its verdict to every check passed at
# full points, which is the batch's (test_the_baseline_covers_every_check_and_the_extremes).  The
# rest of the slow doors' sample goes cold through Gradescope's autograder (the same Judge, a
# cold spare worker, its whole verdict compared: test_doors_platforms.py, test_gradescope.py).
# `check` adds only its selection of the public checks: full marks, nothing, and a mistake in a
# public check.  Each command line runs as a process of its own on its first file (CLI_FIRST);
# the rest of its sample runs the same command (grade_command, a judge of its own with a cold
# worker) in this process, which saves only the Python start and the judge's imports.
GRADE_SAMPLE = ["wrong-split_no_transpose", "wrong-quiz_shape_as_list",
                "wrong-device_mask_no_device", "wrong-dtype_softmax_float32", "wrong-uses_sdpa"]
CHECK_SAMPLE = ["reference", "stub", "wrong-split_no_transpose"]
CLI_FIRST = "wrong-split_no_transpose"  # a mistake in a public check: some pass, some fail


def command_report(command, name):
    """`python -m grader COMMAND FILE --format json`'s report: a process of its own for
    CLI_FIRST, else the command's own function in this process."""
    if name == CLI_FIRST:
        return cli_report(command, FILES[name])
    from grader.__main__ import grade_command, parse

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = grade_command(parse([command, str(FILES[name]), "--format", "json"]))
    assert code == 0, printed.getvalue()[-2000:]
    return json.loads(printed.getvalue())


def sample(command, names):
    """{name: report} of COMMAND on each of `names`, the CLI run first."""
    return {name: command_report(command, name)
            for name in sorted(names, key=lambda n: n != CLI_FIRST)}


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
    graded = sample("grade", GRADE_SAMPLE)
    assert set(graded) == set(GRADE_SAMPLE) and CLI_FIRST in graded
    for name, data in graded.items():
        assert verdict(data) == baseline[name], name
        assert data["metadata"]["worker_start"] == "exec", name  # a cold worker


def test_check_gives_the_public_part_of_grade(baseline):
    """Only the public checks run, and the hidden ones are counted (what test_kit.py's text
    run of `check` shows the student)."""
    hidden = len(RUBRIC.select(("hidden",)))
    checked = sample("check", CHECK_SAMPLE)
    assert set(checked) == set(CHECK_SAMPLE) and CLI_FIRST in checked
    for name, data in checked.items():
        assert verdict(data) == public(baseline[name]), name
        assert {c["visibility"] for c in data["checks"]} == {"public"}, name
        assert data["metadata"]["hidden_not_run"] == hidden > 0, name


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


