"""Hidden checks of the two check questions: each part compared with the reference's own answer
(solutions/attention.py, the one copy of the answers); the message points to the reasoning."""
import pytest

from grader.judge.secret.reference import ref
from grader.judge.checks.support import Verdict

# check id -> the constant that answers it (the answer itself is the reference's).
QUESTIONS = {
    "quiz.q1_shape": "Q1_SHAPE",
    "quiz.q1_head0_pos1": "Q1_HEAD0_POS1",
    "quiz.q1_head_width": "Q1_FORMAL_HEAD_WIDTH",
    "quiz.q1_params": "Q1_FORMAL_PARAMS",
    "quiz.q2_correct": "Q2_CORRECT",
    "quiz.q2_wrong": "Q2_WRONG",
    "quiz.q2_shape_is_enough": "Q2_SHAPE_IS_ENOUGH",
}


def same(got, expected):
    if type(expected) is bool:
        return got is expected
    if isinstance(expected, (list, tuple)):
        return (isinstance(got, type(expected)) and len(got) == len(expected)
                and all(type(g) in (int, float) and g == e for g, e in zip(got, expected)))
    return type(got) is int and got == expected


@pytest.mark.parametrize("check_id", [pytest.param(c, marks=pytest.mark.check(c), id=c)
                                      for c in QUESTIONS])
def test_answer(student, check_id):
    name = QUESTIONS[check_id]
    value = student.constants([name]).get(name)
    if value is None or value == {"$missing": True}:
        raise Verdict("quiz_missing", name=name)
    expected = getattr(ref, name)
    if isinstance(expected, tuple) and isinstance(value, list):
        value = tuple(value)  # the right numbers in a list: quiz.format names that, not this check
    if not same(value, expected):
        # Each question has its own message: which axis moves, which formula counts.
        raise Verdict("quiz_wrong_" + check_id.split(".", 1)[1], name=name)
