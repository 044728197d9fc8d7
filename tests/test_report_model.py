"""The report model (grader/render/model.py): typed, made once, and what is read back from a
judge's reply or a batch record is refused where it has not the model's shape."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader import rubric  # noqa: E402
from grader.render import model  # noqa: E402


def parts_for(checks, failing=()):
    found = {}
    for check in checks:
        status = "failed" if check.id in failing else "passed"
        verdict = {"status": "failed", "key": "wrong_values", "fields": {}} if status != "passed" \
            else None
        found[check.id] = [{"name": "test_a", "status": "passed", "verdict": None},
                           {"name": "test_b", "status": status, "verdict": verdict}]
    return found


def test_the_model_made_from_parts_and_its_data_read_back_are_the_same():
    the_rubric = rubric.load()
    checks = the_rubric.select(("public", "hidden"))
    data = model.Report.from_parts(checks, parts_for(checks, {"attend.scale"}), {"seed": 1}).data()
    typed = model.Report.from_data(json.loads(json.dumps(data)))
    assert typed.data() == data
    scale = next(c for c in typed.checks if c.id == "attend.scale")
    assert scale.status is model.Status.FAILED and scale.score == scale.max_score / 2
    assert [p.status for p in scale.parts] == [model.Status.PASSED, model.Status.FAILED]
    assert typed.score == sum(c.score for c in typed.checks) < typed.max_score
    with pytest.raises(dataclasses_frozen()):
        typed.checks[0].score = 99


def dataclasses_frozen():
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_the_worst_status_of_a_check_is_the_one_that_kept_the_judge_from_seeing():
    assert model.Status.worst(["failed", "timeout"]) is model.Status.TIMEOUT
    assert model.Status.worst(["timeout", "error", "failed"]) is model.Status.ERROR
    assert model.Status.worst(["failed"]) is model.Status.FAILED


@pytest.mark.parametrize("broken", [
    {},
    {"score": 1, "max_score": 2, "checks": [{"id": "x"}], "metadata": {}},
    {"score": 1, "max_score": 2, "metadata": {}, "checks": [
        {"id": "x", "exercise": "e", "visibility": "public", "status": "great", "max_score": 2,
         "score": 1, "parts": []}]},
    {"score": 5, "max_score": 2, "metadata": {}, "checks": [
        {"id": "x", "exercise": "e", "visibility": "public", "status": "passed", "max_score": 2,
         "score": 1, "parts": []}]},
])
def test_what_is_no_report_is_refused(broken):
    with pytest.raises(ValueError, match="not a grading report"):
        model.Report.from_data(broken)


def test_a_batch_record_whose_report_is_no_report_is_regraded(tmp_path):
    from grader.batch import records

    folder = tmp_path / records.STUDENTS / "ana"
    folder.mkdir(parents=True)
    record = {"format": records.FORMAT, "student": "ana", "report": {"score": 3, "checks": "?"}}
    (folder / records.REPORT).write_text(json.dumps(record), encoding="utf-8")
    assert records.read_record(str(tmp_path), "ana") is None
    record["report"] = None  # an ungradable entry has no report: read as it is
    (folder / records.REPORT).write_text(json.dumps(record), encoding="utf-8")
    assert records.read_record(str(tmp_path), "ana") == record


def test_a_timed_out_card_shows_the_line_the_call_was_running():
    """The worker tells where the student's code is while a call runs (worker.telling_where);
    a timeout's card shows that line, in each language."""
    from grader.render import report

    said = {"zh": "5 秒内没有回答", "en": "no answer within 5 s"}
    result = {"id": "attend.scale", "status": "timeout", "score": 0, "max_score": 2, "parts": [],
              "verdicts": [{"status": "timeout", "key": "timeout",
                            "fields": {"message": said,
                                       "where": "attention.py:53:     while True:"}}]}
    for lang in ("zh", "en"):
        text = report.feedback(rubric.load(), result, lang)
        assert "53" in text and "|     while True:" in text, text
