"""The judge-side proxy: `student.split_heads(x, 2)` reads like a local call, but runs in the worker.

Every call has a timeout.  A worker that dies, hangs or speaks nonsense raises WorkerFailure for
the call it was serving and is restarted for the next one; nothing here ever turns silence into a
result.  What comes back is plain data rebuilt by `wire.decode`.
"""
import contextlib
import copy
import os
import re
import socket
import threading
import time

from grader import safefs
from grader.sandbox import launch as sandbox
from grader.sandbox.runtime.limits import SANDBOX_FAILED
from grader.sandbox.launch import WorkerFailure
from grader.sandbox.runtime import wire
from grader.judge.submission import STUDENT_FILE
from grader.judge.workers import WorkerSource, interrupt

# Calls that run the module's forward inside the worker cannot succeed once forward hangs; the
# contract's readers (describe, inject, read, scramble) never run it, so a hang leaves them be.
NEEDS_FORWARD = {"grads:": "forward:", "train_copy:": "forward:", "contract:grads": "forward:",
                 "call_on:attend": "call:attend"}
# The reserve (Student._left): seconds for all its calls, and the most of the budget a kind of
# call may have taken to be let in (a tenth of 120 s: any fast piece, never the slow one).
RESERVE_SECONDS, RESERVE_SHARE = 20.0, 0.1
# How torch words a NotImplementedError of the meta device (checks/public/check_device.py).
META_REFUSAL = re.compile(r"meta tensor|'Meta' backend|on meta tensors|device type meta", re.I)
# The names the exercise asks the file for: one the file lacks, met by the student's own code
# (forward calling a merge_heads never written), is named as missing, like the judge's own lookup.
EXERCISE_NAMES = ("split_heads", "merge_heads", "attend", "CausalSelfAttention")
NAME_NOT_DEFINED = re.compile(r"^name '(\w+)' is not defined")
# How the worker's signed report of where the student's code is begins (worker.telling_where).
STUCK = b'{"stuck":'
# A call that overran its time while its worker's memory grew past MEMORY_NEAR of what the limit
# leaves above the worker's own start (torch's import alone maps ~0.75 GiB) is allocating without
# bound: it is waited for while its memory grows (MEMORY_STEP_SECONDS at a time, at most
# MEMORY_GRACE_SECONDS), so that the limit stops it with its own error and line; one that still
# does not answer is named by the memory limit, not as a timeout.
MEMORY_NEAR, MEMORY_GRACE_SECONDS, MEMORY_STEP_SECONDS = 0.25, 5.0, 0.5
MEMORY_GROWTH = 1 << 20  # resident bytes gained in a step that count as growing (pages written)
# What a kind of call is named in a card that says where the memory went.
CALLED = {"new": "CausalSelfAttention.__init__", "forward": "CausalSelfAttention.forward",
          "train_copy": "CausalSelfAttention", "contract": "CausalSelfAttention"}
