"""A Python file of the kit's own (the reference, a corpus submission) imported as a module in
the test's own process, for the tests that train or move a block themselves, not through a
worker (the files are trusted: they are the kit's)."""
import importlib.util


def load_file(path, prefix):
    """The module of `path`, named `<prefix>_<stem>` so that two tests' copies never meet."""
    spec = importlib.util.spec_from_file_location(f"{prefix}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
