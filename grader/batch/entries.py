"""What a class folder holds: one entry per student, its id, its content hash.

The student id is the entry's name, always: a `make submit` manifest that names another id is a
flag (manifest.flag_identity), never a rename, so one zip cannot move its grade onto another
student's row.  Everything here only reads the folder; no entry's code runs.
"""
import collections
import hashlib
import os
import re
import stat


SKIPPED_NAMES = {"__MACOSX", "__pycache__", "Thumbs.db"}
GRADABLE_SUFFIXES = (".py", ".ipynb", ".zip")


Entry = collections.namedtuple("Entry", "name path student digest")


def _stem(name):
    for suffix in GRADABLE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


MAX_ID_BYTES = 200  # a file name is at most 255 bytes: room for "~2", ".json" and a temp suffix


def _safe(name):
    """A file-system-safe id: letters (any script), digits, . _ - @ +; at most 120 characters
    and MAX_ID_BYTES bytes of UTF-8."""
    safe = (re.sub(r"[^\w.@+-]", "_", name).strip(".") or "_")[:120]
    return safe.encode("utf-8")[:MAX_ID_BYTES].decode("utf-8", "ignore")


def assign_ids(names):
    """{entry name: student id}: the name without .py/.ipynb/.zip; the full name where two
    entries would otherwise share an id (alice.py and alice.zip)."""
    first = {name: _safe(_stem(name)) for name in names}
    counts = collections.Counter(first.values())
    ids = {name: (first[name] if counts[first[name]] == 1 else _safe(name)) for name in names}
    counts = collections.Counter(ids.values())
    for name in sorted(names):  # still equal (e.g. "a b.py" and "a_b.py"): number them
        if counts[ids[name]] > 1:
            base, n = ids[name], 2
            while f"{base}~{n}" in ids.values():
                n += 1
            ids[name] = f"{base}~{n}"
    return ids


def entry_digest(path):
    """sha256 of what the entry holds: a file's bytes, or a folder's relative paths and file
    bytes (symlinks by their target text, never followed; a repository's .git is left out)."""
    h = hashlib.sha256()
    if not os.path.isdir(path):
        h.update(b"file\0")
        hash_file(h, path)
        return h.hexdigest()
    h.update(b"folder\0")
    try:
        _hash_folder(h, path)
    except RecursionError:  # os.walk recurses: a tree 1500 levels deep is hashed as far as it went
        h.update(b"\0too deep")
    return h.hexdigest()


def _hash_folder(h, path):
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not (root == path and d == ".git"))
        for name in sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(root, d))):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode("utf-8", "surrogateescape") + b"\0")
            if os.path.islink(full):
                h.update(b"link\0" + os.readlink(full).encode("utf-8", "surrogateescape"))
            else:
                hash_file(h, full)
            h.update(b"\0")


def hash_file(h, path):
    """Feed `path`'s bytes to `h` (what is not a readable regular file: a note saying so)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block a read
            h.update(b"not a regular file")
            return
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        h.update(f"unreadable: {exc.strerror}".encode())


def readable_name(name):
    """The entry's name as text, a byte that is not UTF-8 shown as \\xNN (every writer still
    makes it inert for its medium)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def list_entries(folder):
    """Every entry of `folder` (hidden files and OS litter left out), sorted by name."""
    names = sorted(n for n in os.listdir(folder)
                   if not n.startswith(".") and n not in SKIPPED_NAMES)
    ids = assign_ids(names)
    return [Entry(readable_name(n), os.path.join(folder, n), ids[n],
                  entry_digest(os.path.join(folder, n))) for n in names]
