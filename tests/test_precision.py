"""Precision of the named mistakes (issue 15): for every wrong solution in the corpus, the
mistakes named anywhere in its report, in zh and in en, are exactly the one planted in it (its
`# expect-key:` lines that are named mistakes), nothing else.  Outcomes ("wrong values", "raised",
"follows from", what a check saw) name no mistake and are allowed anywhere.

The gradings are shared with tests/test_corpus.py (one grading per submission per session)."""
import re

import pytest

from grader.render import report
from test_corpus import RUBRIC, WRONG, graded, header, ids
import words

# Keys that say what was seen, not which mistake it was.
OUTCOMES = set(RUBRIC.outcome_keys) | {"follows_from"}
MISTAKES = {key for key in RUBRIC.messages if key not in OUTCOMES
            and not key.startswith("quiz_hint_")}
OWN_EXERCISES = ("split_heads", "merge_heads", "attend")

# Wrong solutions whose cards are not yet precise, each with the reason (empty: every wrong
# solution is held to precision on every card).
PENDING = {}


def planted(path):
    return {key for key in header(path)["expect-key"] if key in MISTAKES}


def named_keys(checks):
    return {v["key"] for c in checks for v in c["verdicts"] if v["key"] in MISTAKES}


def signature(key, lang):
    """The start of a mistake's message, up to its first placeholder: what a reader sees of it."""
    text = RUBRIC.messages[key][lang]
    return re.split(r"\{", text)[0][:40]


def named_in_text(checks, lang):
    """Mistakes whose words appear in the cards' feedback; the lines that say what a check tries
    (the rubric's checked_* text, shown on every failing card) name no mistake and are left out."""
    checked = report.TEXT[lang]["checked"].strip()
    text = "\n".join(line for c in checks for line in report.feedback(RUBRIC, c, lang).splitlines()
                     if not line.strip().startswith(checked))
    return {key for key in MISTAKES
            if len(signature(key, lang)) >= 12 and signature(key, lang) in text}


def test_every_message_is_an_outcome_or_a_mistake():
    assert MISTAKES and OUTCOMES & set(RUBRIC.messages)
    for key in ("mask_missing", "scale_from_v", "mask_inverted", "attend_only_4d"):
        assert key in MISTAKES, key
    for key in ("wrong_values", "weights_not_from_scores", "weights_leak", "nan"):
        assert key not in MISTAKES, key


def own_cards(g):
    return [c for c in g.data["checks"] if c["exercise"] in OWN_EXERCISES]


@pytest.mark.parametrize("path", WRONG, ids=ids(WRONG))
def test_attend_split_merge_cards_name_only_the_planted_mistake(path):
    g = graded(path)
    assert named_keys(own_cards(g)) <= planted(path)
    for lang in ("zh", "en"):
        assert named_in_text(own_cards(g), lang) <= planted(path), lang


@pytest.mark.parametrize("path", WRONG, ids=ids(WRONG))
def test_report_names_exactly_the_planted_mistake(path):
    if path.name in PENDING:
        pytest.skip(PENDING[path.name])
    g = graded(path)
    assert named_keys(g.data["checks"]) == planted(path)
    # ... and no other mistake's words in the rendered text (the planted one's own text is proven
    # present, filled in, by test_corpus.test_wrong_solution_feedback_names_the_mistake).
    for lang in ("zh", "en"):
        assert named_in_text(g.data["checks"], lang) <= planted(path), lang


@pytest.mark.parametrize("path", WRONG, ids=ids(WRONG))
def test_every_report_says_one_language(path):
    """Every wrong solution's report, as text and as Markdown, read in Chinese holds no English
    prose and read in English no Chinese (outside code and quoted lesson titles): the real values
    the checks fill in included."""
    data = graded(path).data
    for lang in ("zh", "en"):
        for text in (report.to_text(RUBRIC, data, lang, hidden_not_run=1),
                     report.to_markdown(RUBRIC, data, lang)):
            assert words.foreign_lines(text, lang) == [], lang
