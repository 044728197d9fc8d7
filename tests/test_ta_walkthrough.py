"""docs/instructors.md's "Grade a class in five steps", run as a TA would run it: every command of
the section's ```sh blocks, in order, from the kit's root, on the demo class (demo/class/); then
the FAQ's blocks (the override list, regrading one student).  The only change to the doc's text:
its `build/demo-...` output folders are put in a temporary folder, so the test leaves nothing in
the kit.  What the doc says the outputs show is checked against them: the demo table's status and
total per student, the pages and files each step names, the override on the page, the gradebook
and the export, and that regrading one student grades no one else.  About a minute on 2 cores."""
import csv
import html
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "instructors.md"
DEMO = ROOT / "demo" / "class"
WALKTHROUGH = "## Grade a class in five steps"
FAQ = "## FAQ"
OVERRIDE_WHY = "scaled by d, not √d: half the points"


def section(heading):
    text = DOC.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def sh_lines(text):
    """The lines of the ```sh blocks, in order."""
    return [line for block in re.findall(r"```sh\n(.*?)```", text, re.S)
            for line in block.splitlines() if line.strip()]


def demo_table(text):
    """{entry: (status, total, max)} from the section's table of the demo class."""
    rows = re.findall(r"^\| `(\w+\.py)` \|[^|]*\| `(\w+)` \| ([\d.]+) / (\d+) \|$", text, re.M)
    return {entry: (status, float(total), float(top)) for entry, status, total, top in rows}


def run_all(lines, out):
    # JOBS=1 (the Makefile's own variable, as a TA's shell may set it): `make batch` grades the
    # demo class on one judge, not one per core (the default jobs: test_batch's rerun and
    # test_default_jobs_one_per_usable_core_fewer_where_memory_is_short).
    env = dict(os.environ, JOBS="1")
    for line in lines:
        command = line.replace("build/demo-", f"{out}/demo-")
        done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                              timeout=600, env=env)
        assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stdout}{done.stderr}"


def gradebook(graded):
    with open(graded / "gradebook.csv", encoding="utf-8", newline="") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    out = tmp_path_factory.mktemp("ta")
    run_all(sh_lines(section(WALKTHROUGH)), out)
    return out


def test_the_walkthrough_is_short_and_names_the_class_page_early():
    text = DOC.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 30 * 1024
    first = next(n for n, line in enumerate(text.splitlines(), 1) if "summary.html" in line)
    assert first <= 150, first
    lines = sh_lines(section(WALKTHROUGH))
    assert lines[0] == "make batch DIR=demo/class OUT=build/demo-graded"
    for step in ("grader override", "grader export"):
        assert any(step in line for line in lines), step


def test_the_demo_class_is_the_table_and_its_stub_is_the_shipped_one():
    table = demo_table(section(WALKTHROUGH))
    assert sorted(table) == sorted(p.name for p in DEMO.iterdir())
    assert 6 <= len(table) <= 10
    assert (DEMO / "erin.py").read_bytes() == (ROOT / "exercises" / "attention.py").read_bytes(), \
        "demo/class/erin.py is the untouched stub: copy exercises/attention.py again"


def test_each_student_gets_what_the_table_says(walked):
    graded, table = walked / "demo-graded", demo_table(section(WALKTHROUGH))
    book = gradebook(graded)
    for entry, (status, total, top) in table.items():
        row = book[entry.removesuffix(".py")]
        total = total + 1 if entry == "carol.py" else total  # step 4 gave carol 1 of 2
        assert (row["status"], float(row["total"]), float(row["max_score"])) == \
            (status, total, top), (entry, row)
    statuses = {status for status, _, _ in table.values()}
    assert {"graded", "untouched_stub", "import_failed", "timed_out"} <= statuses
    mistakes = {(r["student"], r["mistake"]) for r in
                csv.DictReader(open(graded / "mistakes.csv", encoding="utf-8", newline=""))}
    for student, mistake in [("carol", "scale_by_d"), ("dave", "mask_fill_zero"),
                             ("heidi", "merge_no_transpose")]:
        assert (student, mistake) in mistakes


def test_the_pages_the_steps_open_say_what_the_doc_says(walked):
    graded = walked / "demo-graded"
    summary = html.unescape((graded / "summary.html").read_text(encoding="utf-8"))
    assert "SyntaxError: '(' was never closed (attention.py, line 14)" in summary and "scale_by_d" in summary
    assert OVERRIDE_WHY in summary
    for student in [p.stem for p in DEMO.iterdir()]:
        assert (graded / "students" / student / "feedback.html").is_file()
    carol = html.unescape((graded / "students" / "carol" / "feedback.html").read_text("utf-8"))
    assert "看起来除以了 d 而不是 √d" in carol and "隐藏检查" in carol
    assert OVERRIDE_WHY in carol and "助教改分" in carol
    # grace's attend never returns: her page names the line it was stuck on, and the heatmap
    # panel says it timed out
    grace = html.unescape((graded / "students" / "grace" / "feedback.html").read_text("utf-8"))
    assert "超时的时候正在运行这一行（第 52 行）" in grace and "while True:  # spin for ever" in grace
    assert "attend 超时了，没有交出权重" in grace
    for page in (graded / "students").glob("*/feedback.html"):
        text = html.unescape(page.read_text(encoding="utf-8"))
        assert "抄袭" not in text and "similarity" not in text  # the FAQ: students never see flags


def test_the_override_is_kept_and_exported(walked):
    graded = walked / "demo-graded"
    (kept,) = json.loads((graded / "overrides.json").read_text(encoding="utf-8"))["overrides"]
    assert (kept["student"], kept["check"], kept["score"]) == ("carol", "attend.scale", 1)
    assert "助教改分" in gradebook(graded)["carol"]["note"]
    with open(walked / "demo-export" / "scores.csv", encoding="utf-8", newline="") as handle:
        scores = {row["student"]: row for row in csv.DictReader(handle)}
    assert (scores["carol"]["score"], scores["carol"]["overridden"]) == ("34", "attend.scale")
    assert (walked / "demo-export" / "gradescope" / "carol" / "results.json").is_file()
    handed = sorted(p.name for p in (walked / "demo-handback").iterdir())
    assert handed == sorted(p.stem + ".html" for p in DEMO.iterdir())


def test_the_faq_commands_regrade_one_student_and_keep_the_override(walked):
    graded = walked / "demo-graded"
    reports = {p.parent.name: p.stat().st_mtime_ns for p in graded.glob("students/*/report.json")}
    run_all(sh_lines(section(FAQ)), walked)
    after = {p.parent.name: p.stat().st_mtime_ns for p in graded.glob("students/*/report.json")}
    assert sorted(name for name in after if after[name] != reports.get(name)) == ["grace"]
    assert gradebook(graded)["carol"]["total"] == "34"
