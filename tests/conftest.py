"""The kit's own tests import the check modules (to call their helpers, to read their marks):
their `@pytest.mark.check(id)` is registered here as the judge's plugin registers it in a
grading session, so these imports warn of no unknown mark.  `make test`'s workers (pytest-xdist)
are handed the files in work units chosen below."""
import collections

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "check(id): the rubric check a check function scores")


# -- how `make test` hands the files to its workers (pytest-xdist, --dist loadfile) ---------------
# Files that grade with test_corpus.graded(): one grading per submission per process, so they run
# in test_corpus.py's process (one work unit), not each grading the corpus again elsewhere.
SAME_PROCESS_AS = {"test_precision.py": "test_corpus.py", "test_device.py": "test_corpus.py"}
# The longest work units, longest first (minutes on one worker of `make test`): handed out before
# the others, so that none of them starts last and runs on alone.  The rest keep xdist's order.
LONGEST_FIRST = ["test_corpus.py", "test_doors.py", "test_hostile.py", "test_nbgrader_e2e.py",
                 "test_bench_smoke.py", "test_hostile_batch.py", "test_forkserver.py"]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with the work units above: a file per unit but for SAME_PROCESS_AS, and
    LONGEST_FIRST handed out first."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid):
            folder, slash, name = super()._split_scope(nodeid).rpartition("/")
            return folder + slash + SAME_PROCESS_AS.get(name, name)

        def _assign_work_unit(self, node):
            if not self.ordered:  # the first hand-out: the queue is whole
                rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
                order = sorted(self.workqueue,  # stable: the others keep their order
                               key=lambda scope: rank.get(scope.rpartition("/")[2], len(rank)))
                self.workqueue = collections.OrderedDict((s, self.workqueue[s]) for s in order)
                self.ordered = True
            super()._assign_work_unit(node)

    return Scheduling(config, log)
