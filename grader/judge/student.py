"""The judge-side proxy: `student.split_heads(x, 2)` reads like a local call, but runs in the worker.

Every call has a timeout.  A worker that dies, hangs or speaks nonsense raises WorkerFailure for
the call it was serving and is restarted for the next one; nothing here ever turns silence into a
result.  What comes back is plain data rebuilt by `wire.decode`.
"""
import copy
import re
import socket
import threading
import time

from grader.sandbox import launch as sandbox
from grader.sandbox.runtime import facts
from grader.sandbox.launch import WorkerFailure
from grader.sandbox.runtime import wire


# Calls that run the module's forward inside the worker cannot succeed once forward hangs; the
# contract's readers (describe, inject, read, scramble) never run it, so a hang leaves them be.
NEEDS_FORWARD = {"grads:": "forward:", "train_copy:": "forward:", "contract:grads": "forward:",
                 "call_on:attend": "call:attend"}


# The reserve (Student._left): seconds for all its calls, and the most of the budget a kind of
# call may have taken to be let in (a tenth of 120 s: any fast piece, never the slow one).
RESERVE_SECONDS, RESERVE_SHARE = 20.0, 0.1
# How torch words a NotImplementedError of the meta device (checks/public/check_device.py).
META_REFUSAL = re.compile(r"meta tensor|'Meta' backend|on meta tensors|device type meta", re.I)


class StudentError(Exception):
    """The student's code raised: type, message and the student's line (never a traceback)."""

    def __init__(self, info, during="call"):
        info = info if isinstance(info, dict) else {}
        self.type = str(info.get("type", "Exception"))[:80]
        mro = info.get("mro")
        self.mro = [str(n) for n in mro] if isinstance(mro, list) else [self.type]
        self.message = str(info.get("message", ""))[:500]
        self.line = info.get("line") if isinstance(info.get("line"), int) else None
        self.code = str(info.get("code") or "")[:200]
        self.during = during
        self.memory_limit = None
        self.not_defined = None  # the name the student's file does not define (Student._called)
        super().__init__(f"{self.type}: {self.message}")

    def is_a(self, name):
        return name in self.mro

    @property
    def not_implemented(self):
        """Nothing was attempted: the stub's raise, or the name is not defined at all.  torch's
        own NotImplementedError for a meta tensor (`Cannot copy out of meta tensor`, an operation
        without a meta kernel) is what finished code met on another device, no stub."""
        if self.not_defined is not None:
            return True
        return self.is_a("NotImplementedError") and not META_REFUSAL.search(self.message)

    def where(self):
        return f"attention.py:{self.line}: {self.code}" if self.line else "attention.py"


