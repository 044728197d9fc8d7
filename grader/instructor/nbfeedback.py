"""The autograded notebooks as `nbgrader generate_feedback` renders them, and a scan of the
feedback for hidden test source.

After the sandboxed regrade (nbregrade.py) the cells of the checks where the kernel and the sandbox
disagree get the kit's feedback as their output, and a note cell on top lists them; the other
graded cells keep theirs, an error reduced to its name and message.  A notebook whose kernel died
(nbgrader removes what it failed on) gets its autograded notebook rebuilt from the submission.
`hidden_leaks` scans course/feedback/ for nbgrader's hidden-test markers or a hidden check's call.
"""
import copy
import json
import os
import re

from grader.authoring.course import ASSIGNMENT, COURSE, NOTEBOOK
from grader.authoring.notebook_build import (HIDDEN_BEGIN, HIDDEN_END, cell_grade_id, cell_text,
                                             dumps, grade_id_of)
from grader.render.report import card, points


def _stream(name, text):
    return {"output_type": "stream", "name": name, "text": text}


def sandbox_outputs(check, result, rubric, lang, note):
    """A regraded cell's outputs: the kit's card (or why there is none), and a ✗ line on
    stderr where it scored nothing."""
    if result is None:
        text = f"✗ {check.id}: 评分器没能运行这项检查 · the grader could not run this check"
    else:
        text = card(rubric, result, lang)
    outputs = [_stream("stdout", text + note + "\n")]
    if result is None or result["score"] <= 0:
        outputs.append(_stream("stderr", f"✗ {check.id}: 0/{points(check.points)}\n"))
    return outputs


def _short_errors(outputs):
    """An error output keeps its name and message, never a traceback through the cell."""
    cleaned = []
    for out in outputs:
        if out.get("output_type") == "error":
            out = dict(out, traceback=[f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"[:300]])
        cleaned.append(out)
    return cleaned


def rewrite_autograded(course, student, scores, rubric, source, record, lang):
    """The kit's feedback in the cells of the checks the regrade changed (`scores`:
    nbregrade.sandbox_scores), short errors in the others, a note cell on top when any changed."""
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
    changed = {d["check"]: d for d in record["disagreements"]}
    by_grade_id = {grade_id_of(c.id): c for c in rubric.checks}
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        check = by_grade_id.get(cell_grade_id(cell))
        if check is not None and check.id in changed:
            kernel = changed[check.id]["kernel"]
            note = ("\n（沙箱复评 · regraded in the sandbox"
                    + (f"；kernel 中这一格得了 {points(kernel)} 分 · the kernel's cell gave {points(kernel)}"
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
        kernel = "—" if d["kernel"] is None else points(d['kernel'])
        groups.setdefault((kernel, points(d['sandbox'])), []).append(f"`{d['check']}`")
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
    by_id = {cell_grade_id(c): c for c in source["cells"] if cell_grade_id(c)}
    cells = []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict):
            continue
        cell = copy.deepcopy(cell)
        original = by_id.get(cell_grade_id(cell))
        if original is not None and original["metadata"]["nbgrader"]["locked"]:
            cell["source"] = cell_text(original)
            cell["metadata"] = dict(cell.get("metadata", {}), nbgrader=original["metadata"]["nbgrader"])
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    nb["cells"] = cells
    return nb


def rebuilt_story(path):
    """What nbgrader did with a notebook whose autograded copy the kit rebuilt (None otherwise)."""
    try:
        with open(path, encoding="utf-8") as handle:
            meta = json.load(handle).get("metadata", {})
    except (OSError, ValueError):
        return None
    return (meta.get("kit_regrade") or {}).get("nbgrader")


def hidden_leaks(course=COURSE):
    """Feedback files that show a hidden test: its markers or a hidden check's call."""
    from grader import rubric as rubric_module

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
