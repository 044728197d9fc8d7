"""`python -m grader hint` / `make hint`: levels one at a time, the state file beside the student's
file (never inside it), the first unfinished exercise, and hints that never hold solution code."""
import json
import os
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
    assert "提示 hint · merge_heads · 第 1/3 级" in out.stdout
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


def test_no_hint_contains_solution_code():
    the_rubric = rubric.load()
    statements = solution_lines()
    assert set(the_rubric.hints) == set(the_rubric.exercises())
    for exercise, table in the_rubric.hints.items():
        for lang in rubric.LANGS:
            assert len(table[lang]) >= 3, (exercise, lang)
            for text in table[lang]:
                leaked = [s for s in statements if s in text]
                assert leaked == [], (exercise, lang, leaked)
                assert "def " not in text and "return " not in text, (exercise, lang, text)


def test_make_hint_passes_exercise_submission_and_language():
    out = subprocess.run(["make", "-n", "hint", "EX=attend", "SUBMISSION=some/attention.py",
                          "LANG_ARG=en"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "-m grader hint attend --submission some/attention.py --lang en" in out.stdout
    release = subprocess.run(["make", "-n", "-C", os.path.join(ROOT, "release"), "hint", "watch"],
                             capture_output=True, text=True, timeout=60)
    assert "-m grader hint  --submission attention.py --lang zh" in release.stdout
    assert "-m grader watch attention.py --lang zh" in release.stdout
