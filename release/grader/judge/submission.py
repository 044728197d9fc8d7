"""Turn a submission (.py, .ipynb, a folder or a .zip holding one, or a cloned git repository)
into a clean work folder.

The work folder holds one file, attention.py, and nothing else of the student's: no conftest.py,
no pytest.ini, no other modules.  The original is only ever read.
"""
import hashlib
import io
import json
import os
import re
import stat
import tempfile
import time
import zipfile
import zlib

from grader import rubric, safefs
from grader.judge import cells, manifest

STUDENT_FILE = "attention.py"
MAX_BYTES = safefs.MAX_SOURCE_BYTES
# A zip is read in memory; these bound what one can cost.  Over a cap: ungradable, with the reason.
MAX_ZIP_BYTES = 64 * 1024 * 1024        # the zip file itself
MAX_ZIP_MEMBERS = 1000
MAX_ZIP_UNCOMPRESSED = 256 * 1024 * 1024  # the members' declared sizes, summed
ZIP_SECONDS = 10.0                      # inspecting (hashing) and reading it
MAGIC_LINE = re.compile(r"^\s*[%!]")


class SubmissionError(Exception):
    """The submission cannot be graded at all (missing, unreadable, no attention code).  str() is
    the English reason; `zh` the same in Chinese (a rarer technical reason stays quoted as code)."""

    def __init__(self, message, zh=None):
        super().__init__(message)
        self.zh = zh or f"这份提交无法评分：`{message}`"

    def said(self, lang):
        return self.zh if lang == "zh" else str(self)


def has_suffix(name, *suffixes):
    """Whether `name` ends with one of `suffixes`, whatever its case (ALICE.PY is a .py file)."""
    return name.lower().endswith(suffixes)


def seed_of(source):
    """The seed of the inputs the checks draw for this submission: derived from its text, so a
    regrade of the same file draws the same inputs and no fixed input exists to memorise."""
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big")