class Student:
    def __init__(self, work_dir, student_name="attention.py", limits=None, isolation="auto",
                 startup_seconds=None, max_starts=30, workers=None, source=None):
        from grader.judge.workers import WorkerSource

        # `work_dir`: the folder of the student's file, or a function that makes it on first
        # need (Submission.work_dir): a worker handed the text (forked into its namespaces, a
        # spare) never needs one.
        self._folder = work_dir if callable(work_dir) else (lambda: work_dir)
        self.student_name = student_name
        self.source_text = source  # the judge's own copy, read once before any worker started
        self.limits = limits or sandbox.Limits()
        # Where its workers come from (workers.py): a long-lived judge's fork server or spares,
        # else each a cold start.
        self.workers = workers or WorkerSource(isolation, self.limits, start="exec")
        self.isolation = self.workers.isolation
        self.startup_seconds = startup_seconds or self.workers.startup_seconds(self.limits)
        self.max_starts = max_starts
        self.worker, self.starts, self.next_id, self.spent = None, 0, 0, 0.0
        self.round_trips = 0  # requests sent: one may carry several calls (request_all)
        # The reserve: once the budget is used up (a slow attend, say), calls of a kind that took
        # almost none of it (the quiz's constants, the registries, split_heads) still run, on a
        # small second budget of their own, so one slow piece does not cost the others.
        self.spent_by_kind, self.reserve_spent, self.kind = {}, 0.0, None
        self.import_error = None    # StudentError or WorkerFailure: permanent for this submission
        self.names = []
        self.output = []            # captured stdout/stderr of every worker, for feedback
        self.events = []            # what went wrong with workers, for the report
        # A call that hung (or crashed the worker twice) will do it again: later calls of the same
        # kind fail at once with the same failure, so one endless loop cannot eat the whole
        # submission's time budget and starve the checks that never call it.
        self.poisoned, self.crashes = {}, {}
        self.devices_seen = None    # where the device checks ran (student.devices())
        self.known_constants = {}   # the file's names already read (student.constants())
        # cancel() from another thread (a newer save in `watch`, a signal handler): the workers
        # handed out are killed and no new one starts.  RLock: the SIGINT handler runs on the
        # main thread, possibly inside start().
        self.cancelled, self.adopted, self.lock = False, [], threading.RLock()
        # The first requests of checks asked ahead, in one round trip (speculation.py): by the
        # check's key, (the worker that answered, the calls, the outcomes); and
        # the one the running check may be answered from (expect).
        self.ahead, self.planned, self.ahead_failed = {}, None, False
        self.frame_bytes = 0  # the size of the last frame received

    @property
    def work_dir(self):
        return self._folder()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self):
        """Start a worker now (its torch import then overlaps with the judge's own work)."""
        with self.lock:
            return self._start()

    def _start(self):
        if self.worker is None and self.import_error is None:
            self._check_budget()
            if self.starts >= self.max_starts:
                raise WorkerFailure("budget", f"worker restarted {self.starts} times; giving up",
                                    f"运行你代码的进程已重启 {self.starts} 次，不再重试")
            self.starts += 1
            self.worker = self._spawn()
            self.frames = wire.FrameReader()  # what a worker sent is read from its stream only
            self.hello_pending = True
        return self

    def _spawn(self):
        """A new worker for this submission, from its source (workers.py)."""
        from grader.judge.workers import interrupt

        if self.cancelled:
            raise WorkerFailure("budget", "a newer save replaced this run",
                                "新的保存取代了这次检查")
        worker = self.workers.spawn(self._folder, self.student_name, self.limits, self.source)
        self.adopted.append(worker)
        if self.cancelled:  # cancelled by a signal handler while we were taking it
            interrupt(worker)
        return worker

    def cancel(self):
        """End this grading early, from any thread: the thread using the worker sees it die."""
        from grader.judge.workers import interrupt

        with self.lock:
            self.cancelled = True
            for worker in self.adopted:
                interrupt(worker)

    def _budget_used(self):
        seconds = f"{self.limits.submission_seconds:g}"
        return WorkerFailure("budget", f"the time budget of {seconds} s for this submission is "
                             "used up", f"这份提交的 {seconds} 秒时间预算已经用完")

    def _left(self):
        """Seconds left for the call of the current kind: the budget's, or the reserve's."""
        main = self.limits.submission_seconds - self.spent
        if main > 0:
            return main
        share = self.spent_by_kind.get(self.kind, 0.0) if self.kind else float("inf")
        if share <= RESERVE_SHARE * self.limits.submission_seconds:
            return max(RESERVE_SECONDS - self.reserve_spent, 0.0)
        return 0.0

    def _charge(self, seconds):
        """`seconds` of the student's time, on the budget (or the reserve once it is used up)."""
        if self.spent < self.limits.submission_seconds:
            self.spent += seconds
        else:
            self.reserve_spent += seconds
        if self.kind:
            self.spent_by_kind[self.kind] = self.spent_by_kind.get(self.kind, 0.0) + seconds

    def _check_budget(self):
        if self._left() <= 0:
            raise self._budget_used()

    def _await_hello(self):
        """Wait for the worker's greeting: its import time counts against the one budget."""
        began, self.prepared_seconds = time.monotonic(), 0.0
        left = self._left()
        try:
            hello = self._receive_hello(max(min(self.startup_seconds, left), 0.1))
        except WorkerFailure as failure:
            if failure.kind == "timeout" and left < self.startup_seconds:  # the budget cut it
                failure = self._budget_used()
            self.import_error = WorkerFailure(
                failure.kind, "while importing attention.py: " + failure.message,
                "导入 attention.py 时，" + failure.zh, during="import", **self._stuck_at())
            self._stop()
            raise self.import_error from None
        finally:
            self._charge(time.monotonic() - began - self.prepared_seconds)
        self.hello_pending = False
        if not isinstance(hello, dict) or "hello" not in hello:
            self._stop()
            raise WorkerFailure("protocol", "the worker did not greet", "运行你代码的进程没有按约定应答")
        if hello["hello"] is not True:
            self.import_error = StudentError(hello.get("error"), during="import")
            self._stop()
            raise self.import_error
        names = hello.get("names")
        self.names = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    def _receive_hello(self, seconds):
        """The worker's hello; before it, the worker may tell the line of the student's file its
        import is at (worker.import_telling_where): the latest is kept for a timeout to show.
        A cold worker's first message says that its own preparation is over (worker.main): the
        time until then is the kit's, not the student's (self.prepared_seconds)."""
        deadline, self.stuck_line = time.monotonic() + seconds, None
        began, first = time.monotonic(), True
        while True:
            try:
                message = self._receive(max(deadline - time.monotonic(), 0.01))
            except WorkerFailure as failure:
                if failure.kind != "timeout":
                    raise
                raise WorkerFailure("timeout", f"no answer within {seconds:g} s",
                                    f"{seconds:g} 秒内没有完成") from None
            if first and message == {"prepared": True}:  # sent before any student code ran
                self.prepared_seconds = time.monotonic() - began
                first = False
                continue
            first = False
            if not (isinstance(message, dict) and set(message) == {"stuck"}):
                return message
            if isinstance(message["stuck"], int) and not isinstance(message["stuck"], bool):
                self.stuck_line = message["stuck"]

    def _stuck_at(self):
        """{"where": "attention.py:N: code"} for the line the import was last seen at, the code
        taken from the judge's own copy of the file (the worker only names a line number)."""
        line = getattr(self, "stuck_line", None)
        if line is None:
            return {}
        try:
            lines = self.source().splitlines()
        except OSError:
            lines = []
        code = lines[line - 1][:200] if 0 < line <= len(lines) else ""
        return {"where": f"attention.py:{line}: {code}" if code else f"attention.py:{line}"}

    def close(self):
        self._stop()

    def _stop(self):
        if self.worker is not None:
            self.worker.kill()
            out, err = self.worker.stdout.text(), self.worker.stderr.text()
            if out.strip() or err.strip():
                self.output.append((out, err))
            self.worker = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- transport ---------------------------------------------------------------------------
    def _receive(self, seconds, expect_id=wire._NO_ID):
        deadline, channel = time.monotonic() + seconds, self.worker.channel

        def fill(view):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout
            channel.settimeout(remaining)
            return channel.recv_into(view, min(len(view), 1 << 20))

        try:
            header, payload = self.frames.read_frame(fill)
            self.frame_bytes = len(header) + len(payload)  # what ask_ahead keeps is capped
            return wire.decode(header, payload, expect_id=expect_id)
        except socket.timeout:
            self._fail("timeout", f"no answer within {seconds:g} s", f"{seconds:g} 秒内没有回答")
        except (EOFError, ConnectionError, OSError):
            self.worker.proc.wait(timeout=5) if self.worker.proc.poll() is None else None
            self._exited()
        except (wire.ProtocolError, ValueError, OverflowError) as exc:
            self._fail("protocol", f"malformed message from the worker ({exc})",
                       f"运行你代码的进程发回了无法解读的数据（{exc}）")

    def _exited(self):
        """The worker is gone: exit status 70 before its hello is the sandbox failing to start
        (the grader's own failure, never blamed on the student); any other end is the student's
        process ending (a student's own exit(70) after the hello included)."""
        before_hello = getattr(self, "hello_pending", True)
        if before_hello and self.worker.proc.poll() == facts.SANDBOX_FAILED:
            self._fail("sandbox", "the grader could not set up its sandbox (exit code 70)",
                       "评分器没能搭好运行代码的沙箱（退出码 70）")
        self._fail("crashed", f"worker exited ({self.worker.exit_description()})",
                   f"进程结束了（{self.worker.exit_description('zh')}）")

    def _fail(self, kind, message, zh=None):
        self.events.append({"kind": kind, "message": message})
        self._stop()
        raise WorkerFailure(kind, message, zh)

    def request(self, op, timeout=None, afresh=False, **args):
        """One call into the worker.  `afresh`: made even where an earlier call of its kind hung
        or crashed (a call expected to stop early, such as forward refusing a too-long input,
        must not be judged by another input's hang)."""
        return self.request_all([(op, args)], timeout, afresh)[0]

    def request_all(self, calls, timeout=None, afresh=False):
        """Calls [(op, args)] made in this order in one round trip, their answers in a list: the
        same as asking them one by one and stopping at the first that raises (its exception is
        raised, with `call_index` telling which one it was and `answers` what the calls before it
        answered; a WorkerFailure raised before anything was sent, for a kind of call that hung
        before, has neither).  Each answer has its own timeout
        and is charged to its own kind.  Follow-ups of a `new` address the block it made."""
        if not 0 < len(calls) <= wire.MAX_CALLS:
            raise ValueError(f"a request carries 1 to {wire.MAX_CALLS} calls, not {len(calls)}")
        ahead = self._answered_ahead(calls, timeout)  # only ever a check's first request
        if self.import_error is not None:
            raise self.import_error
        kinds = [f"{op}:{args.get('fn', args.get('action', ''))}" for op, args in calls]
        self.kind = kinds[0]
        for kind in () if afresh else kinds:
            for blocker in (kind, NEEDS_FORWARD.get(kind)):
                if blocker in self.poisoned:
                    raise self.poisoned[blocker]
        answers = []
        try:
            if ahead is None:
                self._send(calls)
            else:  # asked ahead of the check (ask_ahead): every answer is taken as if it came now
                self._check_budget()
            for kind in kinds:
                self.kind = kind
                answers.append(self._reply(timeout, follow_up=bool(answers)) if ahead is None
                               else self._replay(ahead[len(answers)], timeout, bool(answers)))
        except WorkerFailure as failure:
            # which call was being waited for, and what the ones before it answered
            failure.call_index, failure.answers = len(answers), answers
            kind = self.kind
            self.crashes[kind] = self.crashes.get(kind, 0) + 1
            if failure.kind == "timeout" or self.crashes[kind] >= 2:
                self.poisoned[kind] = WorkerFailure(
                    failure.kind, failure.message + " (an earlier call of the same kind)",
                    failure.zh + "（同类的前一次调用）", **failure.fields)
            raise
        except StudentError as error:
            error.call_index, error.answers = len(answers), answers  # the calls before it answered
            raise
        return answers

    def _send(self, calls):
        """The request carrying `calls`, sent to a worker that has said hello."""
        self._check_budget()
        self.start()
        if self.hello_pending:
            self._await_hello()
        began = time.monotonic()
        try:
            self.worker.channel.sendall(request_frame(calls, self.next_id + 1))
        except OSError:
            self._exited()
        finally:
            self._charge(time.monotonic() - began)
        self.round_trips += 1

    def _reply(self, timeout, follow_up=False):
        """The answer to the next call, waited for with its own timeout.  Where the budget is
        used up before a follow-up's answer, it fails as a call asked then would (the worker,
        which is making it anyway, is stopped: its answer must not meet the next request)."""
        if follow_up and self._left() <= 0:
            self._stop()
            raise self._budget_used()
        self.next_id += 1
        began = time.monotonic()
        try:
            seconds = min(timeout or self.limits.call_seconds, self._left())
            reply = self._receive(max(seconds, 0.1), expect_id=self.next_id)
        finally:
            self._charge(time.monotonic() - began)
        if not isinstance(reply, dict) or reply.get("id") != self.next_id:
            self._fail("protocol", "reply out of order or malformed", "应答的次序或格式不对")
        return self._answer_in(reply)

    def _answer_in(self, reply):
        """A reply's answer; the student's error raised; a reply with neither, the worker's."""
        if "error" in reply:
            error = StudentError(reply["error"])
            if error.is_a("MemoryError") or "can't allocate memory" in error.message:
                error.memory_limit = self.limits.memory_bytes  # the limit, not the student, said no
            raise error
        if "ok" not in reply:
            self._fail("protocol", "reply without a result", "应答里没有结果")
        return reply["ok"]

    # -- asked ahead (speculation.py) ---------------------------------------------------------
    def ask_ahead(self, plans, seconds):
        """Send the requests of `plans` [(key, calls)] to the worker together (a round
        trip for each AHEAD_BYTES of them) and keep what each call answered, for the check of
        that key to be answered from (expect, request_all).  Only to a worker that has said
        hello, for nothing is asked on the student's behalf before it.  Nothing is charged,
        counted or reported here: where a call does not answer within its timeout or within
        `seconds` for them all, or the worker dies or speaks nonsense, everything asked ahead is
        forgotten, the worker stopped (not counted against max_starts) and the checks ask for
        themselves as they would have; nothing is asked ahead for this submission again."""
        self.ahead = {}
        if not plans or not self.may_ask_ahead():
            return
        worker, events, deadline = self.worker, len(self.events), time.monotonic() + seconds
        kept = 0  # bytes of the answers kept
        try:
            for batch in _batches(plans, self.next_id + 1):
                began = time.monotonic()
                worker.channel.sendall(b"".join(frame for _, _, _, frame in batch))
                self.round_trips += 1
                for key, calls, first_id, _ in batch:
                    outcomes, size = [], 0
                    for offset in range(len(calls)):
                        self.next_id = first_id + offset
                        wait = min(self.limits.call_seconds, deadline - time.monotonic())
                        if wait <= 0:
                            raise WorkerFailure("timeout", "asked ahead for too long",
                                                "提前发出的调用等得太久")
                        reply = self._receive(wait, expect_id=self.next_id)
                        outcomes.append((reply, time.monotonic() - began))
                        size += self.frame_bytes
                        began = time.monotonic()
                        if "ok" not in reply:  # a dict of this id (_receive made sure)
                            break  # an error (the worker made no more of them) or nonsense
                    if kept + size <= AHEAD_KEEP_BYTES:  # else read, dropped, asked by its check
                        self.ahead[key] = (worker, calls, outcomes)
                        kept += size
                    self.next_id = first_id + len(calls) - 1
        except (WorkerFailure, OSError, wire.ProtocolError):
            self.ahead = {}
            del self.events[events:]  # the checks meet it again if it is the student's
            if self.worker is worker:
                self._stop()
            self.max_starts += 1
            self.ahead_failed = True

    def may_ask_ahead(self):
        """A worker that has said hello serves this submission, and nothing asked ahead of it
        went wrong (ask_ahead asks only then)."""
        return self.worker is not None and not self.hello_pending and self.import_error is None \
            and not self.cancelled and not self.ahead_failed

    def expect(self, key):
        """The check of `key` is about to run: its first request may be answered from ahead."""
        self.planned = self.ahead.pop(key, None)

    def _answered_ahead(self, calls, timeout):
        """The outcomes asked ahead for the running check, where this is its first request, has
        no timeout of its own (none is asked ahead: speculation.first_request) and is the same
        by value as the one asked ahead, of the worker still serving; else None."""
        planned, self.planned = self.planned, None
        if planned is None:
            return None
        from grader.judge import speculation

        worker, asked, outcomes = planned
        if timeout is not None or worker is not self.worker \
                or not speculation.same_calls(asked, calls):
            return None
        return outcomes

    def _replay(self, outcome, timeout, follow_up):
        """What _reply gives for an answer asked ahead: its time charged as the call's, a
        follow-up refused once the budget is used up, the call failing as a timeout where it
        took longer than the time left for it now, the student's error raised."""
        reply, seconds = outcome
        if follow_up and self._left() <= 0:
            self._stop()
            raise self._budget_used()
        limit = max(min(timeout or self.limits.call_seconds, self._left()), 0.1)
        if seconds > limit:
            self._charge(limit)
            self._fail("timeout", f"no answer within {limit:g} s", f"{limit:g} 秒内没有回答")
        self._charge(seconds)
        return self._answer_in(reply)

    # -- what the checks call -----------------------------------------------------------------
    def call(self, fn, *args, views=(), **kwargs):
        """Call the student's function; `views` = [(arg index, dim0, dim1)] are transposed (or
        [(arg index, [dims])] permuted) in the worker before the call, to hand the student a
        non-contiguous tensor."""
        return self._called(fn, lambda: self.request("call", **calling(fn, args, kwargs, views)))

    def _called(self, name, request):
        """The request's answer; a name the student's file does not define (the worker's lookup
        fails, and the file's own names, told at import, lack it) is no attempt, like a stub."""
        try:
            return request()
        except StudentError as exc:  # the lookup is the first call of a request (request_all)
            if exc.is_a("AttributeError") and exc.line is None and name not in self.names \
                    and getattr(exc, "call_index", 0) == 0:
                exc.not_defined = name
            raise

    def split_heads(self, x, heads):
        return self.call("split_heads", x, heads)

    def merge_heads(self, x):
        return self.call("merge_heads", x)

    def attend(self, q, k, v, mask=None, return_weights=False):
        return self.call("attend", q, k, v, mask=mask, return_weights=return_weights)

    def attend_twice(self, q, k, v, mask=None, return_weights=False):
        """[first, second]: attend on the same inputs twice, in one round trip (each call gets
        its own copy of the inputs, as two separate calls would)."""
        call = calling("attend", [q, k, v], {"mask": mask, "return_weights": return_weights})
        return self._called("attend", lambda: self.request_all([("call", call)] * 2))

    def call_each(self, fn, *arg_lists):
        """[answer of each]: the student's function `fn` on each list of arguments, in one round
        trip, each call made only where the one before it answered (request_all: an error tells
        its `call_index` and what the calls before it `answers`)."""
        calls = [("call", calling(fn, args, {})) for args in arg_lists]
        return self._called(fn, lambda: self.request_all(calls))

    def module(self, d_model, n_heads, max_len=None):
        return self.module_then([d_model, n_heads] + ([] if max_len is None else [max_len]))[0]

    def module_then(self, made_with, action=None, **args):
        """(block, answer): CausalSelfAttention(*made_with) and, in the same round trip, its
        first contract `action` (None: no action, answer None), made only where the block was."""
        calls = [("contract", dict(args, action=action))] if action else []
        block, answers = self.module_calls(made_with, calls)
        return block, (answers[0] if action else None)

    def module_calls(self, made_with, calls):
        """(block, [answer of each call]): CausalSelfAttention(*made_with) and, in the same round
        trip, `calls` [(op, args)] on it, each made only where the one before it answered: for
        calls a check makes one after the other whatever the answers (a round trip costs more CPU
        than most calls).  A StudentError's `call_index` counts from the first of `calls` (0; -1:
        the block itself was not made), and so does a WorkerFailure's where it has one (none:
        refused before it was sent); a StudentError of one of `calls` carries `block`, the block
        made."""
        request = [("new", {"args": list(made_with)})] + list(calls)
        try:
            answers = self._called("CausalSelfAttention", lambda: self.request_all(request))
        except StudentError as error:
            if error.call_index > 0:
                error.block = RemoteModule(self, error.answers[0])
            error.call_index -= 1
            raise
        except WorkerFailure as failure:
            if hasattr(failure, "call_index"):
                failure.call_index -= 1
            raise
        return RemoteModule(self, answers[0]), answers[1:]

    def devices(self):
        """The devices other than the CPU the worker can try (its claim: it only chooses where
        the device checks run; a start of CUDA there may take a while).  Asked once."""
        if self.devices_seen is None:
            found = self.request("devices", timeout=60)
            self.devices_seen = [d for d in found if d in ("meta", "cuda")] \
                if isinstance(found, list) else ["meta"]
        return self.devices_seen

    def call_on(self, fn, device, *args, dtype=None, **kwargs):
        """The student's function on these arguments moved to `device` (floating ones cast to
        `dtype`): a description of the result (placement.describe), never a tensor to trust."""
        return self.request("call_on", fn=fn, device=device, dtype=dtype, args=list(args),
                            kwargs=kwargs)

    def constants(self, names, along=()):
        """{name: value} of the module's names (a value the file lacks: {"$missing": True}).  Each
        name is asked once per submission and kept: the quiz's format check and its seven answer
        checks read the same seven names.  `along`: names asked in the same round trip where not
        kept yet; where that wider request fails, `names` are asked alone, so one name that cannot
        be read never fails another's check."""
        names = list(names)
        wanted = [n for n in dict.fromkeys(names) if n not in self.known_constants]
        if wanted:
            extra = [n for n in dict.fromkeys(along) if n not in self.known_constants
                     and n not in wanted]
            try:
                values = self.request("constants", names=wanted + extra)
            except StudentError:
                if not extra:
                    raise
                values = self.request("constants", names=wanted)
            if not isinstance(values, dict):
                return values  # judged as it came (a well-behaved worker always answers a dict)
            self.known_constants.update((n, values[n]) for n in wanted + extra if n in values)
        return {n: copy.deepcopy(self.known_constants[n]) for n in names
                if n in self.known_constants}

    def train_copy(self, seed, n_heads, timeout=None):
        return self._called("CausalSelfAttention", lambda: self.request(
            "train_copy", timeout=timeout, seed=seed, n_heads=n_heads))

    def source(self):
        """The student's file as text, for static checks: the judge's own copy, read before any
        worker ran (a worker may have replaced the file since); without one, the file, read once
        as a regular file of at most 2 MiB."""
        if self.source_text is None:
            import os

            from grader import safefs

            path = os.path.join(self.work_dir, self.student_name)
            self.source_text = safefs.read_regular(path, 2 * 1024 * 1024).decode("utf-8", "replace")
        return self.source_text

    def student_output(self):
        """Everything the student's code printed so far (capped), for feedback only."""
        parts = list(self.output)
        if self.worker is not None:
            parts.append((self.worker.stdout.text(), self.worker.stderr.text()))
        return "".join(out + err for out, err in parts)


