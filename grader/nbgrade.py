"""nbgrader for this exercise, with a grade it cannot be tricked into.

  python -m grader.nbgrade assignment      nbgrader generate_assignment in course/ (the gradebook)
  python -m grader.nbgrade release OUT     the student notebook, from a throw-away copy of the course
  python -m grader.nbgrade autograde       nbgrader autograde, then the sandboxed regrade + fix-up
  python -m grader.nbgrade regrade         only the regrade + fix-up (after an autograde)
  python -m grader.nbgrade feedback        nbgrader generate_feedback, then a scan for leaks
  python -m grader.nbgrade export          nbgrader export --to grades.csv
  (options: --course DIR, --timeout SECONDS per cell, --jobs N regrades at once)

Why a regrade.  In nbgrader the student's code and the tests share one kernel: a notebook can
replace the test helpers, monkeypatch torch, blank later cells with an input transformer, or kill
the kernel (`os._exit`), and nbgrader believes what the kernel printed.  So after `nbgrader
autograde`, every submitted notebook is graded again by the kit (grader.grading on the .ipynb, the
worker sandboxed, the judge in its own process), and where the two disagree on a check the kit's
score is written to the gradebook through nbgrader's API (`Grade.manual_score`; `auto_score` keeps
what the kernel claimed).  `regrade.md` / `regrade.json` in the course folder list the notebooks
that disagreed and why.  The autograded notebook's cells for those checks get the kit's feedback
as their output, so `generate_feedback` shows the grade that counts; a notebook whose kernel died
gets its submission and autograded notebook created from the regrade.
"""
import argparse
import concurrent.futures
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from .notebook import KIT_ROOT

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
COURSE = os.path.join(KIT_ROOT, "course")
COURSE_ID = "lesson12-attention"
ASSIGNMENT = "attention"
NOTEBOOK = "attention"  # attention.ipynb
EPSILON = 1e-6
# What a regrade may take at most (the grader's own budget is 120 s of calls per submission).
REGRADE_TIMEOUT = 300


def __getattr__(name):
    """`grader.nbgrade.KitClearSolutions`, built on first use (importing nbgrader is slow)."""
    if name == "KitClearSolutions":
        cls = _kit_clear_solutions()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def _kit_clear_solutions():
    from nbgrader.preprocessors import ClearSolutions

    from .authoring import BEGIN, make_stub

    class KitClearSolutions(ClearSolutions):
        """nbgrader's ClearSolutions, but a code cell's solution regions become the kit's stubs."""

        def _replace_solution_region(self, cell, language):
            if cell.cell_type != "code" or BEGIN not in cell.source:
                return super()._replace_solution_region(cell, language)
            cell.source = make_stub(cell.source).rstrip("\n")
            return True

    return KitClearSolutions


# ------------------------------------------------------------------------------------------------
# Running nbgrader


def nbgrader(args, course, env=None, log=None):
    """Run `nbgrader ARGS` in the course folder with this environment's interpreter."""
    environment = dict(os.environ)
    environment["ATTN_KIT_ROOT"] = KIT_ROOT  # the course config finds the kit from any folder
    environment.update(env or {})
    # nbgrader runs `alembic` (beside this interpreter) when it creates a gradebook.
    bin_dir = os.path.dirname(sys.executable)
    environment["PATH"] = os.pathsep.join(p for p in (bin_dir, environment.get("PATH")) if p)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course,
                            env=environment, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = result.stdout.decode("utf-8", "replace")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"$ nbgrader {' '.join(args)}\n{output}\n")
    return result.returncode, output, time.monotonic() - started


def release_notebook(out_path):
    """The student notebook: nbgrader generate_assignment in a throw-away copy of the course."""
    from . import notebook

    with tempfile.TemporaryDirectory(prefix="attn-course-") as course:
        shutil.copyfile(os.path.join(COURSE, "nbgrader_config.py"),
                        os.path.join(course, "nbgrader_config.py"))
        source = os.path.join(course, "source", ASSIGNMENT, NOTEBOOK + ".ipynb")
        os.makedirs(os.path.dirname(source))
        with open(source, "w", encoding="utf-8") as handle:
            handle.write(notebook.dumps(notebook.build()))
        code, output, _ = nbgrader(["generate_assignment", ASSIGNMENT, "--force"], course)
        built = os.path.join(course, "release", ASSIGNMENT, NOTEBOOK + ".ipynb")
        if code != 0 or not os.path.exists(built):
            raise RuntimeError(f"nbgrader generate_assignment failed:\n{output[-3000:]}")
        with open(built, encoding="utf-8") as handle:
            data = json.load(handle)
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(notebook.dumps(data))
    return out_path


