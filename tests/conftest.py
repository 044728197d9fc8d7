"""The kit's own tests import the check modules (to call their helpers, to read their marks):
their `@pytest.mark.check(id)` is registered here as the judge's plugin registers it in a
grading session, so these imports warn of no unknown mark.  `make test`'s workers (pytest-xdist)
are handed the files in work units chosen below."""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "check(id): the rubric check a check function scores")


# -- how `make test` hands the files to its workers (pytest-xdist, --dist loadgroup) --------------
# Every test is put in the xdist group of its file (xdist's public `xdist_group` mark), so that a
# file is one work unit, as with --dist loadfile, but for the files below.
# Files that grade with test_corpus.graded(): one grading per submission per process, so they run
# in test_corpus.py's process (one work unit), not each grading the corpus again elsewhere.
SAME_PROCESS_AS = {"test_precision.py": "test_corpus.py", "test_device.py": "test_corpus.py"}
# The longest work units, longest first (minutes on one worker of `make test`): collected first,
# so handed out first (xdist hands work units out in the order they were collected), so that none
# of them starts last and runs on alone.  The rest keep their order.
LONGEST_FIRST = ["test_corpus.py", "test_hostile.py", "test_nbgrader_e2e.py", "test_doors.py",
                 "test_doors_students.py", "test_bench_smoke.py", "test_hostile_batch.py",
                 "test_doors_platforms.py", "test_forkserver.py"]


def work_unit(item):
    """The file name whose work unit runs `item`."""
    name = item.path.name
    return SAME_PROCESS_AS.get(name, name)


def pytest_collection_modifyitems(config, items):
    """Under --dist loadgroup: each test in its work unit's group, the longest units first."""
    if config.getoption("dist", "no") != "loadgroup":
        return
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(work_unit(item), len(rank)))  # stable
    for item in items:
        item.add_marker(pytest.mark.xdist_group(work_unit(item)))
