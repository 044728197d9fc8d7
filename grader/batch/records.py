"""A batch's per-student files: OUTDIR/students/<id>/report.json, feedback.html, feedback.md.

report.json is the record: the report data, the entry's content hash, the grader fingerprint and
the attention maps.  Each file is written atomically, report.json last: one that exists is
complete, so a batch killed at any moment and run again regrades only what is missing or changed
(is_current), after removing the temporary files the kill left behind.
"""
import contextlib
import json
import os

from grader.inert import json_text
from grader.statefile import write_atomic

STUDENTS = "students"
MANIFEST = "batch.json"
REPORT, PAGE, MARKDOWN = "report.json", "feedback.html", "feedback.md"
FORMAT = 1


def read_json(path):
    """The JSON object at `path`, or None where it is missing, garbled or no object."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_record(outdir, student):
    record = read_json(os.path.join(outdir, STUDENTS, student, REPORT))
    if record is None or record.get("format") != FORMAT:
        return None
    if record.get("report") is not None:  # a record whose report is no report is regraded
        from grader.render.model import Report

        try:
            Report.from_data(record["report"])
        except ValueError:
            return None
    return record


def read_manifest(outdir):
    """OUTDIR's batch.json, or None where it is missing or no batch manifest."""
    manifest = read_json(os.path.join(outdir, MANIFEST))
    return manifest if manifest is not None and "entries" in manifest else None


def write_manifest(outdir, manifest):
    write_atomic(os.path.join(outdir, MANIFEST),
                 json_text(manifest, ensure_ascii=False, indent=1) + "\n")


def records_in(outdir, missing=None):
    """(OUTDIR's batch manifest, its students' records in its order); a record absent or of other
    content than the manifest says is `missing(item)` where given, else left out."""
    manifest = read_manifest(outdir)
    records = []
    for item in manifest["entries"]:
        record = read_record(outdir, item["student"])
        if record is None or record.get("digest") != item["digest"]:
            record = missing(item) if missing else None
        if record is not None:
            records.append(record)
    return manifest, records


def is_current(record, entry, fingerprint):
    return (record is not None and record.get("digest") == entry.digest
            and record.get("grader") == fingerprint and record.get("student") == entry.student
            and record.get("status") in ("graded", "ungradable"))


def remove_leftovers(outdir):
    """Temporary files of writes a kill interrupted."""
    for root, _, files in os.walk(outdir):
        for name in files:
            if name.startswith(".tmp-"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(root, name))


def write_student(outdir, record, lang):
    """The student's page, Markdown and report.json, each atomically; report.json last."""
    from grader import inert, rubric
    from grader.render import feedback_html
    from grader.render.student_markdown import student_markdown

    the_rubric = rubric.load()
    folder = os.path.join(outdir, STUDENTS, record["student"])
    os.makedirs(folder, exist_ok=True)
    write_atomic(os.path.join(folder, PAGE), feedback_html.student_page(the_rubric, record, lang))
    write_atomic(os.path.join(folder, MARKDOWN), student_markdown(the_rubric, record, lang))
    write_atomic(os.path.join(folder, REPORT),  # json_text: lone surrogates survive as \\uXXXX
                 inert.json_text(record, lines=3, ensure_ascii=False, indent=1,
                                 allow_nan=False) + "\n")
