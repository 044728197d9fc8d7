"""The package `make submit` writes, and how the grader checks it.

A package is one zip, `<student id>.zip`, holding the student's work file (attention.py or
attention.ipynb) and manifest.json, nothing else:

    {"format": 1, "kind": "attention-submission", "student": "张三", "created": "...Z",
     "kit_version": "12.1", "rubric_hash": "f765...", "work": "attention.py",
     "files": {"attention.py": {"sha256": "...", "bytes": 4999}},
     "public_checks": {"score": 22, "max_score": 22, "passed": 18, "total": 18, "not_passed": [],
                       "hidden_not_run": 13, "isolation": "bubblewrap"}}

The grader (grader/judge/submission.py) reads the work file the manifest names, verifies every hash,
lists whatever else is in the zip (it is never read) and compares the kit version and rubric hash
with today's; grader/render/package.py turns what it found into the lines a report and the gradebook show.
The hashes catch a package changed after it was made (re-zipped, edited, files added); they are
not a signature: whoever edits the file can edit the manifest too.
"""
import hashlib
import json
import re
import time
import zipfile
import zlib

READ_ERRORS = (OSError, EOFError, RuntimeError, ValueError, NotImplementedError,
               zipfile.BadZipFile, zlib.error)

NAME = "manifest.json"
FORMAT = 1
KIND = "attention-submission"
WORK_NAMES = ("attention.py", "attention.ipynb")
MAX_MANIFEST_BYTES = 64 * 1024
MAX_ID_BYTES = 120  # a file name is at most 255 bytes; CJK letters take 3 each


def safe_id(text):
    """A file-system-safe student id: letters of any script, digits, . _ - @ +; nothing else
    (the same rule as the batch grader's ids), at most MAX_ID_BYTES of UTF-8."""
    safe = re.sub(r"[^\w.@+-]", "_", str(text).strip()).strip(".") or "_"
    while len(safe.encode("utf-8")) > MAX_ID_BYTES:
        safe = safe[:-1]
    return safe


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def build(student, created, work_name, work_bytes, rubric, public_checks):
    return {
        "format": FORMAT, "kind": KIND, "student": student, "created": created,
        "kit_version": rubric.version, "rubric_hash": rubric.hash, "work": work_name,
        "files": {work_name: {"sha256": sha256(work_bytes), "bytes": len(work_bytes)}},
        "public_checks": public_checks,
    }


def dumps(manifest):
    return json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


# -- the grader's side --------------------------------------------------------------------------
def _members(archive):
    """{name with / separators: ZipInfo} of the zip's files (folders left out)."""
    return {info.filename.replace("\\", "/"): info for info in archive.infolist()
            if not info.is_dir()}


def find(archive):
    """(prefix, manifest dict or None, error or None) for a zip: the shallowest manifest.json
    (a package re-zipped inside a folder keeps working); (None, None, None) when there is none."""
    members = _members(archive)
    found = sorted((n for n in members if n.split("/")[-1] == NAME),
                   key=lambda n: (n.count("/"), n))
    if not found:
        return None, None, None
    name = found[0]
    prefix = name[: -len(NAME)]
    info = members[name]
    if info.file_size > MAX_MANIFEST_BYTES:
        return prefix, None, f"{NAME} is larger than {MAX_MANIFEST_BYTES // 1024} KiB"
    try:
        with archive.open(info) as handle:
            data = json.loads(handle.read(MAX_MANIFEST_BYTES + 1).decode("utf-8-sig"))
    except READ_ERRORS as exc:  # ValueError covers bad JSON and bad UTF-8
        return prefix, None, f"{NAME} is not readable ({type(exc).__name__})"
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return prefix, None, f"{NAME} is not a `make submit` manifest"
    if not isinstance(data.get("files"), dict) or not isinstance(data.get("student"), str) \
            or not data["student"].strip():
        return prefix, None, f"{NAME} lacks its student id or its file list"
    return prefix, data, None


class ZipTooSlow(Exception):
    """Hashing the package's members took longer than its time cap."""


def inspect(archive, rubric, max_bytes, deadline):
    """What the package says and whether it still holds what it says: a dict for the report's
    metadata (package), with the name of the work file to grade (or None: pick as for any zip).
    Past `deadline` (time.monotonic()) it stops hashing and raises ZipTooSlow."""
    prefix, data, error = find(archive)
    if data is None and error is None:
        return None
    members = _members(archive)
    if data is None:
        extra = sorted(n for n in members if n != prefix + NAME)
        return {"manifest": False, "error": error, "work": None, "changed": [], "missing": [],
                "extra": extra, "intact": False, "current_rubric": None}
    listed = {str(k): v for k, v in data["files"].items()}
    changed, missing = [], []
    for rel, expected in sorted(listed.items()):
        info = members.get(prefix + rel)
        if info is None:
            missing.append(rel)
            continue
        want = expected.get("sha256") if isinstance(expected, dict) else None
        if time.monotonic() > deadline:
            raise ZipTooSlow(f"checking the package's {len(listed)} listed files took too long")
        try:
            with archive.open(info) as handle:
                got = sha256(handle.read(max_bytes + 1))
        except READ_ERRORS:
            got = None
        if got is None or got != want:
            changed.append(rel)
    extra = sorted(n for n in members if n != prefix + NAME
                   and not (n.startswith(prefix) and n[len(prefix):] in listed))
    work = data.get("work")
    work = prefix + work if isinstance(work, str) and prefix + work in members else None
    kit, rubric_hash = str(data.get("kit_version", "?")), str(data.get("rubric_hash", "?"))
    current = kit == rubric.version and rubric_hash == rubric.hash
    checks = data.get("public_checks") if isinstance(data.get("public_checks"), dict) else None
    return {"manifest": True, "student": data["student"], "created": str(data.get("created", "")),
            "kit_version": kit, "rubric_hash": rubric_hash, "work": work, "files": sorted(listed),
            "changed": changed, "missing": missing, "extra": extra,
            "intact": not (changed or missing or extra), "current_rubric": current,
            "graded_with": {"kit_version": rubric.version, "rubric_hash": rubric.hash},
            "public_checks": checks}


def flag_identity(package, entry_student):
    """Mark a package whose manifest names another student than the entry it was handed in as:
    the entry's own name stays the identity (the manifest is the student's word, not a proof)."""
    if package and package.get("manifest") and safe_id(package["student"]) != entry_student:
        package["identity"] = {"manifest": package["student"], "entry": entry_student}
    return package
