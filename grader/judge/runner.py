"""Run the checks (ordinary pytest files) in the judge process and map them to the rubric.

pytest collects `grader/judge/checks/public` (and `hidden` when present and asked for), once per
judge; the kit's plugin then runs the collected checks for each student handed over, giving each
the `student` proxy, and turns whatever ended a check (a Verdict, the student's exception, a dead
worker) into plain data.  A check whose arguments are the kit's fixtures and its parameters is
called directly (KitPlugin.run_directly); one that asks for any other fixture goes through
pytest's own protocol, and both are recorded alike.  A rubric check passes only if every test
that carries its id ran and passed; one that did not run at all is an `error`, never a pass.
"""
import inspect
import os
import queue
import sys
import threading
import time
import warnings

import pytest

from grader.judge.checks.support import Verdict, judged_maps
from grader.judge.student import StudentError, WorkerFailure
from grader import paths, process

CHECKS_DIR = paths.CHECKS
UNUSED_PLUGINS = ("logging", "unraisableexception", "threadexception", "faulthandler", "warnings",
                  "skipping", "debugging", "setuponly", "setupplan", "stepwise", "junitxml",
                  "legacypath", "doctest", "unittest")
STATUS_OF_FAILURE = {"timeout": "timeout", "crashed": "error", "protocol": "error", "budget": "error",
                     "sandbox": "error"}


def plain(value):
    """A field value as plain text: one said in both languages (rubric.said) stays a pair."""
    if isinstance(value, dict) and set(value) == {"zh", "en"}:
        return {lang: str(text) for lang, text in value.items()}
    return str(value)


def classify(exc):
    """Plain data describing why a check ended: status, message key and its fields."""
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
        return {"status": STATUS_OF_FAILURE.get(exc.kind, "error"), "key": exc.kind,
                "fields": {"message": exc.words(), **{k: plain(v) for k, v in exc.fields.items()}}}
    return {"status": "error", "key": "internal",
            "fields": {"message": f"{type(exc).__name__}: {str(exc)[:300]}"}}


class KitPlugin:
    """Hands the checks the `student` proxy, records verdicts, and runs the collected checks once
    per student that the CheckSession hands over."""

    def __init__(self, owner):
        self.owner = owner
        self.current = None
        self.records = {}  # node id -> {check, outcome, verdict}, for the current student
        self.plans = {}  # item -> direct_plan(item), made once: the items serve every student

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "check(id): the rubric check this test scores")
        config.stash[KIT_PLUGIN] = self

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """Each phase's report carries the check id and, when the phase ended in an exception,
        the verdict made of it (the report is plain data: the exception itself stays here)."""
        outcome = yield
        report = outcome.get_result()
        marker = item.get_closest_marker("check")
        report.kit_check = marker.args[0] if marker else None
        report.kit_verdict = (classify(call.excinfo.value)
                              if call.excinfo is not None and call.when in ("setup", "call")
                              else None)
        if report.kit_verdict is not None and report.kit_check:
            self.keep_drawn_call(report.kit_check, call.excinfo.value)

    def keep_drawn_call(self, check_id, exc):
        """The judged call a failing check's heatmap text was drawn from, kept for the feedback
        page under the check's id (the first failing part's), so the page's drawing and the
        card's text are the same numbers."""
        call = getattr(getattr(exc, "heatmap", None), "call", None)
        if call is not None:
            judged_maps(self.current).setdefault(check_id, call)

    def pytest_runtest_logreport(self, report):
        """One record per test: its check, the first verdict, passed only if every phase passed."""
        record = self.records.setdefault(report.nodeid, {
            "check": report.kit_check, "outcome": "passed", "verdict": None})
        if report.outcome != "passed":  # failed, or skipped: a check that did not run never passes
            record["outcome"] = "failed"
        if record["verdict"] is None:
            record["verdict"] = report.kit_verdict
        for name, value in report.user_properties:  # support.note(): said, and costs nothing
            if name == "kit_note" and "note" not in record:
                record["note"] = value

    def pytest_sessionstart(self, session):
        self.owner.restore_stdout()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """Instead of running the items once: run all of them for each student handed over.
        The last item runs with nextitem=None, which tears every fixture down (the session-scoped
        `student` included), so each student starts from nothing, as in a fresh session."""
        owner = self.owner
        # This thread computes: OpenMP keeps the thread count per thread (process.py).
        owner.threads_given = process.one_thread_here()
        process.release_gc()  # imported and collected: collect automatically from here on
        owner.ready.set()  # configured and collected: what follows is per student
        while True:
            request = owner.requests.get()
            if request is None:
                return True
            student, only = request
            began = time.thread_time()
            owner.results.put(self._run_items(session, student, only))
            owner.check_cpu += time.thread_time() - began

    def _run_items(self, session, student, only=None):
        """Every collected check against `student` (only those whose id is in `only`, where it
        is given): its parts, or the exception that ended it.  A check that asks only for the
        kit's fixtures is called here directly (run_directly); any other goes through pytest's
        own protocol, tearing its fixtures down after it."""
        self.current = student
        self.records = {}
        try:
            for item in session.items:
                if only is not None and check_of(item) not in only:
                    continue
                plan = self.plans.get(item, False)
                if plan is False:
                    plan = self.plans[item] = direct_plan(item)
                if plan is None:
                    item.user_properties.clear()  # the node outlives the student: notes do not
                    item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
                else:
                    self.run_directly(item, *plan)
            return parts_of(self.records)
        except BaseException as exc:  # noqa: B036 (handed to the caller, which raises it)
            return exc
        finally:
            self.current = None

    def run_directly(self, item, check_id, names, params):
        """The check's function called with the kit's fixtures and its parameters, recorded as
        pytest_runtest_logreport records a run (pytest's protocol around each check, its phases,
        reports and hooks, cost ~0.3 ms of the judge's CPU a check: 12-15 ms a submission)."""
        notes = []
        fixtures = {"student": self.current, "seed": self.current.seed,
                    "record_note": lambda name, value: notes.append((name, value))}
        record = {"check": check_id, "outcome": "passed", "verdict": None}
        try:
            item.obj(**{name: params[name] if name in params else fixtures[name]
                        for name in names})
        except (Exception, pytest.skip.Exception, pytest.fail.Exception) as exc:
            record.update(outcome="failed", verdict=classify(exc))
            if check_id:
                self.keep_drawn_call(check_id, exc)
        for name, value in notes:
            if name == "kit_note" and "note" not in record:
                record["note"] = value
        self.records[item.nodeid] = record


