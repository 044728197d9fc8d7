"""The grader's temporary files sent to a scratch folder of the test's own, so that what a
grading leaves there can be listed (a leak, or a hostile write outside its work folder)."""
import contextlib
import tempfile


@contextlib.contextmanager
def private_tempdir(folder=None, prefix="scratch-"):
    """`tempfile`'s folder is `folder` (default: a fresh one, left for the caller to list and
    remove) while the block runs; yields it."""
    scratch = str(folder) if folder is not None else tempfile.mkdtemp(prefix=prefix)
    saved, tempfile.tempdir = tempfile.tempdir, scratch
    try:
        yield scratch
    finally:
        tempfile.tempdir = saved
