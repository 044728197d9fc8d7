"""The kit's short-lived folders: in memory where the machine has room, made only when a worker
reads its file from a folder, and gone after."""
import os

import pytest

from grader import scratch
from grader.batch import similarity
from grader.batch.entries import list_entries
from grader.judge import submission


@pytest.fixture
def fresh_root(monkeypatch):
    scratch.root.cache_clear()
    yield monkeypatch
    scratch.root.cache_clear()


def test_tmpdir_when_set_is_obeyed(fresh_root, tmp_path):
    fresh_root.setenv("TMPDIR", str(tmp_path))
    import tempfile

    fresh_root.setattr(tempfile, "tempdir", None)  # tempfile caches what it found first
    assert scratch.root() == str(tmp_path)
    assert os.path.dirname(scratch.mkdtemp("attn-test-")) == str(tmp_path)


def test_memory_only_where_it_is_a_writable_tmpfs_with_room(fresh_root, tmp_path):
    fresh_root.delenv("TMPDIR", raising=False)
    with open("/proc/self/mounts") as handle:
        types = [f[2] for f in map(str.split, handle) if len(f) > 2 and f[1] == scratch.MEMORY]
    expected = bool(types) and types[-1] == "tmpfs" and os.access(scratch.MEMORY, os.W_OK) \
        and scratch.has_room(scratch.MEMORY)
    assert (scratch.root() == scratch.MEMORY) == expected
    assert not scratch.is_memory(str(tmp_path))  # a folder, never a mount point of its own
    assert not scratch.has_room(str(tmp_path), room=2 ** 62)
    fresh_root.setattr(scratch, "is_memory", lambda path: False)
    scratch.root.cache_clear()
    import tempfile

    assert scratch.root() == tempfile.gettempdir()


def test_a_submission_makes_its_work_folder_on_first_use_only(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text("x = '\u4e2d'\n", encoding="utf-8")
    sub = submission.load(str(path))
    assert sub._work_dir is None
    folder = sub.work_dir
    assert sub.work_dir == folder and os.path.dirname(folder) == scratch.root()
    with open(os.path.join(folder, "attention.py"), encoding="utf-8") as handle:
        assert handle.read() == sub.source
    assert not os.access(folder, os.W_OK) or os.geteuid() == 0  # read-only (root may anyway)
    assert oct(os.stat(folder).st_mode & 0o777) == oct(0o555)
    sub.cleanup()
    assert not os.path.exists(folder)
    assert sub.work_dir == folder and not os.path.exists(folder)  # not made again
    unused = submission.load(str(path))
    unused.cleanup()
    with pytest.raises(RuntimeError):
        unused.work_dir  # noqa: B018 (cleaned up before any use: never made)


def test_the_near_copies_read_a_submission_without_a_work_folder(tmp_path, monkeypatch):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "alice.py").write_text("def attend():\n    pass\n", encoding="utf-8")
    monkeypatch.setattr(scratch, "mkdtemp", lambda prefix: pytest.fail("a folder was made"))
    entry = list_entries(str(tmp_path / "class"))[0]
    saved = similarity.keep_source(str(tmp_path / "out"), entry)
    assert saved["source"] == "def attend():\n    pass\n"
