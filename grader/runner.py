"""Run the checks (ordinary pytest files) in the judge process and map them to the rubric.

pytest collects `grader/checks/public` (and `hidden` when present and asked for); the kit's
plugin hands each check the `student` proxy and turns whatever ended a check (a Verdict, the
student's exception, a dead worker) into plain data that pytest-json-report records.  A rubric
check passes only if every test that carries its id ran and passed; one that did not run at all
is an `error`, never a pass.
"""
import os

import pytest
from pytest_jsonreport.plugin import JSONReport

from .checks.support import Verdict
from .student import StudentError, WorkerFailure

CHECKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checks")
STATUS_OF_FAILURE = {"timeout": "timeout", "crashed": "error", "protocol": "error", "budget": "error"}


def classify(exc):
    """Plain data describing why a check ended: status, message key and its fields."""
    if isinstance(exc, Verdict):
        fields = {k: str(v) for k, v in exc.fields.items()}
        return {"status": "failed", "key": exc.key, "fields": fields,
                "detail": str(exc.detail), "heatmap": str(exc.heatmap)}
    if isinstance(exc, StudentError):
        fields = {"type": exc.type, "message": exc.message, "where": exc.where()}
        if exc.during == "import":
            return {"status": "failed", "key": "import_failed", "fields": fields}
        if exc.memory_limit:
            fields["limit"] = f"{exc.memory_limit / 2 ** 30:g} GiB"
            return {"status": "error", "key": "memory_limit", "fields": fields}
        if exc.not_implemented:
            return {"status": "failed", "key": "not_implemented", "fields": {}}
        if "view size is not compatible" in exc.message:
            return {"status": "failed", "key": "view_non_contiguous", "fields": fields}
        return {"status": "failed", "key": "raised", "fields": fields}
    if isinstance(exc, WorkerFailure):
        return {"status": STATUS_OF_FAILURE.get(exc.kind, "error"), "key": exc.kind,
                "fields": {"message": exc.message}}
    return {"status": "error", "key": "internal",
            "fields": {"message": f"{type(exc).__name__}: {str(exc)[:300]}"}}


class KitPlugin:
    def __init__(self, student):
        self._student = student

    @pytest.fixture(scope="session")
    def student(self):
        return self._student

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "check(id): the rubric check this test scores")

    def pytest_json_runtest_metadata(self, item, call):
        marker = item.get_closest_marker("check")
        meta = {"check": marker.args[0] if marker else None}
        if call.excinfo is not None and call.when in ("setup", "call"):
            meta["verdict"] = classify(call.excinfo.value)
        return meta


def check_files(visibilities):
    folders = [os.path.join(CHECKS_DIR, v) for v in ("public", "hidden") if v in visibilities]
    return [f for f in folders if os.path.isdir(f)]


def run(student, visibilities=("public", "hidden")):
    """Run the checks; return {check_id: [part, ...]} with part = {name, status, verdict}."""
    json_report = JSONReport()
    # Only the plugins the kit names: no third-party plugin installed beside it (xdist, randomly,
    # ...) is loaded into the judge, which is also faster.
    args = check_files(visibilities) + [
        "-p", "pytest_jsonreport.plugin", "-p", "pytest_metadata.plugin",
        "-q", "-p", "no:cacheprovider", "--noconftest",
        "-c", os.path.join(CHECKS_DIR, "pytest.ini"), "--rootdir", CHECKS_DIR,
        "--json-report-file=none", "--tb=no", "--no-header", "-s",
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
        # Built-in plugins the checks do not use and that cost the judge half its time per
        # submission (two gc.collect()s at exit, a log handler around every test phase).
        "-p", "no:logging", "-p", "no:unraisableexception", "-p", "no:threadexception",
        "-p", "no:faulthandler",
    ]
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        with open(os.devnull, "w") as devnull, _quiet(devnull):
            pytest.main(args, plugins=[KitPlugin(student), json_report])
    finally:
        if autoload is None:
            del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
    parts = {}
    for test in (json_report.report or {}).get("tests", []):
        meta = test.get("metadata") or {}
        check_id = meta.get("check")
        if check_id is None:
            continue
        verdict = meta.get("verdict")
        status = "passed" if test.get("outcome") == "passed" and verdict is None else \
            (verdict or {}).get("status", "error")
        parts.setdefault(check_id, []).append(
            {"name": test.get("nodeid", "").split("::")[-1], "status": status, "verdict": verdict})
    return parts


class _quiet:
    """pytest prints its own progress; the kit prints the report instead."""

    def __init__(self, sink):
        self.sink = sink

    def __enter__(self):
        import sys

        self.saved = sys.stdout
        sys.stdout = self.sink

    def __exit__(self, *exc):
        import sys

        sys.stdout = self.saved