def generate_assignment(course=COURSE):
    code, output, seconds = nbgrader(["generate_assignment", ASSIGNMENT, "--force"], course)
    if code != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{output[-3000:]}")
    return seconds


def assignment_known(course=COURSE):
    """Does the course's gradebook hold the assignment (generate_assignment has run)?"""
    if not os.path.exists(os.path.join(course, "gradebook.db")):
        return False
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url(course), COURSE_ID) as gb:
        try:
            gb.find_assignment(ASSIGNMENT)
        except MissingEntry:
            return False
    return True


def db_url(course):
    return "sqlite:///" + os.path.join(os.path.abspath(course), "gradebook.db")


# ------------------------------------------------------------------------------------------------
# The regrade: every submitted notebook through the kit's grader, outside any kernel


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


def source_notebook():
    from . import notebook

    return notebook.build()


def _text(cell):
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def _grade_id(cell):
    meta = cell.get("metadata") or {}
    nbgrader_meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbgrader_meta.get("grade_id") if isinstance(nbgrader_meta, dict) else None


def kit_cell_ids(source):
    """The source's locked code cells that call the kit (kit, check_*, test_*)."""
    from .notebook import KIT_LINE

    return {_grade_id(c) for c in source["cells"] if c["cell_type"] == "code"
            and not c["metadata"]["nbgrader"]["solution"]
            and any(KIT_LINE.match(line) for line in _text(c).splitlines())}


def clean_submission(raw, source):
    """The student's code as a notebook the kit grades: the kit's cells dropped (by grade id, as
    nbgrader finds cells), the locked imports cell restored from the source, and any other line
    that calls the kit commented out.  Everything else the student wrote stays, in order."""
    from .notebook import KIT_LINE

    kit_ids = kit_cell_ids(source)
    locked = [c for c in source["cells"] if c["cell_type"] == "code"
              and not c["metadata"]["nbgrader"]["solution"] and _grade_id(c) not in kit_ids]
    cells = [{"cell_type": "code", "metadata": {}, "source": _text(c)} for c in locked]
    locked_ids = {_grade_id(c) for c in locked}
    for cell in raw.get("cells", []) if isinstance(raw, dict) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        if _grade_id(cell) in kit_ids or _grade_id(cell) in locked_ids:
            continue
        text = "\n".join("# " + line if KIT_LINE.match(line) else line
                         for line in _text(cell).splitlines())
        cells.append({"cell_type": "code", "metadata": {}, "source": text})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def regrade_one(path, source, nice=0):
    """The kit's report data for one submitted notebook (its own judge process)."""
    from . import notebook

    folder = tempfile.mkdtemp(prefix="attn-regrade-")
    try:
        try:
            with open(path, encoding="utf-8") as handle:
                raw = json.load(handle)
        except (OSError, ValueError) as exc:
            return {"error": f"not a readable notebook ({type(exc).__name__})"}
        cleaned = os.path.join(folder, NOTEBOOK + ".ipynb")
        with open(cleaned, "w", encoding="utf-8") as handle:
            json.dump(clean_submission(raw, source), handle, ensure_ascii=False)
        try:
            return notebook.run_judge(cleaned, hidden=True, timeout=REGRADE_TIMEOUT, cwd=folder,
                                      nice=nice)
        except subprocess.TimeoutExpired:
            return {"error": f"the regrade took longer than {REGRADE_TIMEOUT} s"}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def regrade_all(found, source, jobs=2, nice=0):
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {student: pool.submit(regrade_one, path, source, nice)
                   for student, path in found.items()}
        return {student: future.result() for student, future in futures.items()}


# ------------------------------------------------------------------------------------------------
# Comparing and fixing up the gradebook


def sandbox_scores(data, rubric):
    """{check id: (score, result or None)}; a regrade that could not run scores 0 everywhere."""
    if "error" in data:
        return {c.id: (0.0, None) for c in rubric.checks}
    by_id = {r["id"]: r for r in data["checks"]}
    return {c.id: (float(by_id[c.id]["score"]) if c.id in by_id else 0.0, by_id.get(c.id))
            for c in rubric.checks}


