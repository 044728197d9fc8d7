"""The checks as plain pytest runs them: one submission, its worker in the sandbox.

    python -m pytest grader/judge/checks --submission PATH [--hidden] \
        --json-report --json-report-file FILE

grades PATH as every door does (the same sandboxed worker, the same seed, the checks in the
same order: public, then hidden) and, with pytest-json-report installed, writes one test entry
per check function whose `metadata` holds its rubric id (`check`), the points it carries
(`max_points`: the check's points shared among its tests), the points it earned (`points`) and,
where it failed, the verdict (`verdict`: status, message key and its fields), so the points of
a report add up to `grade`'s total.  Plain pytest options work (`-k attend`, `-x`, `--lf`).

The kit's own judge (judge/runner.py) runs these files with `--noconftest`: this module is read
only when pytest is run by hand on the checks.
"""
import pytest

from grader import rubric as rubric_module
from grader.judge import grading, runner
from grader.sandbox import launch as sandbox

SUBMISSION = pytest.StashKey()  # (sub, student) of the grading, once started
SHARES = pytest.StashKey()  # {nodeid: (check id, points carried)}


def pytest_addoption(parser):
    group = parser.getgroup("grader", "the exercise kit")
    group.addoption("--submission", metavar="PATH",
                    help="the submission to grade: a .py, an .ipynb, a folder or a zip")
    group.addoption("--hidden", action="store_true",
                    help="run the hidden checks too (the instructor's grading)")
    group.addoption("--isolation", default="auto", choices=("auto", "bubblewrap", "process"),
                    help="how the worker is isolated (default: bubblewrap where it works)")


def pytest_configure(config):
    if config.getoption("--submission") is None and not config.getoption("--collect-only"):
        raise pytest.UsageError("the checks grade one submission: pass --submission PATH")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Public checks first, then hidden ones (or none without --hidden), as every door runs
    them; each test's share of its rubric check's points, counted before `-k` deselects any."""
    hidden = config.getoption("--hidden")
    kept = [i for i in items if runner.visibility_of(i) == "public"]
    kept += [i for i in items if hidden and runner.visibility_of(i) == "hidden"]
    items[:] = kept
    points = {check.id: check.points for check in rubric_module.load().checks}
    tests = {}
    for item in items:
        tests.setdefault(runner.check_of(item), []).append(item.nodeid)
    config.stash[SHARES] = {
        nodeid: (check_id, points.get(check_id, 0.0) / len(nodeids))
        for check_id, nodeids in tests.items() for nodeid in nodeids}


def _grading(config):
    """The submission's worker, started at the first check that asks for it."""
    if SUBMISSION not in config.stash:
        sub, student = grading.start(config.getoption("--submission"),
                                     isolation=config.getoption("--isolation"),
                                     limits=sandbox.Limits())
        grading.prepare(sub, student)
        config.stash[SUBMISSION] = (sub, student)
    return config.stash[SUBMISSION][1]


def pytest_unconfigure(config):
    if SUBMISSION in config.stash:
        sub, student = config.stash[SUBMISSION]
        student.close()
        sub.cleanup()


@pytest.fixture(scope="session")
def student(request):
    """The judge-side proxy of the submission's worker: `student.attend(q, k, v)`."""
    return _grading(request.config)


@pytest.fixture(scope="session")
def seed(request):
    """The submission's own seed: the checks draw fresh inputs from it."""
    return _grading(request.config).seed


@pytest.fixture
def record_note(request):
    """What a passing check could not judge here, kept with the test's report."""
    return lambda name, value: request.node.user_properties.append((name, value))


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    """pytest-json-report's metadata of a test, merged phase by phase: its rubric id and the
    points it carries (setup), the points it earned (call), the verdict where a phase failed."""
    check_id, share = item.config.stash[SHARES].get(item.nodeid, (None, 0.0))
    if call.excinfo is not None and call.when in ("setup", "call"):
        return {"check": check_id, "max_points": share, "points": 0.0,
                "verdict": runner.classify(call.excinfo.value)}
    if call.when == "setup":
        return {"check": check_id, "max_points": share, "points": 0.0}
    if call.when == "call":
        return {"points": share}
    return {}
