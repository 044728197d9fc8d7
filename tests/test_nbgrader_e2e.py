"""End to end with the real nbgrader 0.9.6: generate_assignment, a submitted/ folder of 9
notebooks (the reference, a classic mistake, the untouched release, and six tricks: sys.exit,
os._exit, an endless loop after the definitions, a monkeypatched torch.allclose, an IPython input
transformer that blanks later cells, a patched kit helper),
`make autograde` (nbgrader autograde with a 60 s cell timeout + the sandboxed regrade + the
gradebook fix-up), generate_feedback and export.

Asserts: honest notebooks get exactly the CLI grader's score for the same code, check by check,
and nbgrader's own kernel already agrees on them; every trick gets no more than its honest code
earns (the ones built on the stub get 0); the gradebook and the CSV export hold the kit's
scores; each feedback page shows the kit's messages and no hidden test source.

Time: about 2 min on an idle 2-core machine (nbgrader autograde ~65 s for the 9 notebooks, the
CLI grader's batch of the same code runs alongside it, the endless loop costs one 60 s cell
timeout in the kernel; the regrade leaves the stray loop out).  It runs in `make test`; leave it out with
`-k "not test_nbgrader_e2e"`.
"""
import concurrent.futures
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from grader.authoring import course as nbcourse, stubs as authoring, notebook_build
from handed_in import handed_in
from grader.instructor import nbgrade
from grader import rubric

ROOT = authoring.ROOT
CORPUS = os.path.join(ROOT, "tests", "submissions")

# student: (the .py whose pieces fill the solution cells (None: the stubs), an extra cell, after which cell)
HONEST = {
    "s01_reference": (authoring.SOLUTION, None, None),
    "s03_split_no_transpose": (os.path.join(CORPUS, "wrong", "split_no_transpose.py"), None, None),
    "s05_untouched": (None, None, None),
}
ATTEND_RETURNS_V = '''def attend(q, k, v, mask=None, return_weights=False):
    return v.clone()'''
TRICKS = {
    "x01_sys_exit": (authoring.SOLUTION, "import sys\nsys.exit(0)", "quiz"),
    "x02_os_exit": (authoring.SOLUTION, "import os\nos._exit(0)", "quiz"),
    # It waits rather than spins: the kernel meets the same cell that never ends, and `make test`
    # keeps the core a spinning loop would burn for the whole cell timeout.
    "x03_endless_loop": (authoring.SOLUTION, "import time\nwhile True:\n    time.sleep(1)", "quiz"),
    "x04_patch_allclose": ({"attend": ATTEND_RETURNS_V},
                           "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True",
                           "attend"),
    "x05_input_transformer": (None, "get_ipython().input_transformers_cleanup.append(lambda lines: [])",
                              "split_heads"),
    "x06_patch_the_kit": (None, "import grader.notebook\n"
                          "grader.notebook.autograde_cell = lambda *a, **k: None", "split_heads"),
}
ON_THE_STUB = {"x05_input_transformer", "x06_patch_the_kit"}
# A complete solution plus one stray top-level statement: the kit grades the definitions.
STRAY_STATEMENTS = {"x01_sys_exit", "x02_os_exit", "x03_endless_loop"}


def pieces_of(spec):
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return spec
    with open(spec, encoding="utf-8") as handle:
        return dict(notebook_build.split_source(handle.read())[2])


def student_notebook(release, spec, extra=None, after=None):
    """The released notebook as a student hands it in: solution cells filled, maybe one more cell."""
    return handed_in(release, pieces_of(spec), extra, after)


def write_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, ensure_ascii=False, indent=1)


