"""Hidden checks of the two check questions: each part scored, feedback points to the reasoning."""
import pytest

from ..support import Verdict

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


def _check(student, check_id):
    name, expected = ANSWERS[check_id]
    value = student.constants([name]).get(name)
    if value is None or value == {"$missing": True}:
        raise Verdict("quiz_missing", name=name)
    if not same(value, expected):
        key = "quiz_hint_" + check_id.split(".", 1)[1]
        from ... import rubric

        r = rubric.load()
        raise Verdict("quiz_wrong", name=name, hint=r.message(key, "zh") + " / " + r.message(key, "en"))


@pytest.mark.check("quiz.q1_shape")
def test_q1_shape(student):
    _check(student, "quiz.q1_shape")


@pytest.mark.check("quiz.q1_head0_pos1")
def test_q1_head0_pos1(student):
    _check(student, "quiz.q1_head0_pos1")


@pytest.mark.check("quiz.q1_head_width")
def test_q1_head_width(student):
    _check(student, "quiz.q1_head_width")


@pytest.mark.check("quiz.q1_params")
def test_q1_params(student):
    _check(student, "quiz.q1_params")


@pytest.mark.check("quiz.q2_correct")
def test_q2_correct(student):
    _check(student, "quiz.q2_correct")


@pytest.mark.check("quiz.q2_wrong")
def test_q2_wrong(student):
    _check(student, "quiz.q2_wrong")


@pytest.mark.check("quiz.q2_shape_is_enough")
def test_q2_shape_is_enough(student):
    _check(student, "quiz.q2_shape_is_enough")
