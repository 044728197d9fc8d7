"""Turn a submission (.py, .ipynb, or a folder holding one) into a clean work folder.

The work folder holds one file, attention.py, and nothing else of the student's: no conftest.py,
no pytest.ini, no other modules.  The original is only ever read.
"""
import json
import os
import re
import shutil
import tempfile

STUDENT_FILE = "attention.py"
MAX_BYTES = 2 * 1024 * 1024
MAGIC_LINE = re.compile(r"^\s*[%!]")


class SubmissionError(Exception):
    """The submission cannot be graded at all (missing, unreadable, no attention code)."""


class Submission:
    def __init__(self, origin, source, kind):
        self.origin, self.source, self.kind = origin, source, kind
        self.work_dir = tempfile.mkdtemp(prefix="attn-work-")
        os.chmod(self.work_dir, 0o777)  # the sandboxed worker runs as another uid
        path = os.path.join(self.work_dir, STUDENT_FILE)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        os.chmod(path, 0o644)

    def cleanup(self):
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def notebook_source(raw):
    """The code cells of a notebook, in order, with IPython magics and shell lines dropped."""
    try:
        notebook = json.loads(raw)
        cells = notebook["cells"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SubmissionError(f"not a readable notebook ({type(exc).__name__})") from None
    chunks = []
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        lines = [("# " + line if MAGIC_LINE.match(line) else line) for line in source.splitlines()]
        chunks.append("\n".join(lines))
    return "\n\n".join(chunks) + "\n"


def _read(path):
    if os.path.getsize(path) > MAX_BYTES:
        raise SubmissionError(f"{path}: larger than {MAX_BYTES // 1024} KiB")
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SubmissionError(f"{path}: not UTF-8 text") from None


def _pick_in_folder(folder):
    for name in ("attention.py", "attention.ipynb"):
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            if name in files:
                return os.path.join(root, name)
    candidates = [f for f in sorted(os.listdir(folder)) if f.endswith((".py", ".ipynb"))]
    if len(candidates) == 1:
        return os.path.join(folder, candidates[0])
    raise SubmissionError(f"{folder}: no attention.py or attention.ipynb inside")


def load(path):
    """A Submission for `path`, or SubmissionError with a one-line reason."""
    if not os.path.exists(path):
        raise SubmissionError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        return load_file(_pick_in_folder(path), origin=path)
    return load_file(path, origin=path)


def load_file(path, origin):
    if not os.access(path, os.R_OK):
        raise SubmissionError(f"{path}: not readable")
    text = _read(path)
    if path.endswith(".ipynb"):
        return Submission(origin, notebook_source(text), "notebook")
    if not path.endswith(".py"):
        raise SubmissionError(f"{path}: expected a .py or .ipynb file")
    return Submission(origin, text, "python")
