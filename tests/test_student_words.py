"""The words the student tools print themselves (the checks' words are the rubric's and are
tested with the checks): lesson pointers name the lessons' own sections, Chinese text is
Chinese, counts agree with their nouns, numbers are printed one way."""
import os
import re

import pytest

from grader.judge.workers import forked
from grader.authoring import release, stubs as authoring
from grader.tools import hints, submit, watch
from grader import notebook, rubric
from grader.judge.checks import support
from grader.render import report
from grader.rubric import said

import words

THE_RUBRIC = rubric.load()
LESSON_TITLES = ("第 12 讲", "「多头自注意力」", "lesson 12", "chapter 「多头自注意力」")


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


# -- one language per line: every message key and every UI word, with realistic values --------
# A realistic value for every placeholder of the rubric's messages, as the checks fill them (a
# value said in both languages is a pair, as rubric.said makes it).
FIELDS = {
    "advice": support.NO_CHECK_ADVICE, "case": "split_heads(x[1,2,6], heads=4)", "d": "4",
    "expected": "0.2500", "got": "0.5000", "limit": "3 GiB", "losses": "4.12, 3.05, 0.81",
    "max_len": "8", "message": "shape '[1, 2, 4, 1]' is invalid for input of size 12",
    "name": "Q1_SHAPE", "names": "W_q, W_k", "params": "qkv.weight[36, 12], out_proj.weight[12, 12]",
    "rank": "3", "registered": "nn.Parameter", "seen": "1/(t+1)", "t": "2",
    "type": "RuntimeError", "what": "scaled_dot_product_attention", "where": "context[1, 2, 3] ",
    "device": "meta", "dtype": "bfloat16",
}
# Messages whose {message} is the grader's own account (a worker that timed out, died, ...).
WORKER_WORDS = {"timeout": said("导入 attention.py 时，30 秒内没有完成",
                                "while importing attention.py: no answer within 30 s"),
                "crashed": said("进程结束了（退出码 1）", "worker exited (exit code 1)"),
                "protocol": said("应答的次序或格式不对", "reply out of order or malformed"),
                "budget": said("这份提交的 120 秒时间预算已经用完",
                               "the time budget of 120 s for this submission is used up"),
                "sandbox": said("评分器没能搭好运行代码的沙箱（退出码 70）",
                                "the grader could not set up its sandbox (exit code 70)")}


def example_fields(key):
    fields = dict(FIELDS)
    if key in WORKER_WORDS:
        fields["message"] = WORKER_WORDS[key]
    if key == "quiz_type":
        fields["expected"] = THE_RUBRIC.quiz_forms["Q1_SHAPE"]
    return fields


@pytest.mark.parametrize("lang", rubric.LANGS)
def test_every_message_says_one_language(lang):
    for key, message in THE_RUBRIC.messages.items():
        placeholders = set(re.findall(r"\{(\w+)", message.get(lang, "")))
        assert placeholders <= set(FIELDS), (key, placeholders - set(FIELDS))
        text = THE_RUBRIC.message(key, lang, **example_fields(key))
        assert "{" not in text.replace("{losses", ""), (key, text)
        assert not words.foreign(text, lang), (key, text, words.foreign(text, lang))


@pytest.mark.parametrize("lang", rubric.LANGS)
def test_every_rubric_text_says_one_language(lang):
    texts = [(c.id, c.title[lang]) for c in THE_RUBRIC.checks]
    texts += [(c.id, c.checked[lang]) for c in THE_RUBRIC.checks]
    texts += [(key, THE_RUBRIC.section(key, lang)) for key in THE_RUBRIC.sections]
    texts += [(ex, hint) for ex, levels in THE_RUBRIC.hints.items() for hint in levels[lang]]
    texts += [(name, form[lang]) for name, form in THE_RUBRIC.quiz_forms.items()]
    for where, text in texts:
        assert text and not words.foreign(text, lang), (where, text, words.foreign(text, lang))


def test_section_titles_are_the_lessons_own():
    """Every title a pointer names is printed in the lesson (when the lesson texts are here) and
    has an English title; every check points to at least one section."""
    seeds = "/work/shared/seeds"
    lesson = "".join(open(os.path.join(seeds, name), encoding="utf-8").read()
                     for name in sorted(os.listdir(seeds))) if os.path.isdir(seeds) else None
    for key, where in THE_RUBRIC.sections.items():
        names = where.get("lesson", []) + where.get("chapter", [])
        assert names, key
        for book in ("lesson", "chapter"):
            for name in where.get(book, []):
                assert THE_RUBRIC.titles[book][name], name
                assert lesson is None or name in lesson, name
    pointed = {THE_RUBRIC.section(c.section, "en") for c in THE_RUBRIC.checks}
    assert len(pointed) >= 12  # each piece points to the section that teaches it


@pytest.mark.parametrize("table", [report.TEXT, watch.TEXT, hints.TEXT, submit.TEXT,
                                   notebook.TEXT], ids=["report", "watch", "hint", "submit",
                                                        "notebook"])
@pytest.mark.parametrize("lang", rubric.LANGS)
def test_tool_words_say_one_language(table, lang):
    for key, text in table[lang].items():
        assert not words.foreign(text, lang), (key, text, words.foreign(text, lang))
    assert set(table["zh"]) == set(table["en"])


