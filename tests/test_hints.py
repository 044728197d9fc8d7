"""`python -m grader hint` / `make hint`: levels one at a time, the state file beside the student's
file (never inside it), the first unfinished exercise, and hints that never hold solution code."""
import json
import keyword
import os
import re
import shutil
import subprocess
import sys

import pytest

from grader.authoring import stubs as authoring
from grader.tools import hints
from grader import rubric

ROOT = authoring.ROOT
PY = sys.executable


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def hint(target, *args, lang="en"):
    out = subprocess.run([PY, "-m", "grader", "hint", *args, "--submission", str(target),
                          "--lang", lang], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return out


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "attention.py"
    shutil.copyfile(authoring.EXERCISE, path)
    return path


def solution_lines():
    """Every statement of the reference's solution blocks (what a hint must never contain)."""
    lines, inside = set(), False
    for line in read(authoring.SOLUTION).splitlines():
        stripped = line.strip()
        if stripped in (authoring.BEGIN, authoring.END):
            inside = stripped == authoring.BEGIN
        elif inside and stripped and not stripped.startswith("#") \
                and not stripped.endswith("= x.shape"):  # unpacking a shape gives nothing away
            lines.add(stripped)
    return lines


def test_levels_advance_stop_at_the_last_and_are_remembered(target):
    levels = rubric.load().hints["split_heads"]["en"]
    before = read(target)
    for number, text in enumerate(levels, 1):
        out = hint(target, "split_heads")
        assert out.returncode == 0, out.stderr
        assert f"hint · split_heads · level {number}/{len(levels)}" in out.stdout
        assert text in out.stdout
        assert all(other not in out.stdout for other in levels if other != text)
    assert "This is the last hint for split_heads" in out.stdout
    again = hint(target, "split_heads")
    assert f"level {len(levels)}/{len(levels)}" in again.stdout and levels[-1] in again.stdout
    assert "That was the last hint" in again.stdout
    state = json.loads(read(target.parent / ".attention-hints.json"))
    assert state["levels"] == {"split_heads": len(levels)}
    assert read(target) == before  # the student's file is never written
    assert sorted(os.listdir(target.parent)) == [".attention-hints.json", "attention.py"]


def test_exercises_are_independent_and_reset_starts_again(target):
    hint(target, "attend")
    hint(target, "attend")
    out = hint(target, "merge_heads", lang="zh")
    assert "提示 · merge_heads · 第 1/3 级" in out.stdout
    assert rubric.load().hints["merge_heads"]["zh"][0] in out.stdout
    out = hint(target, "attend", "--reset")
    assert "level 1/3" in out.stdout
    state = hints.load_state(hints.state_path(str(target)))
    assert state["levels"] == {"attend": 1, "merge_heads": 1}


def test_names_are_forgiving_and_unknown_ones_refused(target):
    assert "hint · CausalSelfAttention · level 1/3" in hint(target, "module").stdout
    assert "hint · attend · level 1/3" in hint(target, "ATTEND").stdout
    out = hint(target, "softmax")
    assert out.returncode == 2 and "no such exercise" in out.stderr and "split_heads" in out.stderr
    assert not out.stdout


def test_garbled_state_file_is_started_afresh(target):
    (target.parent / ".attention-hints.json").write_text("{not json", encoding="utf-8")
    out = hint(target, "quiz")
    assert out.returncode == 0 and "hint · quiz · level 1/3" in out.stdout
    assert json.loads(read(target.parent / ".attention-hints.json"))["levels"] == {"quiz": 1}


def test_plain_hint_picks_the_first_unfinished_exercise(target):
    solution = read(authoring.SOLUTION)
    # split_heads and merge_heads solved, the rest still stubs.
    half = solution.split("def attend(")[0].replace(authoring.BEGIN, "").replace(authoring.END, "")
    stub_rest = read(authoring.EXERCISE)
    target.write_text(half + "def attend(" + stub_rest.split("def attend(")[1], encoding="utf-8")
    first = hint(target, "--call-timeout", "2")
    assert first.returncode == 0, first.stderr
    assert "ran the public checks" in first.stdout and "hint · attend · level 1/3" in first.stdout
    second = hint(target)  # same file: the recorded result is used, nothing is run
    assert "ran the public checks" not in second.stdout
    assert "hint · attend · level 2/3" in second.stdout
    target.write_text(solution, encoding="utf-8")
    done = hint(target)
    assert done.returncode == 0 and "no hint needed" in done.stdout


# -- hints never give solution code or a quiz answer ----------------------------------------------
KEYWORDS = set(keyword.kwlist)
CODE_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?|\*\*|//|->|[-+*/@%~<>=!.,:;()\[\]{}]|\S")
# The run of code tokens a hint may share with a solution line: shorter runs are prose
# ("q, k and v"); longer ones, with some syntax in them, are code.
LEAK_RUN = 5
# Tokens that prose and shapes share with code ("(samples, heads)", "[B,T,D]"): a run made of
# only these is not code; an operator, a number or an attribute dot in it is.
PROSE_TOKENS = {"N", ",", "(", ")", "[", "]"}


def code_tokens(text):
    """Python-ish tokens with every name replaced by N (names and spacing ignored; keywords,
    numbers, operators kept); anything that is not ASCII code (Chinese text) breaks the run."""
    tokens = []
    text = re.sub(r"[.;:](?=\s|$)", " 。 ", text)  # a full stop ends a sentence, not an attribute
    for token in CODE_TOKEN.findall(text):
        if not token.isascii():
            tokens.append("|")
        elif token[0].isalpha() or token[0] == "_":
            tokens.append(token if token in KEYWORDS else "N")
        else:
            tokens.append(token)
    return tokens


def shared_code(hint_text, line):
    """The longest run of at least LEAK_RUN tokens that the hint and the solution line share and
    that holds some syntax (an operator, a number, an attribute), or None."""
    hint, code = code_tokens(hint_text), code_tokens(line.split("  #")[0])  # code, not comment
    best = None
    for i in range(len(hint)):
        for j in range(len(code)):
            n = 0
            while i + n < len(hint) and j + n < len(code) and hint[i + n] == code[j + n] \
                    and hint[i + n] != "|":
                n += 1
            run = hint[i:i + n]
            syntax = [t for t in run if t not in PROSE_TOKENS and t not in KEYWORDS]
            if n >= LEAK_RUN and syntax and (best is None or n > len(best)):
                best = run
    return best


def quiz_answers():
    """The reference's quiz answers (the one source of them), as the forms a hint could hold."""
    namespace = {}
    exec(compile(read(authoring.SOLUTION), "attention.py", "exec"), namespace)
    answers = {k: v for k, v in namespace.items() if re.match(r"Q\d+_", k)}
    sequences = [tuple(v) for v in answers.values() if isinstance(v, (list, tuple))]
    scalars = [v for v in answers.values() if isinstance(v, int) and not isinstance(v, bool)]
    return answers, sequences, scalars


def number_runs(text):
    """Every run of numbers in the text, each run as a tuple: '[4, 5]' -> (4, 5)."""
    runs = re.findall(r"\d+(?:\s*[,，]\s*\d+)*", text)
    return [tuple(int(n) for n in re.split(r"\s*[,，]\s*", run)) for run in runs]


# A yes/no answer in words: "the same shape does not mean ..." states Q2_SHAPE_IS_ENOUGH.
BOOLEAN_ANSWERS = re.compile(r"并不说明|不能说明|不说明|不足以|does not mean|is not enough|not enough",
                             re.I)

# Hints the kit once had (issue 16): the test must catch each of them.
KNOWN_LEAKS = [
    "In order: scores = q @ k.transpose(-2, -1) / √d (d = q.shape[-1]) -> set unreadable",
    "the lower triangle with the diagonal: torch.ones(T, T, dtype=torch.bool).tril().",
    "True means may read, so masked_fill(~mask, -inf).",
    "then transpose(1, 2) to move the head axis before the positions.",
]
KNOWN_ANSWER_LEAKS = [
    "So heads[0,0,1] must be [4,5].",
    "Question 2: the same shape does not mean the values sit in the right places.",
]


def leaks(text, statements, sequences, scalars):
    found = [(line, shared_code(text, line)) for line in statements]
    found = [f"code {line!r}" for line, run in found if run]
    runs = number_runs(text)
    found += [f"answer {seq}" for seq in sequences if seq in runs]
    found += [f"answer {n}" for n in scalars if (n,) in runs or any(n in r for r in runs)]
    found += [f"answer {m.group()!r}" for m in BOOLEAN_ANSWERS.finditer(text)]
    return found


def test_the_leak_test_catches_the_hints_that_leaked():
    statements = solution_lines()
    _, sequences, scalars = quiz_answers()
    for text in KNOWN_LEAKS + KNOWN_ANSWER_LEAKS:
        assert leaks(text, statements, sequences, scalars), text
    # ... and it lets plain words, shapes and an experiment's numbers through.
    for text in ("q, k and v are [..., T, d]", "the shapes go [B,T,D] -> [B,T,H,d]",
                 "an input of 1 sample, 3 positions and 8 features"):
        assert not leaks(text, statements, sequences, scalars), text


def test_no_hint_gives_solution_code_or_a_quiz_answer():
    the_rubric = rubric.load()
    statements = solution_lines()
    answers, sequences, scalars = quiz_answers()
    assert sequences and scalars and any(v is False for v in answers.values())
    # One ladder per exercise, and the ladders checks lead to (device: attend.device, module.*)
    assert set(the_rubric.hints) == set(the_rubric.exercises()) | {c.hints for c in the_rubric.checks}
    for exercise, table in the_rubric.hints.items():
        for lang in rubric.LANGS:
            assert len(table[lang]) == 3, (exercise, lang)  # idea, axis or shape, experiment
            for text in table[lang]:
                assert leaks(text, statements, sequences, scalars) == [], (exercise, lang, text)
                assert "def " not in text and "return " not in text, (exercise, lang, text)


def test_make_hint_passes_exercise_submission_and_language():
    out = subprocess.run(["make", "-n", "hint", "EX=attend", "SUBMISSION=some/attention.py",
                          "LANG_ARG=en"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "-m grader hint attend --submission some/attention.py --lang en" in out.stdout
    release = subprocess.run(["make", "-n", "-C", os.path.join(ROOT, "release"), "hint", "watch"],
                             capture_output=True, text=True, timeout=60)
    assert "-m grader hint  --submission attention.py --lang zh" in release.stdout
    assert "-m grader watch attention.py --lang zh" in release.stdout


def test_a_hint_names_the_lessons_section():
    from grader import rubric as rubric_module
    from grader.tools import hints

    text = hints.render("split_heads", 1, 3, "a hint", "zh", repeated=False,
                        section=rubric_module.load().section("split", "zh"))
    assert "课文：第 12 讲" in text


def course_rubric(tmp_path, course):
    """The kit's rubric with `course` (TOML lines) in place of its empty [course] table."""
    from grader import rubric as rubric_module

    text = open(rubric_module.RUBRIC_PATH, encoding="utf-8").read()
    empty = '[course]\nlesson = ""\nchapter = ""\n\n[course.anchors]\n'
    assert empty in text  # the kit ships with no course address: pointers name titles only
    path = tmp_path / "rubric.toml"
    path.write_text(text.replace(empty, course), encoding="utf-8")
    return rubric_module.Rubric(str(path))


def test_every_pointer_resolves_through_the_course_address_set_once(tmp_path):
    """[course] set once: every check's pointer and every hint gives each title it names an
    address on its book's page, with the title's anchor (the title itself unless named)."""
    from urllib.parse import unquote

    from grader import rubric as rubric_module
    from grader.render import report
    from grader.tools import hints

    assert rubric_module.load().addresses("split") == []  # as shipped: no address set
    the_rubric = course_rubric(tmp_path, '[course]\nlesson = "https://x.edu/12.html"\n'
                                         'chapter = "https://x.edu/attn.html"\n\n'
                                         '[course.anchors]\n"缩放" = "scaling"\n')
    for check in the_rubric.checks:
        where = the_rubric.sections[check.section]
        titles = [("https://x.edu/12.html", t) for t in where.get("lesson", [])] + \
                 [("https://x.edu/attn.html", t) for t in where.get("chapter", [])]
        addresses = the_rubric.addresses(check.section)
        assert [(a.split("#")[0], unquote(a.split("#")[1])) for a in addresses] == \
            [(page, "scaling" if t == "缩放" else t) for page, t in titles], check.id
        assert all(a.isascii() and " " not in a for a in addresses)  # a terminal links it whole
        card = report.feedback(the_rubric, {"id": check.id, "status": "failed", "verdicts": [
            {"key": "not_equal", "fields": {}}]}, "en")
        assert card.splitlines()[-len(addresses):] == ["  " + a for a in addresses]
    text = hints.render("attend", 1, 3, "a hint", "en", repeated=False,
                        section=the_rubric.section("scale", "en"),
                        addresses=the_rubric.addresses("scale"))
    assert "  https://x.edu/attn.html#scaling\n" in text


def test_an_anchor_for_no_title_is_refused(tmp_path):
    with pytest.raises(ValueError, match="两个头"):
        course_rubric(tmp_path, '[course]\nlesson = "https://x.edu/12.html"\n\n'
                                '[course.anchors]\n"两个头" = "heads"\n')
