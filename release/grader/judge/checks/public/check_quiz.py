"""Public check of the two check questions' format; the answers themselves are hidden checks."""
import pytest

from grader import rubric
from grader.judge.checks.support import Verdict


def _numbers(v):
    return isinstance(v, list) and all(type(i) in (int, float) for i in v)


# What each answer must be; its form in words (said in the stub and the notebook too) is the
# rubric's [quiz_forms].
FORMATS = {
    "Q1_SHAPE": lambda v: isinstance(v, tuple) and all(type(i) is int for i in v),
    "Q1_HEAD0_POS1": _numbers,
    "Q1_FORMAL_HEAD_WIDTH": lambda v: type(v) is int,
    "Q1_FORMAL_PARAMS": lambda v: type(v) is int,
    "Q2_CORRECT": _numbers,
    "Q2_WRONG": _numbers,
    "Q2_SHAPE_IS_ENOUGH": lambda v: type(v) is bool,
}


@pytest.mark.check("quiz.format")
def test_answers_have_the_right_format(student):
    values = student.constants(FORMATS)
    forms = rubric.load().quiz_forms
    for name, ok in FORMATS.items():
        value = values.get(name) if isinstance(values, dict) else None
        if value is None or value == {"$missing": True}:
            raise Verdict("quiz_missing", name=name)
        if not ok(value):
            raise Verdict("quiz_type", name=name, expected=forms[name], got=type(value).__name__)
