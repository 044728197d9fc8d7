"""The untouched stub's `make check`: one line per exercise and the next step (issue 72), in
either language; an exercise begun gets its cards again."""
import contextlib
import io
import os
import subprocess
import sys

from grader import rubric


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXERCISES = ("split_heads", "merge_heads", "attend", "CausalSelfAttention", "quiz")


def check(path, lang, process=False):
    """The lines `python -m grader check PATH --lang LANG` prints: as a process of its own
    where `process`, else its command (grader.__main__.grade_command) run in this process."""
    if process:
        done = subprocess.run([sys.executable, "-m", "grader", "check", path, "--lang", lang],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()
    from grader.__main__ import grade_command, parse

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = grade_command(parse(["check", os.path.join(ROOT, path), "--lang", lang]))
    assert code == 0, printed.getvalue()[-2000:]
    return printed.getvalue().strip().splitlines()


def test_the_stubs_report_is_one_line_per_exercise_and_the_next_step():
    """`make check`'s command line on the stub, in Chinese (the text the student reads: the public
    checks only, the hidden ones counted; the JSON of `check` is test_doors.py's), and its
    command in English."""
    hidden = len(rubric.load().select(("hidden",)))
    for lang, start in (("zh", "下一步：从 split_heads 开始写"), ("en", "Next: start with split_heads")):
        lines = check("exercises/attention.py", lang, process=lang == "zh")
        assert len(lines) <= 12, lines
        for exercise in EXERCISES:
            assert sum(line.startswith(f"✗ {exercise}  [0/") for line in lines) == 1, lines
        assert any(line.startswith(start) for line in lines), lines
        if lang == "zh":
            text = "\n".join(lines)
            assert f"另有 {hidden} 项隐藏检查没有运行" in text and "尚未实现" not in text
            assert "还没有开始（仍然 raise NotImplementedError）" in text  # one line per exercise


def test_a_begun_exercise_keeps_its_cards(tmp_path):
    stub = open(os.path.join(ROOT, "exercises", "attention.py"), encoding="utf-8").read()
    solution = open(os.path.join(ROOT, "solutions", "attention.py"), encoding="utf-8").read()
    # split_heads written (the reference's), the rest untouched
    begin = solution.index("def split_heads")
    end = solution.index("\ndef ", begin + 1)
    start, stop = stub.index("def split_heads"), stub.index("\ndef ", stub.index("def split_heads") + 1)
    path = tmp_path / "attention.py"
    path.write_text(stub[:start] + solution[begin:end] + stub[stop:], encoding="utf-8")
    lines = check(str(path), "en")
    assert any(line.startswith("✓ split_heads.shape") for line in lines), lines
    assert any(line.startswith("✗ merge_heads  [0/2]") for line in lines), lines
    assert any(line.startswith("Next: start with merge_heads") for line in lines), lines
