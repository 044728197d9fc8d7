"""The kit's regrade of every notebook nbgrader autograded, outside any kernel, and the gradebook
fixed up where the two disagree.

Why a regrade.  In nbgrader the student's code and the tests share one kernel: a notebook can
replace the test helpers, monkeypatch torch, blank later cells with an input transformer, or kill
the kernel (`os._exit`), and nbgrader believes what the kernel printed.  So every submitted
notebook is graded again, its kit cells left out, as a class through the batch (`grader batch`:
workers sandboxed), and where the two disagree on a check the kit's score is written to the
gradebook through nbgrader's API (`Grade.manual_score`; `auto_score` keeps what the kernel
claimed).  regrade.md / regrade.json in the course folder say which disagreed and why; the
autograded notebooks are rewritten to show the grade that counts (nbfeedback.py).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from grader import paths
from grader.authoring.course import ASSIGNMENT, COURSE, COURSE_ID, NOTEBOOK, db_url
from grader.batch.entries import assign_ids
from grader.batch.records import read_record
from grader.instructor.nbfeedback import rebuilt_story, rewrite_autograded
from grader.render.report import points
from grader.tools.notebook import KIT_LINE
from grader.authoring.notebook_build import build, cell_grade_id, cell_text, grade_id_of

EPSILON = 1e-6


def submissions(course):
    folder = os.path.join(course, "submitted")
    if not os.path.isdir(folder):
        return {}
    found = {}
    for student in sorted(os.listdir(folder)):
        path = os.path.join(folder, student, ASSIGNMENT, NOTEBOOK + ".ipynb")
        if os.path.isfile(path):
            found[student] = path
    return found


def kit_cell_ids(source):
    """The source's locked code cells that call the kit (kit, check_*, test_*)."""
    return {cell_grade_id(c) for c in source["cells"] if c["cell_type"] == "code"
            and not c["metadata"]["nbgrader"]["solution"]
            and any(KIT_LINE.match(line) for line in cell_text(c).splitlines())}


def clean_submission(raw, source):
    """The student's code as a notebook the kit grades: the kit's cells dropped (by grade id, as
    nbgrader finds cells), the locked imports cell restored from the source, and any other line
    that calls the kit commented out.  Everything else the student wrote stays, in order."""
    kit_ids = kit_cell_ids(source)
    locked = [c for c in source["cells"] if c["cell_type"] == "code"
              and not c["metadata"]["nbgrader"]["solution"] and cell_grade_id(c) not in kit_ids]
    cells = [{"cell_type": "code", "metadata": {}, "source": cell_text(c)} for c in locked]
    locked_ids = {cell_grade_id(c) for c in locked}
    for cell in raw.get("cells", []) if isinstance(raw, dict) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        if cell_grade_id(cell) in kit_ids or cell_grade_id(cell) in locked_ids:
            continue
        text = "\n".join("# " + line if KIT_LINE.match(line) else line
                         for line in cell_text(cell).splitlines())
        cells.append({"cell_type": "code", "metadata": {}, "source": text})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def regrade_all(found, source, jobs=2):
    """{student: report data, or {"error": why}} for the notebooks `found`, cleaned into one
    class folder and graded by `python -m grader batch`."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="attn-regrade-") as folder:
        notebooks, out = os.path.join(folder, "notebooks"), os.path.join(folder, "graded")
        os.makedirs(notebooks)
        names = {}
        for student, path in found.items():
            try:
                with open(path, encoding="utf-8") as handle:
                    raw = json.load(handle)
            except (OSError, ValueError) as exc:
                results[student] = {"error": f"not a readable notebook ({type(exc).__name__})"}
                continue
            names[student] = student + ".ipynb"
            with open(os.path.join(notebooks, names[student]), "w", encoding="utf-8") as handle:
                json.dump(clean_submission(raw, source), handle, ensure_ascii=False)
        if names:
            code = _batch(notebooks, out, jobs, os.path.join(folder, "batch.stderr"))
            ids = assign_ids(list(names.values()))
            for student, name in names.items():
                results[student] = _report_of(read_record(out, ids[name]), code)
    return {student: results[student] for student in found}


def _batch(notebooks, out, jobs, log):
    """`python -m grader batch NOTEBOOKS --out OUT`: its exit code; what it said is shown only
    where it did not grade every notebook (its class outputs are of no use here)."""
    with open(log, "w+", encoding="utf-8", errors="replace") as said:
        code = subprocess.run(
            [sys.executable, "-m", "grader", "batch", notebooks, "--out", out,
             "--jobs", str(max(1, jobs))], cwd=paths.KIT_ROOT, stdin=subprocess.DEVNULL,
            stdout=said, stderr=said).returncode
        if code != 0:
            said.seek(0)
            sys.stderr.write(f"the regrade's batch exited {code}:\n" + said.read()[-3000:])
    return code


def _report_of(record, code):
    """A batch record's report data, or {"error": why} where it holds none."""
    if record is None:
        return {"error": f"the batch did not grade it (exit {code})"}
    if record["status"] != "graded":
        return {"error": record["error"]}
    return record["report"]


