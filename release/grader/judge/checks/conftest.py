"""The checks as plain pytest runs them, on one submission:

    python -m pytest grader/judge/checks --submission PATH [--hidden] \
        --json-report --json-report-file FILE

grades PATH as every door does (the same sandboxed worker, seed and order of checks) and, with
pytest-json-report installed, writes one entry per check function whose `metadata` holds its
rubric id (`check`), the points it carries (`max_points`) and earned (`points`) and, where it
failed, the verdict.  Plain pytest options work (`-k attend`, `-x`, `--lf`).  The fixtures and
the metadata are the judge's own (judge/runner.py); the judge itself runs these files with
`--noconftest`, so this module is read only when pytest is run by hand on the checks.
"""
import pytest

from grader.judge import grading, runner
from grader.sandbox import launch as sandbox

SUBMISSION = pytest.StashKey()  # (sub, student) of the grading, once started


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
    config.pluginmanager.register(runner, "grader-checks")  # the fixtures and the metadata
    config.stash[runner.STUDENT] = lambda: _grading(config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Public checks first, then hidden ones with --hidden, as every door runs them; each test's
    share of its rubric check's points, counted before `-k` deselects any."""
    hidden = config.getoption("--hidden")
    kept = [i for i in items if runner.visibility_of(i) == "public"]
    kept += [i for i in items if hidden and runner.visibility_of(i) == "hidden"]
    items[:] = kept
    config.stash[runner.SHARES] = runner.shares(items)


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