KIT_PLUGIN = pytest.StashKey()


@pytest.fixture(scope="session")
def student(request):
    """The judge-side proxy of the submission being graded (KitPlugin.current)."""
    return request.config.stash[KIT_PLUGIN].current


@pytest.fixture(scope="session")
def seed(request):
    """The submission's own seed (recorded in the report): checks draw fresh inputs from it
    with `support.fresh(seed, salt)`, so a regrade reproduces them."""
    return request.config.stash[KIT_PLUGIN].current.seed


@pytest.fixture
def record_note(request):
    """What a passing check could not judge here (support.note): kept with the test's
    report, said on its card, costing nothing."""
    return lambda name, value: request.node.user_properties.append((name, value))


KIT_FIXTURES = frozenset({"student", "seed", "record_note"})
# What the kit's own fixtures ask for in turn (each of them: request), never handed to a check.
KIT_FIXTURES_NEED = frozenset({"request"})


def visibility_of(item):
    """"public" or "hidden": the folder of the check's file."""
    return os.path.basename(os.path.dirname(str(item.path)))


def check_of(item):
    """The rubric check id a collected test scores (its `check` mark), or None."""
    marker = item.get_closest_marker("check")
    return marker.args[0] if marker else None


def direct_plan(item):
    """(check id, the function's argument names, its parameters) for a check the kit may call
    itself: a plain function whose arguments are the kit's fixtures and the parameters of its
    parametrize, with no other fixture in play (an autouse one, a module's setup); else None
    (pytest's protocol runs it)."""
    params = dict(getattr(getattr(item, "callspec", None), "params", {}))
    function = getattr(item, "obj", None)
    if not isinstance(item, pytest.Function) or item.cls is not None \
            or not inspect.isfunction(function):
        return None
    names = list(inspect.signature(function).parameters)
    if any(name not in KIT_FIXTURES and name not in params for name in names) \
            or any(name not in names and name not in KIT_FIXTURES_NEED
                   for name in item.fixturenames):
        return None
    return check_of(item), names, params


def check_files(visibilities):
    folders = [os.path.join(CHECKS_DIR, v) for v in ("public", "hidden") if v in visibilities]
    return [f for f in folders if os.path.isdir(f)]


def parts_of(records):
    """{check_id: [part, ...]}, part = {name, status, verdict}, from the plugin's records."""
    parts = {}
    for nodeid, record in records.items():
        if record["check"] is None:
            continue
        verdict = record["verdict"]
        status = "passed" if record["outcome"] == "passed" and verdict is None else \
            (verdict or {}).get("status", "error")
        part = {"name": nodeid.split("::")[-1], "status": status, "verdict": verdict}
        if record.get("note"):
            part["note"] = record["note"]
        parts.setdefault(record["check"], []).append(part)
    return parts


_STDOUT_SWAP = threading.Lock()


class CheckSession:
    """One pytest session whose checks are collected once and run against student after student.

    Configuring pytest and collecting the checks is half of the judge's time for one submission
    (~60 of ~125 ms CPU); a batch judge pays it once.  pytest.main runs in a thread of its own
    and waits in pytest_runtestloop for the next student; `run` hands one over and returns the
    parts.  One student at a time.
    """

    def __init__(self, visibilities=("public", "hidden")):
        self.requests, self.results = queue.Queue(), queue.Queue()
        self.plugin = KitPlugin(self)
        self.args = check_files(visibilities) + [
            "-q", "-p", "no:cacheprovider", "--noconftest",
            "-c", os.path.join(CHECKS_DIR, "pytest.ini"), "--rootdir", CHECKS_DIR,
            "--tb=no", "--no-header", "-s",
            # Built-in plugins the checks do not use and that cost the judge time per
            # submission (two gc.collect()s at exit, a log handler around every test phase, a
            # catch_warnings around each, the skip and xfail marks read for each: 6 of ~22 ms
            # for 50 checks that do nothing).
            *[arg for name in UNUSED_PLUGINS for arg in ("-p", f"no:{name}")],
        ]
        # What "-W ignore::..." said before the warnings plugin was left out: a check module the
        # judge imported first (the Gradescope run hardens that way) cannot be rewritten.
        warnings.filterwarnings("ignore", category=pytest.PytestAssertRewriteWarning)
        self.devnull = open(os.devnull, "w")  # pytest's own progress: the kit prints the report
        self.saved_stdout = None
        self.threads_given = None  # torch's threads on the check thread before it set 1
        # For the batch's CPU split: set once pytest is configured and the checks collected;
        # the check thread's CPU spent on students since.
        self.ready, self.check_cpu = threading.Event(), 0.0
        # Only the plugins the kit names: no third-party plugin installed beside it (xdist,
        # randomly, ...) is loaded into the judge.  pytest reads the variable while it configures
        # (in the thread), so it is restored only by close().
        self.autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self):
        # pytest's terminal reporter keeps the sys.stdout it finds when it is created: point it at
        # devnull only until the session starts (KitPlugin.pytest_sessionstart puts it back), under
        # a lock, so that two sessions starting in two threads cannot swap each other's stdout.
        _STDOUT_SWAP.acquire()
        self.saved_stdout, sys.stdout = sys.stdout, self.devnull
        try:
            # The kit's fixtures are this module's plain functions, which find the plugin through
            # the session's config (pytest deprecates session-scoped fixtures written as a plugin
            # object's methods): the module is handed to pytest as a plugin beside it.
            pytest.main(self.args, plugins=[self.plugin, sys.modules[__name__]])
            raise RuntimeError("the check session ended early (see the judge's log)")
        except BaseException as exc:  # noqa: B036 (raised in the caller's thread)
            self.results.put(exc)
        finally:
            self.restore_stdout()

    def restore_stdout(self):
        if self.saved_stdout is not None:
            sys.stdout, self.saved_stdout = self.saved_stdout, None
            _STDOUT_SWAP.release()

    def run(self, student, only=None):
        """Run every check (or those whose id is in `only`) against `student`; return
        {check_id: [part, ...]}."""
        if not self.thread.is_alive():
            raise RuntimeError("the check session is closed")
        self.requests.put((student, None if only is None else frozenset(only)))
        result = self.results.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def close(self):
        if self.thread.is_alive():
            self.requests.put(None)
            self.thread.join(timeout=30)
        if self.autoload is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = self.autoload
        self.devnull.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run(student, visibilities=("public", "hidden"), only=None):
    """Run the checks once; return {check_id: [part, ...]} with part = {name, status, verdict}."""
    with CheckSession(visibilities) as session:
        return session.run(student, only)