def sandbox_scores(data, rubric):
    """{check id: (score, result or None)}; a regrade that could not run scores 0 everywhere."""
    if "error" in data:
        return {c.id: (0.0, None) for c in rubric.checks}
    by_id = {r["id"]: r for r in data["checks"]}
    return {c.id: (float(by_id[c.id]["score"]) if c.id in by_id else 0.0, by_id.get(c.id))
            for c in rubric.checks}


def _first_feedback_line(rubric, result, lang):
    from grader.render import report

    if result is None:
        return ""
    for line in report.feedback(rubric, result, lang).splitlines():
        if line.strip() and not line.startswith(("检查内容", "Checked:")):
            return line.strip()[:200]
    return ""


def _kernel_story(log_section):
    for marker, story in (("DeadKernelError", "the kernel died (DeadKernelError: os._exit, a crash "
                           "or out of memory)"),
                          ("CellTimeoutError", "a cell timed out and the kernel did not recover"),
                          ("Traceback", "nbgrader failed on this notebook")):
        if marker in log_section:
            return story
    return "nbgrader produced no grades for this notebook"


def log_sections(log_text):
    """nbgrader's log cut per student (it logs `Sanitizing .../submitted/<student>/...`)."""
    sections, current = {}, None
    for line in log_text.splitlines():
        match = re.search(r"submitted/([^/]+)/", line)
        if match and ("Sanitizing" in line or "error processing" in line):
            current = match.group(1)
        if current:
            sections.setdefault(current, []).append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def _submission_notebook(gb, student, missing):
    """The student's notebook in nbgrader's gradebook, its student and submission made if absent
    (nbgrader adds none for a notebook it failed on)."""
    try:
        return gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
    except missing:
        gb.update_or_create_student(student)
        try:
            gb.find_submission(ASSIGNMENT, student)
        except missing:
            gb.add_submission(ASSIGNMENT, student)
        return gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)


def fix_up(course, student, data, rubric, source, log_section="", lang="zh"):
    """Write the kit's grade where the kernel's differs; return this notebook's record."""
    from nbgrader.api import Gradebook, MissingEntry

    import warnings

    warnings.filterwarnings("ignore", message=".*not in session.*")  # nbgrader's add_submission
    scores = sandbox_scores(data, rubric)
    record = {"student": student, "nbgrader": "graded", "disagreements": [],
              "max_score": sum(c.points for c in rubric.checks)}
    if "error" in data:
        record["regrade_error"] = data["error"]
    autograded = os.path.join(course, "autograded", student, ASSIGNMENT, NOTEBOOK + ".ipynb")
    if not os.path.exists(autograded):  # nbgrader removes what it failed on
        record["nbgrader"] = _kernel_story(log_section)
    else:  # or the kit rebuilt it after an earlier autograde had failed on it
        record["nbgrader"] = rebuilt_story(autograded) or "graded"
    with Gradebook(db_url(course), COURSE_ID) as gb:
        submitted = _submission_notebook(gb, student, MissingEntry)
        grades = {g.name: g for g in submitted.grades}
        kernel_total = 0.0
        for check in rubric.checks:
            grade = grades.get(grade_id_of(check.id))
            if grade is None:
                continue
            kernel = grade.auto_score if record["nbgrader"] == "graded" else None
            score, result = scores[check.id]
            kernel_total += kernel or 0.0
            if kernel is None or abs(kernel - score) > EPSILON:
                grade.manual_score = score
                record["disagreements"].append({
                    "check": check.id, "kernel": kernel, "sandbox": score,
                    "why": _why(check, kernel, score, result, record, rubric, lang)})
            else:
                grade.manual_score = None
            grade.needs_manual_grade = False
        gb.db.commit()
        record["kernel_score"] = round(kernel_total, 4) if record["nbgrader"] == "graded" else None
        record["sandbox_score"] = round(sum(s for s, _ in scores.values()), 4)
        record["final_score"] = round(gb.find_submission_notebook(
            NOTEBOOK, ASSIGNMENT, student).score, 4)
    rewrite_autograded(course, student, scores, rubric, source, record, lang)
    return record