# What ask_ahead keeps of the answers at most (the reference's: ~55 KiB): a file that answers
# larger has the rest asked by their checks, so the judge holds no more of its answers at once
# than when each check asks (a call made twice: two frames; tests/bench_judge_memory.py).
AHEAD_KEEP_BYTES = 1024 * 1024
# What one round trip of ask_ahead sends at most: a frame of this size or less sent in one call
# never waits for the worker to read (a stream socket's buffer here: 208 KiB), so the judge is
# reading the answers before the worker could block on writing them.
AHEAD_BYTES = 48 * 1024


def request_frame(calls, first_id):
    """The frame of one request carrying `calls` [(op, args)], its first call's id `first_id`."""
    (op, args), more = calls[0], [{"op": o, "args": a} for o, a in calls[1:]]
    request = {"id": first_id, "op": op, "args": args}
    if more:
        request["more"] = more
    return wire.encode(request)


def _batches(plans, first_id):
    """`plans` [(key, calls)] as round trips of at most AHEAD_BYTES: each a list of
    (key, calls, its first id, its frame); a plan whose frame cannot be made or is
    larger than that alone is left to its check."""
    batch, size = [], 0
    for key, calls in plans:
        try:
            frame = request_frame(calls, first_id)
        except (wire.ProtocolError, TypeError, ValueError):
            continue
        if len(frame) > AHEAD_BYTES:
            continue
        if size + len(frame) > AHEAD_BYTES:
            yield batch
            batch, size = [], 0
        batch.append((key, calls, first_id, frame))
        size += len(frame)
        first_id += len(calls)
    if batch:
        yield batch