MAX_STARTS = 30  # a worker restarted this often for one submission is given up on


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
        own NotImplementedError for a meta tensor is what finished code met on another device."""
        if self.not_defined is not None:
            return True
        return self.is_a("NotImplementedError") and not META_REFUSAL.search(self.message)

    def where(self):
        return f"attention.py:{self.line}: {self.code}" if self.line else "attention.py"


class Student:
    def __init__(self, work_dir, limits=None, isolation="auto", workers=None, source=None):
        # `work_dir`: the folder of the student's file, or a function that makes it on first
        # need (Submission.work_dir): a worker handed the text (forked, a spare) never needs one.
        self._folder = work_dir if callable(work_dir) else (lambda: work_dir)
        self.source_text = source  # the judge's own copy, read once before any worker started
        self.limits = limits or sandbox.Limits()
        self.workers = workers or WorkerSource(isolation, self.limits, start="exec")
        self.startup_seconds = self.workers.startup_seconds(self.limits)
        self.worker, self.starts, self.next_id, self.spent = None, 0, 0, 0.0
        self.round_trips = 0  # requests sent, one call each
        self.key, self.hello_pending, self.stuck_line = None, True, None
        # The reserve: once the budget is used up (a slow attend, say), calls of a kind that took
        # almost none of it (the quiz's constants, the registries, split_heads) still run, on a
        # small second budget of their own, so one slow piece does not cost the others.
        self.spent_by_kind, self.reserve_spent, self.kind = {}, 0.0, None
        self.import_error = None    # StudentError or WorkerFailure: permanent for this submission
        self.names = []
        self.memory_at_hello = None  # (counted, resident) bytes of the worker once it greeted
        self.refused_at_import = []
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

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self):
        """Start a worker now (its torch import then overlaps with the judge's own work)."""
        with self.lock:
            if self.worker is not None or self.import_error is not None:
                return self
            self._check_budget()
            if self.starts >= MAX_STARTS:
                raise WorkerFailure("budget", f"worker restarted {self.starts} times; giving up",
                                    f"运行你代码的进程已重启 {self.starts} 次，不再重试")
            if self.cancelled:
                raise WorkerFailure("budget", "a newer save replaced this run",
                                    "新的保存取代了这次检查")
            self.starts += 1
            self.worker = self.workers.spawn(self._folder, self.limits, self.source)
            self.adopted.append(self.worker)
            if self.cancelled:  # cancelled by a signal handler while we were taking it
                interrupt(self.worker)
            self.frames = wire.FrameReader()  # what a worker sent is read from its stream only
            self.key = None  # the worker's signing key, told before the student's import
            self.hello_pending = True
        return self

    def cancel(self):
        """End this grading early, from any thread: the thread using the worker sees it die."""
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
        """Wait for the worker's greeting, after its signing key: its import time counts against
        the one budget.  A cold worker first says its own preparation is over: the time until then
        is the kit's, not the student's."""
        began, prepared, first = time.monotonic(), 0.0, True
        left = self._left()
        seconds = max(min(self.startup_seconds, left), 0.1)
        deadline, self.stuck_line = began + seconds, None
        try:
            while True:
                hello = self._receive(max(deadline - time.monotonic(), 0.01))
                if first and hello == {"prepared": True}:  # sent before any student code ran
                    prepared, first = time.monotonic() - began, False
                elif self.key is None:
                    self._take_key(hello)
                else:
                    break
        except WorkerFailure as failure:
            if failure.kind == "timeout":
                failure = self._budget_used() if left < self.startup_seconds else WorkerFailure(
                    "timeout", f"no answer within {seconds:g} s", f"{seconds:g} 秒内没有完成")
            self.import_error = WorkerFailure(
                failure.kind, "while importing attention.py: " + failure.message,
                "导入 attention.py 时，" + failure.zh, during="import", **self._stuck_at())
            self.close()
            raise self.import_error from None
        finally:
            self._charge(time.monotonic() - began - prepared)
        self.hello_pending = False
        if not isinstance(hello, dict) or "hello" not in hello:
            self.close()
            raise WorkerFailure("protocol", "the worker did not greet", "运行你代码的进程没有按约定应答")
        if hello["hello"] is not True:
            self.import_error = StudentError(hello.get("error"), during="import")
            self.close()
            raise self.import_error
        names = hello.get("names")
        self.names = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
        self.memory_at_hello = self.worker.memory()
        self.refused_at_import = hello.get("refused")

    def _take_key(self, message):
        """The worker's first word, before any student code ran: the key every frame after it is
        signed with (wire.py), which the student's code cannot reach."""
        key = message.get("key") if isinstance(message, dict) and len(message) == 1 else None
        try:
            self.key = bytes.fromhex(key)
        except (TypeError, ValueError):
            self._fail("protocol", "the worker did not tell its key first",
                       "运行你代码的进程没有按约定应答")

    def _stuck_at(self):
        """{"where": "attention.py:N: code"} for the line the import or call was last seen at (the
        code from the judge's own copy: the worker only names a line)."""
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
        if self.worker is not None:
            self.worker.kill()
            out, err = self.worker.stdout.text(), self.worker.stderr.text()
            if out.strip() or err.strip():
                self.output.append((out, err))
            self.worker = None

    # -- transport ---------------------------------------------------------------------------
    def _receive(self, seconds, expect_id=wire._NO_ID, overtime=None):
        """The next message, waited for `seconds` (and what `overtime`, an Overtime, adds)."""
        deadline, channel = time.monotonic() + seconds, self.worker.channel

        def fill(view):
            nonlocal deadline
            while True:
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    channel.settimeout(remaining)
                    with contextlib.suppress(socket.timeout):
                        return channel.recv_into(view, min(len(view), 1 << 20))
                more = overtime.more() if overtime is not None else 0
                if more <= 0:
                    raise socket.timeout
                deadline = time.monotonic() + more

        try:
            while True:
                header, payload = self.frames.read_frame(fill, key=self.key)
                if payload or not header.startswith(STUCK):
                    return wire.decode(header, payload, expect_id=expect_id)
                # the line the student's code is at, told while it runs: kept for a timeout to
                # name, and the answer read on within the same deadline (and overtime)
                stuck = wire.decode(header, payload)
                if not (isinstance(stuck, dict) and set(stuck) == {"stuck"}):
                    raise wire.ProtocolError("a malformed report of where the code is")
                if isinstance(stuck["stuck"], int) and not isinstance(stuck["stuck"], bool):
                    self.stuck_line = stuck["stuck"]
        except socket.timeout:
            if overtime is not None and overtime.out_of_memory():  # the limit's, not a hang
                limit = f"{self.limits.memory_bytes / 2 ** 30:g} GiB"
                op, _, fn = (self.kind or "").partition(":")
                self._fail("memory_limit", f"still allocating near the memory limit of {limit}",
                           f"接近 {limit} 内存限制时仍在分配内存", limit=limit,
                           where=fn if op == "call" else CALLED.get(op, op))
            self._fail("timeout", f"no answer within {seconds:g} s", f"{seconds:g} 秒内没有回答",
                       **self._stuck_at())
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
        if getattr(self, "hello_pending", True) and self.worker.proc.poll() == SANDBOX_FAILED:
            self._fail("sandbox", "the grader could not set up its sandbox (exit code 70)",
                       "评分器没能搭好运行代码的沙箱（退出码 70）")
        self._fail("crashed", f"worker exited ({self.worker.exit_description()})",
                   f"进程结束了（{self.worker.exit_description('zh')}）")

    def _fail(self, kind, message, zh=None, **fields):
        self.events.append({"kind": kind, "message": message})
        self.close()
        raise WorkerFailure(kind, message, zh, **fields)

    def request(self, op, timeout=None, afresh=False, **args):
        """One call into the worker, in a round trip of its own; its answer, or the student's
        error raised.  `afresh`: made even where an earlier call of its kind hung or crashed (a
        call expected to stop early, such as forward refusing a too-long input, must not be
        judged by another input's hang)."""
        if self.import_error is not None:
            raise self.import_error
        self.kind = kind = f"{op}:{args.get('fn', args.get('action', ''))}"
        form = (kind, tuple(sorted(k for k, v in (args.get("kwargs") or {}).items()
                                   if v is not None and v is not False)), bool(args.get("views")))
        for blocker in () if afresh else (kind, NEEDS_FORWARD.get(kind), form):
            if blocker in self.poisoned:
                raise self.poisoned[blocker]
        try:
            return self._round_trip(op, args, timeout)
        except StudentError as error:
            if error.memory_limit:
                # Every question is tiny: code that fills the memory limit on one fills it on
                # the next of the same form (the same arguments given), and each would spend
                # seconds of the submission's one budget on it.  Another form may not (a default
                # mask built too large, an explicit one used as it is).
                self.poisoned[form] = copy.copy(error)
            raise
        except WorkerFailure as failure:
            self.crashes[kind] = self.crashes.get(kind, 0) + 1
            if failure.kind in ("timeout", "memory_limit") or self.crashes[kind] >= 2:
                # the line it was stuck on is the first card's to tell, not each later one's
                self.poisoned[kind] = WorkerFailure(
                    failure.kind, failure.message + " (an earlier call of the same kind)",
                    failure.zh + "（同类的前一次调用）",
                    **{k: v for k, v in failure.fields.items() if k != "where"})
            raise

    def _round_trip(self, op, args, timeout):
        """The request of one call, sent to a worker that has said hello, and its answer, waited
        for with its own timeout."""
        self._check_budget()
        self.start()
        if self.hello_pending:
            self._await_hello()
        self.next_id += 1
        began, self.stuck_line = time.monotonic(), None
        try:
            frame = wire.encode({"id": self.next_id, "op": op, "args": args})
            try:
                self.worker.channel.sendall(frame)
            except OSError:
                self._exited()
            self.round_trips += 1
            seconds = max(min(timeout or self.limits.call_seconds, self._left()), 0.1)
            overtime = Overtime(self, min(MEMORY_GRACE_SECONDS, self._left() - seconds))
            reply = self._receive(seconds, expect_id=self.next_id, overtime=overtime)
        finally:
            self._charge(time.monotonic() - began)
        if not isinstance(reply, dict) or reply.get("id") != self.next_id:
            self._fail("protocol", "reply out of order or malformed", "应答的次序或格式不对")
        if "error" in reply:
            error = StudentError(reply["error"])
            if error.is_a("MemoryError") or "can't allocate memory" in error.message:
                error.memory_limit = self.limits.memory_bytes  # the limit, not the student, said no
            missing = NAME_NOT_DEFINED.match(error.message) if error.is_a("NameError") else None
            if missing and missing.group(1) in EXERCISE_NAMES and missing.group(1) not in self.names:
                error.not_defined = missing.group(1)
            raise error
        if "ok" not in reply:
            self._fail("protocol", "reply without a result", "应答里没有结果")
        return reply["ok"]

    # -- what the checks call -----------------------------------------------------------------
    def call(self, fn, *args, views=(), **kwargs):
        """Call the student's function; `views` = [(arg index, dim0, dim1)] are transposed (or
        [(arg index, [dims])] permuted) in the worker before the call, to hand the student a
        non-contiguous tensor."""
        return self._called(fn, lambda: self.request(
            "call", fn=fn, args=list(args), kwargs=kwargs, views=[list(v) for v in views]))

    def _called(self, name, request):
        """The request's answer; a name the student's file does not define (the worker's lookup
        fails, and the file's own names, told at import, lack it) is no attempt, like a stub."""
        try:
            return request()
        except StudentError as exc:
            if exc.is_a("AttributeError") and exc.line is None and name not in self.names:
                exc.not_defined = name
            raise

    def split_heads(self, x, heads):
        return self.call("split_heads", x, heads)

    def merge_heads(self, x):
        return self.call("merge_heads", x)

    def attend(self, q, k, v, mask=None, return_weights=False):
        return self.call("attend", q, k, v, mask=mask, return_weights=return_weights)

    def module(self, d_model, n_heads, max_len=None):
        """A new CausalSelfAttention(d_model, n_heads[, max_len]) in the worker."""
        made_with = [d_model, n_heads] + ([] if max_len is None else [max_len])
        return RemoteModule(self, self._called("CausalSelfAttention",
                                               lambda: self.request("new", args=made_with)))

    def devices(self):
        """The devices other than the CPU the worker can try (its claim: it only chooses where
        the device checks run).  Asked once."""
        if self.devices_seen is None:
            found = self.request("devices", timeout=60)
            self.devices_seen = [d for d in found if d in ("meta", "cuda")] \
                if isinstance(found, list) else ["meta"]
        return self.devices_seen

    def refused(self):
        """The event names the worker's audit hook refused to the student's code so far
        (isolation.py; the worker's claim), or, where it cannot answer, what it said at import."""
        try:
            found = self.request("refused", timeout=10)
        except (StudentError, WorkerFailure):
            found = self.refused_at_import
        return sorted({str(e)[:60] for e in found}) if isinstance(found, list) else []

    def call_on(self, fn, device, *args, dtype=None, **kwargs):
        """The student's function on these arguments moved to `device` (floating ones cast to
        `dtype`): a description of the result (placement.describe), never a tensor to trust."""
        return self.request("call_on", fn=fn, device=device, dtype=dtype, args=list(args),
                            kwargs=kwargs)

    def constants(self, names):
        """{name: value} of the module's names (a value the file lacks: {"$missing": True}).  Each
        name is asked once per submission and kept."""
        names = list(names)
        wanted = [n for n in dict.fromkeys(names) if n not in self.known_constants]
        if wanted:
            values = self.request("constants", names=wanted)
            if not isinstance(values, dict):
                return values  # judged as it came (a well-behaved worker always answers a dict)
            self.known_constants.update((n, values[n]) for n in wanted if n in values)
        return {n: copy.deepcopy(self.known_constants[n]) for n in names
                if n in self.known_constants}

    def train_copy(self, seed, n_heads, timeout=None):
        return self._called("CausalSelfAttention", lambda: self.request(
            "train_copy", timeout=timeout, seed=seed, n_heads=n_heads))

    def source(self):
        """The student's file as text: the judge's own copy, read before any worker ran (a worker
        may have replaced the file since), else the file, read once."""
        if self.source_text is None:
            path = os.path.join(self._folder(), STUDENT_FILE)
            self.source_text = safefs.read_regular(path, 2 * 1024 * 1024).decode("utf-8", "replace")
        return self.source_text

    def student_output(self):
        """Everything the student's code printed so far (capped), for feedback only."""
        parts = list(self.output)
        if self.worker is not None:
            parts.append((self.worker.stdout.text(), self.worker.stderr.text()))
        return "".join(out + err for out, err in parts)


class Overtime:
    """More time for a call that overran its own while its worker's memory grows toward the limit
    (MEMORY_NEAR): each step is given only while the memory keeps growing, up to `most` seconds."""

    def __init__(self, student, most):
        self.student, self.most, self.given = student, max(most, 0.0), 0.0
        self.start = start = (student.memory_at_hello or (0, 0))[0]
        self.near = start + MEMORY_NEAR * max(student.limits.memory_bytes - start, 0)
        self.last, self.growing, self.let_go, self.reached = None, False, False, False

    def more(self):
        """Seconds more to wait: a first step where the worker holds more than at its hello (under
        load memory fills slowly), one per step while it grows, and one the first time it lets
        memory go (the limit stopped it: its error is on its way); 0 once it holds still (a hang
        that holds memory: a timeout), or the time allowed is given."""
        held = self.student.worker.memory()
        if held is None:
            self.growing = False
            return 0
        first, before = self.last is None, self.last
        self.growing = not first and (held[0] > before[0] or held[1] > before[1] + MEMORY_GROWTH)
        let_go = not first and not self.let_go and held[0] + MEMORY_GROWTH < before[0]
        self.let_go = self.let_go or let_go
        self.reached = self.reached or (self.growing and held[0] >= self.near)
        self.last = held
        grew = held[0] > self.start + MEMORY_GROWTH
        if not (first and grew or self.growing or let_go) or self.given >= self.most:
            return 0
        step = min(MEMORY_STEP_SECONDS, self.most - self.given)
        self.given += step
        return step

    def out_of_memory(self):
        """The call grew its memory past `near` and was still growing, or let it go, when its
        time ran out: the limit's to name, not a hang."""
        return self.reached and (self.growing or self.let_go)


class RemoteModule:
    """A CausalSelfAttention instance living in the worker, addressed by handle."""

    def __init__(self, student, handle):
        self.student, self.handle, self.starts = student, handle, student.starts

    def _request(self, op, afresh=False, **args):
        if self.student.starts != self.starts:
            raise WorkerFailure("crashed", "the worker holding this module was restarted",
                                "持有这个模块的进程已经重启")
        return self.student.request(op, afresh=afresh, handle=self.handle, **args)

    def load(self, state):
        return self._request("load", state=state)

    def __call__(self, x, return_weights=False, afresh=False):
        return self._request("forward", afresh=afresh, x=x, return_weights=return_weights)

    def contract(self, action, **args):
        """The block through the contract's attribute names (the worker's contract.py)."""
        return self._request("contract", action=action, **args)
