"""The kit's own tests import the check modules (to call their helpers, to read their marks):
their `@pytest.mark.check(id)` is registered here as the judge's plugin registers it in a
grading session, so these imports warn of no unknown mark.  `make test`'s workers (pytest-xdist)
are handed the files in the order chosen below."""
import os
import sys

import pytest

from grader import process

# The tests compute on one thread, as the kit's own processes do (set before any test module
# imports torch; what they start inherits it): on two busy cores a second thread only spins.
process.pin_environment()


def pytest_configure(config):
    config.addinivalue_line("markers", "check(id): the rubric check a check function scores")
    if hasattr(config, "workerinput"):
        # An xdist worker: the folder of this test run that every worker shares (xdist gives
        # each worker a basetemp inside the run's own), where a result more than one test file
        # needs is made once (test_corpus.graded, door_matrix.batched).
        os.environ["KIT_TESTS_SHARED"] = os.path.dirname(config.option.basetemp)


@pytest.fixture(scope="module", autouse=True)
def close_fork_servers():
    """The fork servers the module started through zygotes.server, closed when it ends."""
    yield
    if "zygotes" in sys.modules:  # a module that never forked imports nothing here
        sys.modules["zygotes"].close_all()


# -- how `make test` hands the files to its workers (pytest-xdist, --dist loadfile) --------------
# The longest files, longest first (minutes on one worker of `make test`): collected first, so
# handed out first (with --no-loadscope-reorder xdist keeps the order of collection), so that
# none of them starts last and runs on alone.  The rest keep their order.
LONGEST_FIRST = ["test_nbgrader_e2e.py", "test_bench_smoke.py", "test_hostile.py", "test_corpus.py",
                 "test_recipe.py", "test_doors_students.py", "test_held_out.py", "test_sandbox.py",
                 "test_batch.py", "test_imitation.py", "test_demo.py", "test_forkserver.py",
                 "test_corpus_hostile.py", "test_doors_platforms.py", "test_hostile_batch.py",
                 "test_classview.py", "test_ta_walkthrough.py"]


def pytest_collection_finish(session):
    """The files this run's selected tests grade (their `path`): a run of a few corpus tests
    batches those files only (test_corpus.graded), not the whole corpus."""
    import door_matrix

    door_matrix.SELECTED.update(item.callspec.params["path"] for item in session.items
                                if "path" in getattr(getattr(item, "callspec", None), "params", {}))


def pytest_collection_modifyitems(config, items):
    """In an xdist worker: the longest files first."""
    if hasattr(config, "workerinput"):
        rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable
