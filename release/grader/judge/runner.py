"""Run the checks (ordinary pytest files) in the judge process; each student's result is
pytest-json-report's document of its tests, and the rubric's parts are read from it.

pytest collects the checks once per judge, then runs them through its own protocol for each
student handed over.  Each test's metadata holds its rubric id, the points it carries and earned,
and the verdict made of whatever ended it.  A rubric check passes only if every test that carries
its id ran and passed; one that did not run at all is an `error`, never a pass.

This module is also the plugin that gives the checks their fixtures and metadata, in the kit's
session and when pytest is run by hand on the checks (checks/conftest.py registers it).
"""
import os
import queue
import sys
import threading
import traceback

import pytest
from pytest_jsonreport.plugin import Hooks as JSONReportHooks, JSONReport

from grader.judge.checks.support import Verdict, judged_maps
from grader.judge.student import StudentError, WorkerFailure
from grader import paths, process, rubric

CHECKS_DIR = paths.CHECKS
STUDENT = pytest.StashKey()  # () -> the judge-side proxy of the submission being graded
SHARES = pytest.StashKey()  # {nodeid: (check id, points carried)}
LIBRARIES = os.path.dirname(os.path.dirname(pytest.__file__)) + os.sep


class KitError(RuntimeError):
    """The checks could not be collected: every grading of the session raises it."""


def plain(value):
    """A field value as plain text: one said in both languages (rubric.said) stays a pair."""
    if isinstance(value, dict) and set(value) == {"zh", "en"}:
        return {lang: str(text) for lang, text in value.items()}
    return str(value)


def classify(exc):
    """Why a check ended, as plain data: status, message key and its fields.  An exception that
    is not the submission's is the kit's own ("internal"), its traceback kept for `grade` only."""
    if isinstance(exc, Verdict):
        fields = {k: plain(v) for k, v in exc.fields.items()}
        return {"status": "failed", "key": exc.key, "fields": fields,
                "detail": str(exc.detail), "heatmap": str(exc.heatmap)}
    if isinstance(exc, StudentError):
        fields = {"type": exc.type, "message": exc.message, "where": exc.where()}
        if exc.during == "import":
            return {"status": "failed", "key": "import_failed", "fields": fields}
        if exc.memory_limit:
            fields["limit"] = f"{exc.memory_limit / 2 ** 30:g} GiB"
            return {"status": "error", "key": "memory_limit", "fields": fields}
        if exc.not_defined:
            return {"status": "failed", "key": "not_defined", "fields": {"name": exc.not_defined}}
        if exc.not_implemented:
            return {"status": "failed", "key": "not_implemented", "fields": {}}
        if "view size is not compatible" in exc.message:
            return {"status": "failed", "key": "view_non_contiguous", "fields": fields}
        if "does not require grad and does not have a grad_fn" in exc.message:
            return {"status": "failed", "key": "no_grad_path", "fields": fields}
        return {"status": "failed", "key": "raised", "fields": fields}
    if isinstance(exc, WorkerFailure):
        return {"status": "timeout" if exc.kind == "timeout" else "error", "key": exc.kind,
                "fields": {"message": exc.words(), **{k: plain(v) for k, v in exc.fields.items()}}}
    return {"status": "error", "key": "internal",
            "fields": {"message": f"{type(exc).__name__}: {str(exc)[:300]}"},
            "traceback": kit_traceback(exc)}


def kit_traceback(exc):
    """The exception's traceback from the check's own frame (pytest's and pluggy's left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(LIBRARIES):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


def kit_errors(data):
    """(check id, verdict) of each kit error in a report's data."""
    return [(check["id"], verdict) for check in data["checks"]
            for verdict in check["verdicts"] if verdict.get("traceback")]


# -- the checks' fixtures and metadata: the kit's session and plain pytest alike -------------------

@pytest.fixture(scope="session")
def student(request):
    """The judge-side proxy of the submission being graded: `student.attend(q, k, v)`."""
    return request.config.stash[STUDENT]()


@pytest.fixture(scope="session")
def seed(request):
    """The submission's own seed: checks draw fresh inputs from it (`support.fresh(seed, salt)`),
    so a regrade reproduces them."""
    return request.config.stash[STUDENT]().seed


@pytest.fixture
def record_note(request):
    """What a passing check could not judge here (support.note): said on its card, free."""
    return lambda name, value: request.node.user_properties.append((name, value))


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    """pytest-json-report's metadata of a test, merged phase by phase: its rubric id and the
    points it carries (setup), the points it earned (call), the verdict where setup or the call
    ended in an exception (a failed teardown earns nothing either)."""
    check_id, share = item.config.stash[SHARES].get(item.nodeid, (None, 0.0))
    if call.excinfo is not None and call.when in ("setup", "call"):
        return {"check": check_id, "max_points": share, "points": 0.0,
                "verdict": classify(call.excinfo.value)}
    if call.when == "setup":
        return {"check": check_id, "max_points": share, "points": 0.0}
    if call.when == "call":
        return {"points": share}
    return {"points": 0.0} if call.excinfo is not None else {}


def shares(items):
    """{nodeid: (check id, points carried)}: each test's share of its rubric check's points."""
    points = {check.id: check.points for check in rubric.load().checks}
    tests = {}
    for item in items:
        tests.setdefault(check_of(item), []).append(item.nodeid)
    return {nodeid: (check_id, points.get(check_id, 0.0) / len(nodeids))
            for check_id, nodeids in tests.items() for nodeid in nodeids}


def visibility_of(item):
    """"public" or "hidden": the folder of the check's file."""
    return os.path.basename(os.path.dirname(str(item.path)))


def check_of(item):
    """The rubric check id a collected test scores (its `check` mark), or None."""
    marker = item.get_closest_marker("check")
    return marker.args[0] if marker else None


def _checked(document):
    """(test, a copy of its metadata) of each test of a rubric check in the document."""
    for test in document["tests"]:
        metadata = dict(test.get("metadata") or {})
        if metadata.get("check") is not None:
            yield test, metadata


def carried(document):
    """The pytest-json-report document as every report carries it (`pytest` in its data): the
    summary and, per test of a check, its node id, outcome and metadata; timings and the
    verdict's fields (said on the cards already) stay out."""
    tests = []
    for test, metadata in _checked(document):
        if metadata.get("verdict") is not None:
            metadata["verdict"] = {k: metadata["verdict"].get(k) for k in ("status", "key")}
        tests.append({"nodeid": test["nodeid"], "outcome": test["outcome"],
                      "metadata": metadata})
    return {"exitcode": document.get("exitcode"), "summary": dict(document.get("summary", {})),
            "tests": tests}


def parts_of(document):
    """{check_id: [part, ...]}, part = {name, status, verdict[, note]}, from a pytest-json-report
    document: a test that did not pass has its verdict's status, or `error` where it has none."""
    parts = {}
    for test, metadata in _checked(document):
        verdict = metadata.get("verdict")
        status = "passed" if test["outcome"] == "passed" and verdict is None else \
            (verdict or {}).get("status", "error")
        part = {"name": test["nodeid"].split("::")[-1], "status": status, "verdict": verdict}
        notes = [p["kit_note"] for p in test.get("user_properties", ()) if "kit_note" in p]
        if notes and notes[0]:  # support.note(): said, and costs nothing
            part["note"] = notes[0]
        parts.setdefault(metadata["check"], []).append(part)
    return parts


# -- the kit's long-lived session --------------------------------------------------------------

class StudentReport(JSONReport):
    """pytest-json-report's plugin for one student's tests.  Its hook specs are added once
    (KitPlugin.pytest_addhooks), and its configure step is not replayed at each registration (it
    would make this student's plugin the one pytest unregisters at the session's end)."""
    pytest_addhooks = None
    pytest_configure = None


class KitPlugin:
    """Runs the collected checks for each student the CheckSession hands over."""

    def __init__(self, owner):
        self.owner = owner
        self.current = None
        self.collect_errors = []  # the tracebacks of check modules that could not be collected

    def pytest_addhooks(self, pluginmanager):
        pluginmanager.add_hookspecs(JSONReportHooks)

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):
        """The kit prints its own report: pytest's terminal reporter, made by now, goes."""
        config.pluginmanager.unregister(name="terminalreporter")
        config.stash[STUDENT] = lambda: self.current

    def pytest_exception_interact(self, node, call, report):
        if isinstance(report, pytest.CollectReport):
            self.collect_errors.append(kit_traceback(call.excinfo.value))

    def pytest_collection_finish(self, session):
        session.config.stash[SHARES] = shares(session.items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        """The judged call a failing check's heatmap text was drawn from, kept under the check's
        id (the first failing part's): the feedback page draws the card's own numbers."""
        if call.excinfo is None or call.when not in ("setup", "call"):
            return
        drawn = getattr(getattr(call.excinfo.value, "heatmap", None), "call", None)
        if check_of(item) and drawn is not None:
            judged_maps(self.current).setdefault(check_of(item), drawn)

    def pytest_json_modifyreport(self, json_report):
        """The exit code plain pytest would give these tests (the session itself runs on)."""
        summary = json_report["summary"]
        json_report["exitcode"] = int(pytest.ExitCode.TESTS_FAILED if summary.get("failed")
                                      or summary.get("error") else pytest.ExitCode.OK)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """Run the items for each student handed over, until None comes.  A check module that
        could not be collected ends the session here."""
        owner = self.owner
        # This thread computes: OpenMP keeps the thread count per thread (process.py).
        owner.threads_given = process.one_thread_here()
        process.release_gc()  # imported and collected: collect automatically from here on
        owner.ready.set()  # configured and collected: what follows is per student
        if self.collect_errors:
            owner.failure = KitError("the checks could not be collected:\n\n"
                                     + "\n".join(self.collect_errors))
            return True
        while True:
            request = owner.requests.get()
            if request is None:
                return True
            owner.results.put(self._run_items(session, *request))

    def _run_items(self, session, student, only=None):
        """The collected checks (those in `only`, where given) against `student`: their
        pytest-json-report document, or the exception that stopped them.  The last one runs with
        nextitem=None, which tears every fixture down: each student starts as in a fresh session."""
        items = [item for item in session.items if only is None or check_of(item) in only]
        report, manager = StudentReport(session.config), session.config.pluginmanager
        self.current = student
        manager.register(report)
        try:
            report.pytest_sessionstart(session)
            for item, nextitem in zip(items, items[1:] + [None]):
                item.user_properties.clear()  # the node outlives the student: notes do not
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            report.pytest_sessionfinish(session)
            return report.report
        except BaseException as exc:  # noqa: B036 (handed to the caller, which raises it)
            return exc
        finally:
            manager.unregister(report)
            self.current = None


def check_files(visibilities):
    """The folders of the checks of these visibilities that exist here."""
    folders = [os.path.join(CHECKS_DIR, v) for v in ("public", "hidden") if v in visibilities]
    return [f for f in folders if os.path.isdir(f)]


class CheckSession:
    """One pytest session whose checks are collected once and run against student after student:
    pytest.main runs in a thread of its own, waiting in pytest_runtestloop for the next student
    that `run` hands over, one at a time."""

    def __init__(self, visibilities=("public", "hidden")):
        self.requests, self.results = queue.Queue(), queue.Queue()
        self.plugin = KitPlugin(self)
        self.args = check_files(visibilities) + [
            "-c", os.path.join(CHECKS_DIR, "pytest.ini"), "--rootdir", CHECKS_DIR,
            # The checks' conftest.py is for pytest run by hand (this module is its plugin); only
            # the plugins the kit names: none installed beside it (xdist, randomly, ...).
            "--noconftest", "--disable-plugin-autoload", "-p", "pytest_jsonreport.plugin",
            "--json-report-file", "none", "-p", "no:cacheprovider",  # nothing written to disk
            # The judge is a long-lived process of several threads (watch, the notebook's
            # kernel): what pytest captures process-wide around each test (the output, the
            # records of every logger, the warnings filters, the exceptions of other threads and
            # of finalizers) would be the other threads' too, said as a student's.
            "-s", "-p", "no:logging", "-p", "no:warnings", "-p", "no:threadexception",
            "-p", "no:unraisableexception", "--json-report-omit", "log", "traceback",
            "-q", "--tb=no",  # a failing check's verdict is the kit's: pytest's text is not read
        ]
        self.failure = None  # what ended the session (a collection error: KitError)
        self.threads_given = None  # torch's threads on the check thread before it set 1
        self.ready = threading.Event()  # set once pytest is configured and the checks collected
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self):
        # The fixtures are this module's functions (pytest deprecates session-scoped fixtures as
        # a plugin object's methods): the module is a plugin beside KitPlugin.
        try:
            pytest.main(self.args, plugins=[self.plugin, sys.modules[__name__]])
            failure = self.failure or RuntimeError("the check session ended early (see stderr)")
        except BaseException as exc:  # noqa: B036 (raised in the caller's thread)
            failure = exc
        self.failure = failure
        self.ready.set()  # a session that failed before its checks: nobody waits for it
        process.release_gc()
        self.results.put(failure)

    def run(self, student, only=None):
        """The pytest-json-report document of every check (or those in `only`) on `student`."""
        if not self.thread.is_alive():
            raise self.failure or RuntimeError("the check session is closed")
        self.requests.put((student, None if only is None else frozenset(only)))
        result = self.results.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def close(self):
        if self.thread.is_alive():
            self.requests.put(None)
            self.thread.join(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run(student, visibilities=("public", "hidden"), only=None):
    """Run the checks once; return their pytest-json-report document."""
    with CheckSession(visibilities) as session:
        return session.run(student, only)