def test_the_grader_says_its_own_failures_in_both_languages():
    """Every worker failure the grader raises carries its Chinese words (WorkerFailure(kind,
    English, Chinese)), so a timeout or a dead worker reads in one language."""
    import glob

    found = 0
    for path in glob.glob(os.path.join(authoring.ROOT, "grader", "**", "*.py"), recursive=True):
        source = open(path, encoding="utf-8").read()
        for match in re.finditer(r"(?:WorkerFailure|self\._fail)\(\s*\"", source):
            call = _call_text(source, match.start())
            found += 1
            literals = re.findall(r'"((?:[^"\\]|\\.)*)"', call)
            chinese = [re.sub(r"\{[^}]*\}", "", t) for t in literals if words.chinese_characters(t)]
            assert chinese, (path, call)
            for text in chinese:
                assert not words.foreign(text, "zh"), (path, text)
    assert found >= 10


def _call_text(source, start):
    depth = 0
    for end in range(source.index("(", start), len(source)):
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        if depth == 0:
            return source[start:end + 1]
    return source[start:]


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


# -- no dead ends ----------------------------------------------------------------------------------
def test_a_stuck_import_shows_the_line_it_was_stuck_at(tmp_path):
    """An endless loop at import: the timeout names the line of the student's file the worker
    was running (the worker tells it while importing), in each language, nothing else of it.
    The loop sleeps rather than spins: as stuck, without a core burnt while the judge waits."""
    from grader.judge import grading
    from grader.sandbox import forkserver, launch

    work = tmp_path / "attention.py"
    work.write_text("import math, time\n\nn = 0\nwhile n >= 0:\n    time.sleep(0.1)\n",
                    encoding="utf-8")
    # A fork server: torch is imported before the wait for the import starts, so a short wait
    # is the student's import alone, however busy the machine.
    isolation = launch.choose_isolation("auto")
    server = forkserver.ForkServer(isolation) if forkserver.supported(isolation) else None
    try:
        sub, student = grading.start(str(work), workers=forked(server) if server else None)
        student.startup_seconds = 4.0 if server else 20.0
        data = grading.finish(sub, student, ("public",))
    finally:
        if server:
            server.close()
    verdict = report.import_failure(data)
    assert verdict["key"] == "timeout" and verdict["fields"]["during"] == "import"
    assert verdict["fields"]["where"] in ("attention.py:4: while n >= 0:",
                                          "attention.py:5:     time.sleep(0.1)")
    for lang in rubric.LANGS:
        text = report.to_text(THE_RUBRIC, data, lang)
        head = text.split("== split_heads ==")[0]
        assert report.TEXT[lang]["stuck_line"].split("（")[0].split("(")[0] in head, head
        assert "| while n >= 0:" in head or "|     time.sleep(0.1)" in head, head
        assert words.foreign_lines(text, lang) == [], lang
        assert "Thread" not in text and "File " not in text  # no stack of the worker's own


def test_a_sandbox_that_could_not_start_is_the_graders_failure():
    """A worker that exits 70 (zygote.py: the sandbox could not be set up) is said as the
    grader's failure, an error, never blamed on the student's code."""
    from grader.judge.runner import classify
    from grader.judge.student import Student
    from grader.sandbox.launch import WorkerFailure

    class Gone:
        def poll(self):
            return 70

    student = Student.__new__(Student)
    student.events, student.worker = [], type("W", (), {"proc": Gone(), "kill": lambda self: None,
                                                       "stdout": None})()
    student.close = lambda: None
    with pytest.raises(WorkerFailure) as caught:
        student._exited()
    verdict = classify(caught.value)
    assert verdict["status"] == "error" and verdict["key"] == "sandbox"
    for lang in rubric.LANGS:
        text = THE_RUBRIC.message(verdict["key"], lang, **verdict["fields"])
        assert "70" in text and not words.foreign(text, lang), text
    assert "你的代码的问题" in THE_RUBRIC.message("sandbox", "zh", **verdict["fields"])
    assert "exit" not in THE_RUBRIC.message("sandbox", "zh", **verdict["fields"])


@pytest.mark.parametrize("line, parsed", [
    ("", (None, None)), ("attend", ("attend", None)), ("attend --lang en", ("attend", "en")),
    ("--lang en", (None, "en")), ("--lang=zh split_heads", ("split_heads", "zh")),
    ("attend merge_heads", None), ("attend --lang fr", None)])
def test_notebook_check_line(line, parsed):
    assert notebook.parse_check_line(line) == parsed


def test_notebook_says_its_language_and_how_to_change_it_first():
    from grader.authoring import notebook_build

    cells = notebook_build.build()["cells"]
    intro, kit = (notebook_build.cell_text(c) for c in cells[:2])
    assert "%lang en" in intro and "%check attend --lang en" in intro
    assert kit.splitlines()[-1] == "%lang zh" and "%load_ext grader.notebook" in kit
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        for line in notebook_build.cell_text(cell).splitlines():
            if line.startswith("#") and words.chinese_characters(line):
                assert not words.foreign(line, "zh"), line
            elif line.startswith("#"):
                assert not words.foreign(line, "en"), line
    assert not [c for c in cells if "points）" in notebook_build.cell_text(c)
                or "(1 points)" in notebook_build.cell_text(c)]


def test_the_stub_says_each_answers_form_and_no_seed_file():
    stub = open(authoring.EXERCISE, encoding="utf-8").read()
    for name, form in THE_RUBRIC.quiz_forms.items():
        assert f"# {name}：{form['zh']}\n# {name}: {form['en']}\n{name} = None  # TODO" in stub
    for root, _, files in os.walk(os.path.join(authoring.ROOT, "release")):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith((".py", ".md", ".ipynb", ".toml", ".yml")):
                assert not re.search(r"seed 00\d", open(path, encoding="utf-8").read()), path
    for line in stub.splitlines():  # one language per comment or docstring line
        if words.chinese_characters(line):
            assert not words.foreign(line.split(" / ")[0], "zh"), line