def _first_feedback_line(rubric, result, lang):
    from . import report

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


def fix_up(course, student, data, rubric, source, log_section="", lang="zh"):
    """Write the kit's grade where the kernel's differs; return this notebook's record."""
    from nbgrader.api import Gradebook, MissingEntry

    from .notebook import grade_id_of

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
        record["nbgrader"] = _rebuilt_story(autograded) or "graded"
    with Gradebook(db_url(course), COURSE_ID) as gb:
        try:
            submitted = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
        except MissingEntry:
            gb.update_or_create_student(student)
            try:
                gb.find_submission(ASSIGNMENT, student)
            except MissingEntry:
                gb.add_submission(ASSIGNMENT, student)
            submitted = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
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
    rewrite_autograded(course, student, data, rubric, source, record, lang)
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


def _rebuilt_story(path):
    try:
        with open(path, encoding="utf-8") as handle:
            meta = json.load(handle).get("metadata", {})
    except (OSError, ValueError):
        return None
    return (meta.get("kit_regrade") or {}).get("nbgrader")


# ------------------------------------------------------------------------------------------------
# The autograded notebook: what generate_feedback renders


def _stream(name, text):
    return {"output_type": "stream", "name": name, "text": text}


def sandbox_outputs(check, result, rubric, lang, note=""):
    from . import report
    from .notebook import render_check

    if result is None:
        text = f"✗ {check.id}: 评分器没能运行这项检查 · the grader could not run this check"
        return [_stream("stdout", text + note + "\n"),
                _stream("stderr", f"✗ {check.id}: 0/{report._num(check.points)}\n")]
    outputs = [_stream("stdout", render_check(rubric, result, lang) + note + "\n")]
    if result["score"] <= 0:
        outputs.append(_stream("stderr", f"✗ {check.id}: 0/{report._num(check.points)}\n"))
    return outputs