class Submission:
    container = "file"  # or folder, git, zip: where the attention file came from
    package = None      # a `make submit` zip: what its manifest says and what was verified

    def __init__(self, origin, source, kind, left_out=()):
        self.origin, self.source, self.kind = origin, source, kind
        self.left_out = left_out  # a notebook: its top-level statements that are not definitions
        self.seed = seed_of(source)
        self._work_dir, self._cleaned = None, False

    @property
    def work_dir(self):
        """The work folder, made on first use (a forked or spare worker never needs one).  The
        judge keeps `source` and never reads it; the worker, another uid, may read but not write."""
        if self._work_dir is None:
            if self._cleaned:
                raise RuntimeError("the submission is cleaned up: it has no work folder")
            folder = tempfile.mkdtemp(prefix="attn-work-")
            path = os.path.join(folder, STUDENT_FILE)
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as handle:
                handle.write(self.source)
            os.chmod(path, 0o444)
            os.chmod(folder, 0o555)
            self._work_dir = folder
        return self._work_dir

    def cleanup(self):
        self._cleaned = True
        if self._work_dir is not None:
            safefs.remove_tree(self._work_dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def comment_out_magics(source):
    """IPython magics and shell lines (`%...`, `!...`) become comments: plain Python is left."""
    return "\n".join("# " + line if MAGIC_LINE.match(line) else line
                     for line in source.splitlines())


def notebook_cells(raw):
    """The code cells of a notebook, in order, with IPython magics and shell lines commented out."""
    try:
        notebook = json.loads(raw)
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # 100k levels deep: Recursion
        raise SubmissionError(f"not a readable notebook ({type(exc).__name__})",
                              f"笔记本无法读取（{type(exc).__name__}）：它是 Jupyter 保存的 .ipynb 吗？") from None
    chunks = []
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(map(str, source)) if isinstance(source, list) else str(source)
        chunks.append(comment_out_magics(source))
    return chunks


def notebook_source(raw):
    """The code cells of a notebook as one text, a blank line between cells."""
    return "\n\n".join(notebook_cells(raw)) + "\n"


def keep_definitions(chunks):
    """(source, left_out): a notebook's cells with only what cells.py keeps at the top level, so
    a stray cell (a training loop, `while True:`) cannot stop the definitions from being graded.
    Every line stays where it was (left-out lines become comments), so an error names the
    notebook's own line; `left_out` lists each statement dropped as "line N: first line"."""
    chunks = [chunks] if isinstance(chunks, str) else list(chunks)
    out, left_out = [], []
    for number, chunk in enumerate(chunks):
        if number:
            out.append("")  # the blank line between two cells
        lines = chunk.splitlines()
        kept, dropped = _kept_lines(lines, cells.parse(chunk))
        for start, _ in dropped:
            left_out.append(f"line {len(out) + start}: {lines[start - 1].strip()[:80]}")
        out += kept
    return "\n".join(_closed(out)) + "\n", left_out


GUARD_OPEN, GUARD_CLOSE = "try: ", "except Exception: pass  # (kept as the kernel survived it)"


def _kept_lines(lines, body):
    """The cell's lines with left-out statements commented out and guarded assignments opened
    with `try:`; (lines, [(first, last) of each dropped statement])."""
    if body is None:  # a cell that does not parse: the kernel ran none of it either
        return ["# (left out) " + line for line in lines], ([(1, len(lines))] if lines else [])
    kept, dropped = list(lines), []
    for node in body:
        start, end = cells.first_line(node), node.end_lineno
        if cells.classify(node) not in cells.KEPT:
            dropped.append((start, end))
            for n in range(start, end + 1):
                kept[n - 1] = "# (left out) " + lines[n - 1]
        elif cells.guarded(node):
            kept[start - 1] = GUARD_OPEN + lines[start - 1]
            kept[end - 1] += "\n" + GUARD_CLOSE  # closed on the next blank line (_closed)
    return kept, dropped


def _closed(lines):
    """Lines with each guard's `except` moved onto the blank line after it where there is one
    (between cells there always is), so that the lines after it keep their numbers."""
    out = []
    for line in lines:
        if out and out[-1] == GUARD_CLOSE and line == "":
            continue
        head, _, tail = line.partition("\n")
        out.append(head)
        if tail:
            out.append(tail)
    return out


def _notebook_submission(origin, text):
    source, left_out = keep_definitions(notebook_cells(text))
    return Submission(origin, source, "notebook", left_out)


def _too_large(name):
    return SubmissionError(f"{name}: larger than {MAX_BYTES // 1024} KiB",
                           f"{name}：超过 {MAX_BYTES // 1024} KiB")


def _read(path):
    """The file's text: a regular file (not a FIFO or a device) of at most MAX_BYTES."""
    try:
        raw = safefs.read_regular(path, MAX_BYTES)
    except safefs.TooLarge:
        raise _too_large(path) from None
    except safefs.NotRegular:
        raise SubmissionError(f"{path}: not a regular file", f"{path}：不是普通文件") from None
    except OSError as exc:
        raise SubmissionError(f"{path}: not readable ({exc.strerror})",
                              f"{path}：无法读取（`{exc.strerror}`）") from None
    return decoded(raw, path)


def decoded(raw, path):
    """The text of the student's file `path` from its bytes (a BOM dropped)."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SubmissionError(f"{path}: not UTF-8 text", f"{path}：不是 UTF-8 文本") from None


def pick_in_folder(folder):
    """The attention file a folder holds (searched as load does)."""
    try:
        for name in ("attention.py", "attention.ipynb"):
            for root, dirs, files in os.walk(folder):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                found = sorted(f for f in files if f.lower() == name)
                if found:
                    return os.path.join(root, name if name in found else found[0])
    except RecursionError:  # os.walk recurses: a folder nested 1500 levels deep
        raise SubmissionError(f"{folder}: folders nested too deep to search",
                              f"{folder}：文件夹嵌套太深，无法查找") from None
    candidates = [f for f in sorted(os.listdir(folder)) if has_suffix(f, ".py", ".ipynb")]
    if len(candidates) == 1:
        return os.path.join(folder, candidates[0])
    raise SubmissionError(f"{folder}: no attention.py or attention.ipynb inside",
                          f"{folder}：里面没有 attention.py 或 attention.ipynb")


def work_file(path):
    """The file a submission path names: the path itself, or the attention file of a folder."""
    if not os.path.exists(path):
        raise SubmissionError(f"{path}: no such file or folder", f"{path}：没有这个文件或文件夹")
    return pick_in_folder(path) if os.path.isdir(path) else path


def load(path):
    """A Submission for `path`, or SubmissionError with a one-line reason."""
    picked = work_file(path)
    if os.path.isdir(path):
        # A folder or a cloned repository (GitHub Classroom): only its attention file is read,
        # nothing of it is run; a symlink out of the folder (e.g. to solutions/) is refused.
        inside = os.path.realpath(path)
        if os.path.commonpath([inside, os.path.realpath(picked)]) != inside:
            raise SubmissionError(f"{picked}: a symlink to a file outside the submission",
                                  f"{picked}：是指向提交之外文件的符号链接")
        sub = load_file(picked, origin=path)
        sub.container = "git" if os.path.exists(os.path.join(path, ".git")) else "folder"
        return sub
    if has_suffix(path, ".zip"):
        return load_zip(path)
    return load_file(path, origin=path)


def _zip_walk_key(parts):
    """Sort zip members the way pick_in_folder walks a folder: a folder's files before its
    subfolders, subfolders by name."""
    return [(1, p) for p in parts[:-1]] + [(0, parts[-1])]


def _zip_candidates(archive):
    members = []  # (the member's path split into its folders, its info)
    for info in archive.infolist():
        parts = info.filename.replace("\\", "/").split("/")
        if info.is_dir() or any(p.startswith(".") or p in ("__MACOSX", "__pycache__")
                                for p in parts[:-1]) or parts[-1].startswith("."):
            continue
        if stat.S_ISLNK(info.external_attr >> 16):
            continue  # a symlink member: its "content" is a path, never followed
        members.append((parts, info))
    for name in ("attention.py", "attention.ipynb"):
        found = [(parts, info) for parts, info in members if parts[-1].lower() == name]
        if found:
            return min(found, key=lambda member: _zip_walk_key(member[0]))[1]
    code = [info for _, info in members if has_suffix(info.filename, ".py", ".ipynb")]
    if len(code) == 1:
        return code[0]
    raise SubmissionError("no attention.py or attention.ipynb inside the zip",
                          "zip 里没有 attention.py 或 attention.ipynb")


def _packaged_work(archive, package):
    """The work file a `make submit` manifest names, if the zip has it as a plain file."""
    name = package.get("work") if package else None
    if not name or name.split("/")[-1] not in manifest.WORK_NAMES:
        return None
    for info in archive.infolist():
        if info.filename.replace("\\", "/") == name and not info.is_dir() \
                and not stat.S_ISLNK(info.external_attr >> 16):
            return info
    return None


def _check_zip_caps(archive):
    members = archive.infolist()
    if len(members) > MAX_ZIP_MEMBERS:
        raise SubmissionError(f"the zip holds {len(members)} members, more than {MAX_ZIP_MEMBERS}",
                              f"zip 里有 {len(members)} 个成员，超过上限 {MAX_ZIP_MEMBERS}")
    total = sum(info.file_size for info in members)
    if total > MAX_ZIP_UNCOMPRESSED:
        raise SubmissionError(f"the zip's members add up to {total // 2 ** 20} MiB uncompressed, "
                              f"more than {MAX_ZIP_UNCOMPRESSED // 2 ** 20} MiB",
                              f"zip 解压后共 {total // 2 ** 20} MiB，超过上限 "
                              f"{MAX_ZIP_UNCOMPRESSED // 2 ** 20} MiB")


def load_zip(path):
    """The attention file of a .zip, read in memory (nothing is extracted to disk).  A package
    made by `make submit` gives the file its manifest names, and `sub.package` says whether the
    zip still holds what the manifest lists (grader/judge/manifest.py)."""
    try:
        data = safefs.read_regular(path, MAX_ZIP_BYTES)  # a FIFO named .zip cannot block us
    except safefs.TooLarge:
        raise SubmissionError(f"{path}: the zip is larger than {MAX_ZIP_BYTES // 2 ** 20} MiB",
                              f"{path}：zip 超过 {MAX_ZIP_BYTES // 2 ** 20} MiB") from None
    except OSError as exc:
        raise SubmissionError(f"{path}: not a readable zip ({exc.strerror or exc})",
                              f"{path}：zip 无法读取（`{exc.strerror or exc}`）") from None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            _check_zip_caps(archive)
            package = manifest.inspect(archive, rubric.load(), MAX_BYTES,
                                       deadline=time.monotonic() + ZIP_SECONDS)
            info = _packaged_work(archive, package) or _zip_candidates(archive)
            if info.file_size > MAX_BYTES:
                raise _too_large(info.filename)
            with archive.open(info) as handle:
                raw = handle.read(MAX_BYTES + 1)
            if len(raw) > MAX_BYTES:  # the size a member declares may be a lie
                raise _too_large(info.filename)
            text = decoded(raw, info.filename)
    except SubmissionError as exc:
        raise SubmissionError(f"{path}: {exc}", f"{path}：{exc.said('zh')}") from None
    except manifest.ZipTooSlow as exc:
        raise SubmissionError(f"{path}: {exc}", f"{path}：检查提交包里列出的文件用时太久") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError,
            NotImplementedError, ValueError, zlib.error) as exc:
        raise SubmissionError(f"{path}: not a readable zip ({type(exc).__name__}: "
                              f"{str(exc)[:120]})", f"{path}：不是可读取的 zip 文件"
                              f"（`{type(exc).__name__}: {str(exc)[:120]}`）") from None
    sub = _notebook_submission(path, text) if has_suffix(info.filename, ".ipynb") else \
        Submission(path, text, "python")
    sub.container = "zip"
    sub.package = package
    return sub


def load_file(path, origin):
    if not os.access(path, os.R_OK):
        raise SubmissionError(f"{path}: not readable", f"{path}：无法读取")
    text = _read(path)
    if has_suffix(path, ".ipynb"):
        return _notebook_submission(origin, text)
    if not has_suffix(path, ".py"):
        raise SubmissionError(f"{path}: expected a .py or .ipynb file",
                              f"{path}：应当是 .py 或 .ipynb 文件")
    return Submission(origin, text, "python")
