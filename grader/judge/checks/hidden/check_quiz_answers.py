"""Hidden checks of the two check questions: each part scored, feedback points to the reasoning."""
import pytest

from grader import rubric
from grader.judge.checks.support import Verdict

ANSWERS = {
    "quiz.q1_shape": ("Q1_SHAPE", (1, 1, 3, 4)),
    "quiz.q1_head0_pos1": ("Q1_HEAD0_POS1", [4, 5, 6, 7]),
    "quiz.q1_head_width": ("Q1_FORMAL_HEAD_WIDTH", 32),
    "quiz.q1_params": ("Q1_FORMAL_PARAMS", 16384),
    "quiz.q2_correct": ("Q2_CORRECT", [4, 5]),
    "quiz.q2_wrong": ("Q2_WRONG", [2, 3]),
    "quiz.q2_shape_is_enough": ("Q2_SHAPE_IS_ENOUGH", False),
}


def same(got, expected):
    if type(expected) is bool:
        return got is expected
    if isinstance(expected, (list, tuple)):
        return (isinstance(got, type(expected)) and len(got) == len(expected)
                and all(type(g) in (int, float) and g == e for g, e in zip(got, expected)))
    return type(got) is int and got == expected


@pytest.mark.parametrize("check_id", [pytest.param(c, marks=pytest.mark.check(c), id=c)
                                      for c in ANSWERS])
def test_answer(student, check_id):
    name, expected = ANSWERS[check_id]
    value = student.constants([name]).get(name)
    if value is None or value == {"$missing": True}:
        raise Verdict("quiz_missing", name=name)
    if not same(value, expected):
        # The hint points to the reasoning (which axis moves, which formula counts), in zh and en.
        key = "quiz_hint_" + check_id.split(".", 1)[1]
        r = rubric.load()
        raise Verdict("quiz_wrong", name=name, hint=r.message(key, "zh") + " / " + r.message(key, "en"))