def _short_errors(outputs):
    """An error output keeps its name and message, never a traceback through the cell."""
    cleaned = []
    for out in outputs:
        if out.get("output_type") == "error":
            out = dict(out, traceback=[f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"[:300]])
        cleaned.append(out)
    return cleaned


def rewrite_autograded(course, student, data, rubric, source, record, lang):
    from .notebook import dumps, grade_id_of

    path = os.path.join(course, "autograded", student, ASSIGNMENT, NOTEBOOK + ".ipynb")
    created = not os.path.exists(path)
    if created:
        nb = _rebuild_autograded(os.path.join(course, "submitted", student, ASSIGNMENT,
                                              NOTEBOOK + ".ipynb"), source)
        if nb is None:
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        nb.setdefault("metadata", {})["kit_regrade"] = {"nbgrader": record["nbgrader"]}
    else:
        with open(path, encoding="utf-8") as handle:
            nb = json.load(handle)
    scores = sandbox_scores(data, rubric)
    changed = {d["check"]: d for d in record["disagreements"]}
    by_grade_id = {grade_id_of(c.id): c for c in rubric.checks}
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        check = by_grade_id.get(_grade_id(cell))
        if check is not None and check.id in changed:
            kernel = changed[check.id]["kernel"]
            note = ("\n（沙箱复评 · regraded in the sandbox"
                    + (f"；kernel 中这一格得了 {kernel:g} 分 · the kernel's cell gave {kernel:g}"
                       if kernel is not None else "") + "）")
            cell["outputs"] = sandbox_outputs(check, scores[check.id][1], rubric, lang, note)
        elif check is not None:
            cell["outputs"] = _short_errors(cell.get("outputs", []))
    nb["cells"] = [c for c in nb["cells"] if c.get("id") != "kit-regrade-note"]
    if record["disagreements"]:
        nb["cells"].insert(0, _note_cell(record))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(dumps(nb))


def _note_cell(record):
    lines = ["**评分说明 · grading note.** 这份笔记本由练习包在沙箱中重新评分；下面这些检查以沙箱的结果为准。",
             "This notebook was regraded by the kit in its sandbox; for these checks the sandbox's "
             "result is the grade.", ""]
    if record["nbgrader"] != "graded":
        lines += [f"- nbgrader: {record['nbgrader']}", ""]
    groups = {}
    for d in record["disagreements"]:
        kernel = "—" if d["kernel"] is None else f"{d['kernel']:g}"
        groups.setdefault((kernel, f"{d['sandbox']:g}"), []).append(f"`{d['check']}`")
    for (kernel, sandbox), checks in groups.items():
        named = ", ".join(checks) if len(checks) <= 4 else \
            ", ".join(checks[:3]) + f" … ({len(checks)} checks)"
        lines.append(f"- {named}: kernel {kernel} → sandbox {sandbox}")
    return {"cell_type": "markdown", "id": "kit-regrade-note", "metadata": {},
            "source": "\n".join(lines)}


def _rebuild_autograded(submitted_path, source):
    """nbgrader left nothing (the kernel died): the submitted notebook, outputs cleared, its
    locked cells overwritten from the source (as nbgrader's OverwriteCells does)."""
    try:
        with open(submitted_path, encoding="utf-8") as handle:
            nb = json.load(handle)
    except (OSError, ValueError):
        return None
    by_id = {_grade_id(c): c for c in source["cells"] if _grade_id(c)}
    cells = []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict):
            continue
        cell = copy.deepcopy(cell)
        original = by_id.get(_grade_id(cell))
        if original is not None and original["metadata"]["nbgrader"]["locked"]:
            cell["source"] = _text(original)
            cell["metadata"] = dict(cell.get("metadata", {}), nbgrader=original["metadata"]["nbgrader"])
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    nb["cells"] = cells
    return nb


# ------------------------------------------------------------------------------------------------
# The commands


def write_report(course, records, timings):
    with open(os.path.join(course, "regrade.json"), "w", encoding="utf-8") as handle:
        json.dump({"timings": timings, "notebooks": records}, handle, ensure_ascii=False, indent=2)
    lines = ["# 沙箱复评 · sandboxed regrade", "",
             "| student | nbgrader (kernel) | sandbox | final | max | disagreements |",
             "|---|---|---|---|---|---|"]
    for r in records:
        kernel = "—" if r["kernel_score"] is None else f"{r['kernel_score']:g}"
        lines.append(f"| {r['student']} | {kernel} | {r['sandbox_score']:g} | {r['final_score']:g} | "
                     f"{r['max_score']:g} | {len(r['disagreements'])} |")
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


def regrade(course=COURSE, jobs=2, log_text="", results=None, lang="zh"):
    """Regrade every submission (unless `results` are given) and fix up gradebook + notebooks."""
    from . import rubric as rubric_module

    the_rubric = rubric_module.load()
    source = source_notebook()
    found = submissions(course)
    if results is None:
        results = regrade_all(found, source, jobs)
    log = os.path.join(course, "autograde.log")
    if not log_text and os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as handle:
            log_text = handle.read()
    sections = log_sections(log_text)
    return [fix_up(course, student, results[student], the_rubric, source,
                   sections.get(student, ""), lang) for student in found]


def autograde(course=COURSE, timeout=None, jobs=1, lang="zh"):
    """nbgrader autograde (all submissions, --force) and, at the same time, the kit's regrade;
    then the fix-up.  Returns (records, timings)."""
    started = time.monotonic()
    if not assignment_known(course):
        generate_assignment(course)
    found = submissions(course)
    args = ["autograde", ASSIGNMENT, "--force"]
    if timeout:
        args.append(f"--Execute.timeout={int(timeout)}")  # nbgrader's Execute, as in the config
    log = os.path.join(course, "autograde.log")
    if os.path.exists(log):
        os.remove(log)
    source = source_notebook()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        # nbgrader executes the notebooks one after the other on about one core; the regrade
        # uses what is left meanwhile, at a lower priority: the kernels' own judges (which
        # have a cell timeout to meet) go first.
        plain = pool.submit(nbgrader, args, course, None, log)
        regrade_started = time.monotonic()
        results = regrade_all(found, source, jobs, nice=10)
        regrade_seconds = time.monotonic() - regrade_started
        code, output, nbgrader_seconds = plain.result()
    fix_started = time.monotonic()
    records = regrade(course, jobs, output, results, lang)
    timings = {"notebooks": len(found), "nbgrader_autograde": round(nbgrader_seconds, 1),
               "nbgrader_exit_code": code, "regrade_alongside": round(regrade_seconds, 1),
               "fix_up": round(time.monotonic() - fix_started, 1),
               "make_autograde_total": round(time.monotonic() - started, 1)}
    write_report(course, records, timings)
    return records, timings


def hidden_leaks(course=COURSE):
    """Feedback files that show a hidden test: its markers or a hidden check's call."""
    from . import rubric as rubric_module

    needles = [re.escape(n) for n in (HIDDEN_BEGIN, HIDDEN_END, "BEGIN HIDDEN", "END HIDDEN")]
    for check in rubric_module.load().select(("hidden",)):  # a hidden check's call, in any form
        needles.append(r"%autograde\s+" + re.escape(check.id) + r"\b")
        needles.append(r"autograde_cell\((&quot;|&#34;|\"|')" + re.escape(check.id))
    leaks = []
    folder = os.path.join(course, "feedback")
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".html"):
                continue
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            found = [n for n in needles if re.search(n, text)]
            if found:
                leaks.append((os.path.relpath(os.path.join(root, name), course), found))
    return leaks