def calling(fn, args, kwargs, views=()):
    """The arguments of a "call" request: the student's function `fn` on these arguments."""
    return {"fn": fn, "args": list(args), "kwargs": kwargs, "views": [list(v) for v in views]}


class RemoteModule:
    """A CausalSelfAttention instance living in the worker, addressed by handle."""

    def __init__(self, student, handle):
        self.student, self.handle, self.starts = student, handle, student.starts

    def _request(self, op, afresh=False, **args):
        return self._request_all([(op, args)], afresh)[0]

    def _request_all(self, calls, afresh=False):
        if self.student.starts != self.starts:
            raise WorkerFailure("crashed", "the worker holding this module was restarted",
                                "持有这个模块的进程已经重启")
        return self.student.request_all([(op, dict(args, handle=self.handle))
                                         for op, args in calls], afresh=afresh)

    def load(self, state):
        return self._request("load", state=state)

    def __call__(self, x, return_weights=False, afresh=False):
        return self._request("forward", afresh=afresh, x=x, return_weights=return_weights)

    def calls(self, calls):
        """[answer of each]: `calls` [(op, args)] on this block in one round trip, each made only
        where the one before it answered (Student.request_all)."""
        return self._request_all(calls)

    def twice(self, x, return_weights=False):
        """[first, second]: forward on the same input twice, in one round trip."""
        return self._request_all([("forward", {"x": x, "return_weights": return_weights})] * 2)

    def contract(self, action, **args):
        """The block through the contract's attribute names (the worker's contract.py)."""
        return self._request("contract", action=action, **args)

    def contract_twice(self, action, **args):
        """[first, second]: the same contract action twice, in one round trip."""
        return self._request_all([("contract", dict(args, action=action))] * 2)
