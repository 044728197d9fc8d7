"""Files written so that a crash never leaves half of one, and the student's tools' JSON state."""
import contextlib
import json
import os
import tempfile


def write_atomic(path, data):
    """Write `data` (str or bytes) to a temporary file beside `path`, then rename it over `path`."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        if isinstance(data, bytes):
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        else:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def beside(work, kind):
    """The state file of one tool beside the student's file: dir/attention.py -> dir/.attention-KIND.json."""
    folder, name = os.path.split(os.path.abspath(work))
    return os.path.join(folder, f".{os.path.splitext(name)[0]}-{kind}.json")


def load(path, version):
    """The saved state, or {} when it is missing, garbled or of another version."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) and state.get("version") == version else {}


def save(path, state, version):
    """Best effort: a read-only folder costs the remembered state, never the tool's real work."""
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps({**state, "version": version}, ensure_ascii=False, indent=1))