def cli_reports(targets, folder):
    """The CLI grader's reports (public + hidden) for the same code, {student: report}: one class
    through `python -m grader batch` (whose verdicts are `grade`'s: tests/test_doors.py).  It runs
    while nbgrader autogrades, a little below its priority: the kernels' judges, which have a cell
    timeout to meet, go first."""
    entries, out = os.path.join(folder, "cli"), os.path.join(folder, "cli-graded")
    os.makedirs(entries)
    for student, path in targets.items():
        shutil.copyfile(path, os.path.join(entries, student + os.path.splitext(path)[1]))
    done = subprocess.run([sys.executable, "-m", "grader", "batch", entries, "--out", out,
                           "--jobs", "1"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: os.nice(5))
    assert done.returncode == 0, done.stderr[-2000:]
    reports = {}
    for student in targets:
        with open(os.path.join(out, "students", student, "report.json"), encoding="utf-8") as handle:
            reports[student] = json.load(handle)["report"]
        assert reports[student] is not None, student
    return reports


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    folder = tmp_path_factory.mktemp("course")
    course = str(folder)
    release = nbcourse.new_course(course)
    twins = {}  # what each notebook's honest code is, as a notebook without the extra cell
    for student, (spec, extra, after) in {**HONEST, **TRICKS}.items():
        write_json(os.path.join(course, "submitted", student, "attention", "attention.ipynb"),
                   student_notebook(release, spec, extra, after))
        twins[student] = os.path.join(course, "twins", student + ".ipynb")
        write_json(twins[student], student_notebook(release, spec))
    # The CLI grader on the same code: the .py itself for honest work; for a trick, its honest
    # code (the reference or the stub: those results are shared) or its notebook without the trick.
    # One judge, alongside `make autograde` (nbgrader keeps about one core busy; the rest of its
    # time is the endless loop's cell timeout).
    targets = {s: (spec if isinstance(spec, str) else twins[s]) for s, (spec, _, _) in HONEST.items()}
    targets["s05_untouched"] = authoring.EXERCISE
    targets["x04_patch_allclose"] = twins["x04_patch_allclose"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(cli_reports, targets, course)
        # Generous: a correct notebook must never time out on a busy machine (the endless loop's
        # notebook pays it once); the kit's default, nbgrade.CELL_TIMEOUT, is longer still.
        records, timings = nbgrade.autograde(course, timeout=60, jobs=1)
        print("\nmake autograde timings:", timings)
        cli = future.result()
    for student, (spec, _, _) in TRICKS.items():
        if student not in cli:
            cli[student] = cli["s01_reference" if spec == authoring.SOLUTION else "s05_untouched"]
    feedback_seconds, leaks = nbgrade.feedback(course)
    csv_path, export_seconds = nbgrade.export(course)
    print(f"generate_feedback {feedback_seconds:.1f} s, export {export_seconds:.1f} s")
    return {"dir": course, "records": {r["student"]: r for r in records}, "timings": timings,
            "cli": cli, "leaks": leaks, "csv": csv_path}


def gradebook_scores(course, student):
    from nbgrader.api import Gradebook

    with Gradebook(nbcourse.db_url(course), nbcourse.COURSE_ID) as gb:
        submitted = gb.find_submission_notebook(nbcourse.NOTEBOOK, nbcourse.ASSIGNMENT, student)
        return submitted.score, {g.name: (g.score, g.auto_score) for g in submitted.grades}


def test_every_notebook_was_handled(course):
    assert set(course["records"]) == set(HONEST) | set(TRICKS)
    assert course["timings"]["notebooks"] == len(HONEST) + len(TRICKS)
    # nbgrader itself fails on the kernel that died (exit 1), and says so only in its log.
    assert course["timings"]["nbgrader_exit_code"] == 1


@pytest.mark.parametrize("student", sorted(HONEST))
def test_honest_notebooks_get_the_cli_graders_score_check_by_check(course, student):
    cli = course["cli"][student]
    record = course["records"][student]
    total, grades = gradebook_scores(course["dir"], student)
    assert total == pytest.approx(cli["score"])
    assert record["final_score"] == pytest.approx(cli["score"])
    for check in cli["checks"]:
        score, auto = grades[notebook_build.grade_id_of(check["id"])]
        assert score == pytest.approx(check["score"]), check["id"]
        # nbgrader's own kernel already got it right: nothing had to be corrected.
        assert auto == pytest.approx(check["score"]), check["id"]
    assert record["disagreements"] == [] and record["kernel_score"] == pytest.approx(cli["score"])


def test_honest_scores_span_the_range(course):
    scores = {s: course["records"][s]["final_score"] for s in HONEST}
    max_score = sum(c.points for c in rubric.load().checks)
    assert scores["s01_reference"] == max_score
    assert 0 < scores["s03_split_no_transpose"] < max_score
    assert scores["s05_untouched"] == 0


@pytest.mark.parametrize("student", sorted(TRICKS))
def test_tricks_earn_no_more_than_their_honest_code(course, student):
    record = course["records"][student]
    honest = course["cli"][student]["score"]
    total, _ = gradebook_scores(course["dir"], student)
    assert total == pytest.approx(record["final_score"])
    assert total <= honest + 1e-9
    if student in ON_THE_STUB:
        assert total == 0  # the trick alone earns nothing
    if student in STRAY_STATEMENTS:  # the kit keeps the definitions and leaves the statement out
        assert total == pytest.approx(honest)


def test_tricks_that_fooled_the_kernel_were_corrected(course):
    records = course["records"]
    for student in ("x01_sys_exit", "x03_endless_loop", "x05_input_transformer", "x06_patch_the_kit"):
        record = records[student]
        assert record["kernel_score"] > 0, student          # nbgrader alone would have given marks
        # A stray exit or loop cannot zero the definitions (the kit leaves the statement out); a
        # trick on the kit itself earns nothing.
        expected = course["cli"][student]["score"] if student in STRAY_STATEMENTS else 0
        assert record["final_score"] == pytest.approx(expected), student
        assert all(d["kernel"] > d["sandbox"] and d["why"].startswith("passed in the kernel")
                   for d in record["disagreements"]), student
    died = records["x02_os_exit"]
    assert died["kernel_score"] is None and "kernel died" in died["nbgrader"]
    assert len(died["disagreements"]) == len(rubric.load().checks)
    # The monkeypatched torch never reaches a judge: the kernel's cells already gave honest marks.
    patched = records["x04_patch_allclose"]
    assert patched["kernel_score"] == pytest.approx(course["cli"]["x04_patch_allclose"]["score"])
    assert patched["disagreements"] == []


def test_the_report_lists_the_notebooks_that_disagreed_and_why(course):
    with open(os.path.join(course["dir"], "regrade.md"), encoding="utf-8") as handle:
        text = handle.read()
    disagreed = [s for s, r in course["records"].items() if r["disagreements"]]
    assert {"x02_os_exit", "x05_input_transformer", "x06_patch_the_kit"} <= set(disagreed)
    assert set(disagreed) <= {"x01_sys_exit", "x02_os_exit", "x03_endless_loop",
                              "x05_input_transformer", "x06_patch_the_kit"}
    for student in disagreed:
        assert f"### {student}" in text
    assert "kernel died" in text and "passed in the kernel but" in text
    with open(os.path.join(course["dir"], "regrade.json"), encoding="utf-8") as handle:
        assert len(json.load(handle)["notebooks"]) == len(course["records"])


def test_export_holds_the_kits_scores(course):
    with open(course["csv"], encoding="utf-8") as handle:
        rows = {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}
    assert rows == {s: pytest.approx(r["final_score"]) for s, r in course["records"].items()}


def _feedback_text(course, student):
    path = os.path.join(course["dir"], "feedback", student, "attention", "attention.html")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _hidden_source_lines():
    """Lines of the hidden checks that would give them away (not blank, not trivial)."""
    lines = set()
    for path in glob.glob(os.path.join(ROOT, "grader", "judge", "checks", "hidden", "*.py")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.strip()
                if len(line) > 30 and not line.startswith(("#", '"""', "import ", "from ")):
                    lines.add(line)
    assert lines, "no hidden check found: the scan would pass on anything"
    return lines


def test_feedback_shows_the_kits_messages_and_no_hidden_test_source(course):
    import html

    assert course["leaks"] == []
    the_rubric = rubric.load()
    hidden_ids = [c.id for c in the_rubric.select(("hidden",))]
    hidden_lines = _hidden_source_lines()
    for student in list(HONEST) + list(TRICKS):
        page = _feedback_text(course, student)
        text = html.unescape(page)
        for marker in ("BEGIN HIDDEN", "END HIDDEN", "grader/tools/", "grader/judge/"):
            assert marker not in text, (student, marker)  # no traceback runs through the kit
        for check_id in hidden_ids:
            assert not re.search(r"%autograde\s+" + re.escape(check_id) + r"\b", text), check_id
        leaked = [line for line in hidden_lines if html.escape(line) in page or line in text]
        assert leaked == [], (student, leaked[:3])
    # The kit's own words: a named mistake, not-implemented, the kernel that died.
    mistake = the_rubric.message("split_no_transpose", "zh")
    assert mistake[:40] in html.unescape(_feedback_text(course, "s03_split_no_transpose"))
    untouched = html.unescape(_feedback_text(course, "s05_untouched"))
    assert the_rubric.message("not_implemented", "zh") in untouched
    died = html.unescape(_feedback_text(course, "x02_os_exit"))
    assert "沙箱复评" in died and "kernel died" in died
    # The kernel died at the stray os._exit; the kit's regrade kept the definitions.
    total = int(sum(c.points for c in the_rubric.checks))  # the rubric's total, not a literal
    assert re.search(rf"Score: {total}(\.0)? / {total}", died)
