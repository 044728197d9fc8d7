"""The door matrix, part two: the student's doors, `watch` and the notebook's `%check`, on every
file of the corpus (tests/door_matrix.py)."""
import json
import os
import subprocess
import time

import pytest

from door_matrix import (FILES, PY, ROOT, RUBRIC, SAMPLE, baseline, batched,  # noqa: F401
                         public, verdict)
from grader.tools import notebook as kernel_side


@pytest.fixture(scope="module")
def kernel_judge():
    """The kernel's judge process, as a notebook keeps one: every `%check` below goes to it."""
    judge = kernel_side.kernel_judge()
    try:
        yield judge
    finally:
        judge.stop()


def test_the_kernels_check_gives_the_public_part_of_grade(baseline, kernel_judge):
    """`%check`'s engine: the assembled cells, graded by the kernel's own judge process."""
    for name, path in FILES.items():
        source = kernel_side.assemble([path.read_text(encoding="utf-8")])
        data = kernel_side.judge(source, hidden=False, timeout=300)
        assert "error" not in data, (name, data)
        assert verdict(data) == public(baseline[name]), name


def test_the_kernels_check_of_one_exercise_gives_its_part_of_grade(baseline, kernel_judge):
    """`%check EXERCISE` runs that exercise's checks only: each gets the verdict grade gives it
    (a check judges its own piece, whatever else ran before it), on the slow doors' sample (full
    marks, nothing, a named mistake in each piece: every file of the corpus goes through the
    whole `%check` above, in the same judge process)."""
    for name in SAMPLE:
        source = kernel_side.assemble([FILES[name].read_text(encoding="utf-8")])
        for exercise in RUBRIC.exercises():
            data = kernel_side.judge(source, hidden=False, timeout=300, exercise=exercise)
            assert "error" not in data, (name, exercise, data)
            want = {key: value for key, value in public(baseline[name]).items()
                    if RUBRIC.by_id[key].exercise == exercise}
            assert verdict(data) == want, (name, exercise)


def test_watch_shows_the_public_part_of_grade(baseline, tmp_path):
    """One `watch` process, the corpus saved into the watched file one after the other: a file
    of each public verdict the corpus holds (the first in the corpus's order, the stub first), so
    every screen a file of the corpus gets from `check` is drawn (the whole `%check` above takes
    every file of the corpus, each through the kernel's cell assembly; the same Judge)."""
    names, seen = [], set()
    for name in ["stub"] + [n for n in FILES if n != "stub"]:
        screen = tuple(sorted(public(baseline[name]).items()))
        if screen not in seen:
            seen.add(screen)
            names.append(name)
    assert "reference" in names and any(n.startswith("wrong-") for n in names)
    watched, stats = tmp_path / "attention.py", tmp_path / "stats.jsonl"
    watched.write_text(FILES["stub"].read_text(encoding="utf-8"), encoding="utf-8")
    proc = subprocess.Popen([PY, "-m", "grader", "watch", str(watched), "--poll", "--lang", "en",
                             "--stats", str(stats)], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        shown = [wait_for_screen(stats, 1, proc)]
        for number, name in enumerate(names[1:], start=2):
            temporary = tmp_path / "attention.py.saving"
            temporary.write_text(FILES[name].read_text(encoding="utf-8"), encoding="utf-8")
            os.replace(temporary, watched)
            shown.append(wait_for_screen(stats, number, proc))
    finally:
        proc.kill()
        proc.wait()
    for name, screen in zip(names, shown):
        assert verdict(screen) == public(baseline[name]), name
        assert {c: (s, round(float(p), 4)) for c, s, p in screen["checks"]} == \
            public(baseline[name]), name  # what the screen showed


def wait_for_screen(stats, number, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stats.exists():
            lines = stats.read_text(encoding="utf-8").splitlines()
            if len(lines) >= number:
                return json.loads(lines[number - 1])
        assert proc.poll() is None, "watch ended"
        time.sleep(0.05)
    pytest.fail(f"watch drew no screen {number} within {seconds} s")