def feedback(course=COURSE):
    code, output, seconds = nbgrader(["generate_feedback", ASSIGNMENT, "--force"], course)
    if code != 0:
        raise RuntimeError(f"nbgrader generate_feedback failed:\n{output[-3000:]}")
    return seconds, hidden_leaks(course)


def export(course=COURSE, out="grades.csv"):
    """nbgrader export: the gradebook as CSV (scores include the kit's corrections)."""
    code, output, seconds = nbgrader(["export", "--to", out], course)
    if code != 0:
        raise RuntimeError(f"nbgrader export failed:\n{output[-3000:]}")
    return os.path.join(course, out), seconds


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m grader.nbgrade")
    parser.add_argument("command", choices=("assignment", "release", "autograde", "regrade",
                                            "feedback", "export"))
    parser.add_argument("out", nargs="?", help="release: where to write the student notebook")
    parser.add_argument("--course", default=COURSE)
    parser.add_argument("--timeout", type=int, help="seconds a notebook cell may run")
    parser.add_argument("--jobs", type=int, default=1, help="regrades at once (nbgrader takes a core)")
    parser.add_argument("--lang", choices=("zh", "en"), default="zh")
    args = parser.parse_args(argv)
    course = os.path.abspath(args.course)
    if args.command == "assignment":
        seconds = generate_assignment(course)
        print(f"nbgrader generate_assignment {ASSIGNMENT}: {seconds:.1f} s "
              f"-> {os.path.join(course, 'release', ASSIGNMENT)}")
    elif args.command == "release":
        print(release_notebook(args.out or os.path.join(KIT_ROOT, "release", NOTEBOOK + ".ipynb")))
    elif args.command in ("autograde", "regrade"):
        if args.command == "autograde":
            records, timings = autograde(course, args.timeout, args.jobs, args.lang)
        else:
            records, timings = regrade(course, max(args.jobs, 2), lang=args.lang), {}
            write_report(course, records, timings)
        for r in records:
            kernel = "—" if r["kernel_score"] is None else f"{r['kernel_score']:g}"
            flag = f"  {len(r['disagreements'])} disagreed" if r["disagreements"] else ""
            print(f"{r['student']:>16}  kernel {kernel:>5}  sandbox {r['sandbox_score']:>5g}  "
                  f"final {r['final_score']:>5g} / {r['max_score']:g}{flag}")
        for key, value in timings.items():
            print(f"{key}: {value}")
        if timings.get("nbgrader_exit_code"):
            print(f"nbgrader autograde exited {timings['nbgrader_exit_code']} (a notebook it could not "
                  f"grade, e.g. a kernel that died): {os.path.join(course, 'autograde.log')}")
        print(f"report: {os.path.join(course, 'regrade.md')}")
    elif args.command == "export":
        path, seconds = export(course)
        print(f"nbgrader export: {seconds:.1f} s -> {path}")
    elif args.command == "feedback":
        seconds, leaks = feedback(course)
        print(f"nbgrader generate_feedback {ASSIGNMENT}: {seconds:.1f} s -> "
              f"{os.path.join(course, 'feedback')}")
        if leaks:
            for path, found in leaks:
                print(f"HIDDEN TEST SOURCE IN {path}: {found}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