def _why(check, kernel, score, result, record, rubric, lang):
    """Why the two grades differ, without the numbers (the report groups checks by it)."""
    detail = _first_feedback_line(rubric, result, lang)
    status = result["status"] if result else "error"
    if "regrade_error" in record:
        return f"the sandboxed regrade could not run: {record['regrade_error']}"
    if kernel is None:
        sandbox = "passed" if result and result["status"] == "passed" else status
        return f"no grade from nbgrader: {record['nbgrader']}; in the sandbox: {sandbox}" + \
            (f" ({detail})" if detail and sandbox != "passed" else "")
    if kernel > score:
        return f"passed in the kernel but {status} in the sandbox" + (f": {detail}" if detail else "")
    return "failed in the kernel (the cell errored or timed out) but passed in the sandbox"


def regrade(course=COURSE, jobs=2, log_text="", lang="zh"):
    """Regrade every submission and fix up gradebook + notebooks; `log_text`: nbgrader's log."""
    from grader import rubric as rubric_module

    the_rubric = rubric_module.load()
    source = build()
    found = submissions(course)
    results = regrade_all(found, source, jobs)
    log = os.path.join(course, "autograde.log")
    if not log_text and os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as handle:
            log_text = handle.read()
    sections = log_sections(log_text)
    return [fix_up(course, student, results[student], the_rubric, source,
                   sections.get(student, ""), lang) for student in found]


def write_report(course, records, timings):
    with open(os.path.join(course, "regrade.json"), "w", encoding="utf-8") as handle:
        json.dump({"timings": timings, "notebooks": records}, handle, ensure_ascii=False, indent=2)
    lines = ["# 沙箱复评 · sandboxed regrade", "",
             "| student | nbgrader (kernel) | sandbox | final | max | disagreements |",
             "|---|---|---|---|---|---|"]
    for r in records:
        kernel = "—" if r["kernel_score"] is None else points(r['kernel_score'])
        lines.append(f"| {r['student']} | {kernel} | {points(r['sandbox_score'])} | {points(r['final_score'])} | "
                     f"{points(r['max_score'])} | {len(r['disagreements'])} |")
    disagreed = [r for r in records if r["disagreements"]]
    lines += ["", f"## {len(disagreed)} notebooks disagreed", ""]
    for r in disagreed:
        lines.append(f"### {r['student']}" + ("" if r["nbgrader"] == "graded" else f" — {r['nbgrader']}"))
        groups = {}
        for d in r["disagreements"]:
            groups.setdefault(d["why"], []).append(d["check"])
        for why, checks in groups.items():
            named = ", ".join(f"`{c}`" for c in checks) if len(checks) < 6 else \
                f"{len(checks)} checks (`{checks[0]}` … `{checks[-1]}`)"
            lines.append(f"- {named}: {why}")
        lines.append("")
    lines += ["## timings (s)", ""] + [f"- {k}: {v}" for k, v in timings.items()] + [""]
    with open(os.path.join(course, "regrade.md"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
