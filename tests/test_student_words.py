"""The words the student tools print themselves (the checks' words are the rubric's and are
tested with the checks): lesson pointers name the lessons' own sections, Chinese text is
Chinese, counts agree with their nouns, numbers are printed one way."""
import os
import re

import pytest

from grader.authoring import release, stubs as authoring
from grader.tools import hints, submit, watch
from grader import notebook, rubric
from grader.render import report

THE_RUBRIC = rubric.load()
LESSON_TITLES = ("第 12 讲", "「多头自注意力」", "lesson 12", "chapter 「多头自注意力」")
# Words a Chinese sentence may carry: commands, code and file names, never English prose.
CODE_WORDS = {"make", "check", "hint", "EX", "watch", "submit", "STUDENT", "SUBMISSION", "CONFIRM",
              "Ctrl", "C", "attention", "py", "ipynb", "attend", "git", "push", "commit",
              "raise", "NotImplementedError", "None", "yes", "y", "N", "KiB", "GitHub",
              "Classroom", "venv", "zip", "id"}


@pytest.mark.parametrize("lang", rubric.LANGS)
def test_every_lesson_pointer_names_lesson_sections_only(lang):
    for check in THE_RUBRIC.checks:
        where = THE_RUBRIC.section(check.section, lang)
        assert where, check.id
        assert "seed" not in where.lower() and not re.search(r"\d{3}\)", where), where
        assert any(title in where for title in LESSON_TITLES), where
        assert "「" in where  # a section title, as the lesson prints it


def test_the_report_points_to_the_section_not_a_file():
    result = {"id": "attend.causal", "status": "failed", "verdicts": [
        {"key": "mask_missing", "fields": {}}]}
    for lang in rubric.LANGS:
        text = report.feedback(THE_RUBRIC, result, lang)
        where = text.splitlines()[-1]
        assert where.startswith(report.TEXT[lang]["see"]) and "seed" not in where
        assert "因果掩码" in where and ".py" not in where and ".txt" not in where


def english_words(text):
    text = re.sub(r"\{\w+(![rs])?\}", "", text)  # placeholders
    return {w for w in re.findall(r"[A-Za-z]+", text) if w not in CODE_WORDS}


@pytest.mark.parametrize("table", [report.TEXT, watch.TEXT, hints.TEXT, submit.TEXT,
                                   notebook.TEXT], ids=["report", "watch", "hint", "submit",
                                                        "notebook"])
def test_chinese_tool_words_have_no_english_fragment(table):
    for key, text in table["zh"].items():
        assert not english_words(text), (key, text)
    assert set(table["zh"]) == set(table["en"])


def test_plurals_and_numbers():
    assert report.plural(1, "check", "checks") == "check"
    assert report.plural(2, "check", "checks") == "checks"
    assert [report.points(x) for x in (1, 1.0, 0.5, 2.25, 22, 1 / 3)] == \
        ["1", "1", "0.5", "2.25", "22", "0.3333"]
    data = {"checks": [{"id": "split_heads.shape", "exercise": "split_heads", "status": "passed",
                        "score": 1.0, "max_score": 1.0, "verdicts": []}],
            "score": 1.0, "max_score": 1.0, "metadata": {}}
    text = report.to_text(THE_RUBRIC, data, "en", hidden_not_run=1)
    assert "score: 1 / 1 (1/1 check passed)" in text
    assert "1 hidden check was not run" in text
    assert "1.0" not in text and "checks passed" not in text


def test_an_import_error_is_said_once_with_its_line_as_written():
    verdict = {"key": "import_failed", "fields": {
        "type": "IndentationError", "message": "unexpected indent (attention.py, line 4)",
        "where": "attention.py:4:       return x"}}
    checks = [{"id": c.id, "exercise": c.exercise, "status": "failed", "score": 0,
               "max_score": c.points, "verdicts": [verdict]}
              for c in THE_RUBRIC.select(("public",))]
    data = {"checks": checks, "score": 0, "max_score": 22, "metadata": {}}
    for lang in rubric.LANGS:
        text = report.to_text(THE_RUBRIC, data, lang)
        assert text.count("IndentationError") == 1, text
        assert "    |       return x\n" in text  # the indentation is the evidence: kept
        assert text.index("IndentationError") < text.index("== split_heads ==")
        assert text.count(report.TEXT[lang]["not_run"]) == len(checks)


# -- the Makefiles: their own messages go to stderr ------------------------------------------------
MAKEFILES = [os.path.join(authoring.ROOT, "Makefile"),
             os.path.join(release.RELEASE_TEMPLATES, "Makefile")]


@pytest.mark.parametrize("makefile", MAKEFILES, ids=["kit", "student bundle"])
def test_makefile_messages_go_to_stderr(makefile):
    """`make grade FORMAT=json > report.json` must be JSON: every echo of the Makefile's own (set
    up, bubblewrap missing, usage) goes to stderr, and so does what venv and pip print."""
    with open(makefile, encoding="utf-8") as handle:
        text = handle.read().replace("\\\n", " ")
    for line in text.splitlines():
        for echo in re.findall(r"echo [^;|}]*", line):
            assert echo.rstrip().endswith(">&2"), line
        if re.search(r"-m (venv|pip)|/pip install", line):
            assert line.rstrip().endswith(">&2") and line.lstrip().startswith("@"), line


def test_make_grade_json_is_json_on_stdout():
    import json
    import subprocess

    root = authoring.ROOT
    # -o: the venv is set up already (make test depends on setup); the sandbox target runs.
    done = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed", "grade",
                           "FORMAT=json", "SUBMISSION=solutions/attention.py"], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["score"] == data["max_score"] > 0
