"""`python -m grader batch DIR --out OUTDIR`: a whole class, graded in parallel and resumably.

Each entry of DIR is one student (a .py, an .ipynb, a folder, a .zip or a cloned git repository);
the student id is the entry's name (for a `make submit` package: the id in its manifest, whose
hashes are verified; what does not match is noted in the report and the gradebook).  OUTDIR gets:

    students/<id>/report.json      the report data, the entry's content hash, the attention maps
    students/<id>/feedback.html    self-contained page, zh with en switchable
    students/<id>/feedback.md      Markdown (--lang)
    gradebook.csv                  student, entry, one column per check, total, max_score, status
    summary.json, summary.md, summary.html   histogram, per check and per named mistake
    batch.json                     the manifest: which entries this run (or shard) covers
    batch.log                      what the judge processes wrote to stderr

How it runs.  The parent process (no torch) lists and hashes the entries, skips every entry whose
report.json carries the same content hash and grader fingerprint, and hands the rest to --jobs
judge processes over pipes (one JSON line per task and per result).  A judge imports torch and
pytest once and grades many submissions; each submission still gets its own fresh sandboxed worker
(grader/sandbox.py), and the judge starts the next submission's worker before it runs the current
one's checks, so the worker's torch import overlaps the checks.  A judge writes a student's files
atomically (temporary file + os.replace), report.json last: a report.json that exists is complete,
so a batch killed at any moment (kill -9) and run again regrades only what is missing or changed.
The gradebook and the summary are rebuilt from the report files at the end of every run, so an
interrupted-then-resumed batch ends with the same gradebook as an uninterrupted one.  Nothing is
ever written inside DIR: entries are only read (zips in memory, folders by their attention file).
"""
import collections
import hashlib
import json
import os
import queue
import re
import stat
import subprocess
import sys
import threading
import time

from .statefile import write_atomic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRADER_DIR = os.path.join(ROOT, "grader")
STUDENTS = "students"
REPORT, PAGE, MARKDOWN = "report.json", "feedback.html", "feedback.md"
MANIFEST, LOG = "batch.json", "batch.log"
FORMAT = 1
SKIPPED_NAMES = {"__MACOSX", "__pycache__", "Thumbs.db"}
GRADABLE_SUFFIXES = (".py", ".ipynb", ".zip")
# Grader files that cannot change a report or a page: editing them does not force a regrade.
NOT_IN_FINGERPRINT = {"watch.py", "hints.py", "authoring.py", "__main__.py", "gradescope.py",
                      "batch.py", "submit.py"}


# -- entries -------------------------------------------------------------------------------------
class Entry:
    def __init__(self, name, path, student, digest):
        self.name, self.path, self.student, self.digest = name, path, student, digest

    def as_dict(self):
        return {"student": self.student, "entry": self.name, "digest": self.digest}


def _stem(name):
    for suffix in GRADABLE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _safe(name):
    """A file-system-safe id: letters (any script), digits, . _ - @ +; nothing else."""
    safe = re.sub(r"[^\w.@+-]", "_", name).strip(".") or "_"
    return safe[:120]


def assign_ids(names, preferred=None):
    """{entry name: student id}: the name without .py/.ipynb/.zip (or, for a `make submit`
    package, the id in its manifest: `preferred`); the full name where two entries would
    otherwise share an id (alice.py and alice.zip)."""
    preferred = preferred or {}
    first = {name: preferred.get(name) or _safe(_stem(name)) for name in names}
    counts = collections.Counter(first.values())
    ids = {name: (first[name] if counts[first[name]] == 1 else _safe(name)) for name in names}
    counts = collections.Counter(ids.values())
    for name in sorted(names):  # still equal (e.g. "a b.py" and "a_b.py"): number them
        if counts[ids[name]] > 1:
            base, n = ids[name], 2
            while f"{base}~{n}" in ids.values():
                n += 1
            ids[name] = f"{base}~{n}"
    return ids


def entry_digest(path):
    """sha256 of what the entry holds: a file's bytes, or a folder's relative paths and file
    bytes (symlinks by their target text, never followed; a repository's .git is left out)."""
    h = hashlib.sha256()
    if not os.path.isdir(path):
        h.update(b"file\0")
        _hash_file(h, path)
        return h.hexdigest()
    h.update(b"folder\0")
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not (root == path and d == ".git"))
        for name in sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(root, d))):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode("utf-8", "surrogateescape") + b"\0")
            if os.path.islink(full):
                h.update(b"link\0" + os.readlink(full).encode("utf-8", "surrogateescape"))
            else:
                _hash_file(h, full)
            h.update(b"\0")
    return h.hexdigest()


def _hash_file(h, path):
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block a read
            h.update(b"not a regular file")
            return
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        h.update(f"unreadable: {exc.strerror}".encode())


def list_entries(folder):
    """Every entry of `folder` (hidden files and OS litter left out), sorted by name."""
    from .manifest import student_in_zip

    names = sorted(n for n in os.listdir(folder)
                   if not n.startswith(".") and n not in SKIPPED_NAMES)
    packaged = {n: student_in_zip(os.path.join(folder, n)) for n in names
                if n.lower().endswith(".zip") and os.path.isfile(os.path.join(folder, n))}
    ids = assign_ids(names, {n: sid for n, sid in packaged.items() if sid})
    return [Entry(n, os.path.join(folder, n), ids[n], entry_digest(os.path.join(folder, n)))
            for n in names]


def grader_fingerprint():
    """sha256 over the grader files that decide a report or draw a page, and the reference."""
    h = hashlib.sha256()
    files = []
    for root, dirs, names in os.walk(GRADER_DIR):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "release_templates"))
        for name in names:
            if name.endswith((".py", ".toml", ".ini")) and not (
                    root == GRADER_DIR and name in NOT_IN_FINGERPRINT):
                files.append(os.path.join(root, name))
    files.append(os.path.join(ROOT, "solutions", "attention.py"))
    for path in sorted(files):
        h.update(os.path.relpath(path, ROOT).encode() + b"\0")
        _hash_file(h, path)
    return h.hexdigest()[:16]


def parse_shard(text):
    """'K/N' -> (K, N), 1 <= K <= N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ValueError(f"--shard wants K/N with 1 <= K <= N, e.g. 2/8 (got {text!r})")
    return int(match.group(1)), int(match.group(2))


def shard_of(student, n):
    """1..n, from a hash of the student id: stable when other entries come or go."""
    return int(hashlib.sha256(student.encode("utf-8")).hexdigest(), 16) % n + 1


# -- files ---------------------------------------------------------------------------------------


def read_record(outdir, student):
    try:
        with open(os.path.join(outdir, STUDENTS, student, REPORT), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("format") == FORMAT else None


def is_current(record, entry, fingerprint):
    return (record is not None and record.get("digest") == entry.digest
            and record.get("grader") == fingerprint and record.get("student") == entry.student
            and record.get("status") in ("graded", "ungradable"))


def _remove_leftovers(outdir):
    """Temporary files of writes a kill interrupted."""
    for root, _, files in os.walk(outdir):
        for name in files:
            if name.startswith(".tmp-"):
                try:
                    os.unlink(os.path.join(root, name))
                except OSError:
                    pass


def write_student(outdir, record, lang):
    """The student's page, Markdown and report.json, each atomically; report.json last."""
    from . import feedback_html, gradebook, rubric

    the_rubric = rubric.load()
    folder = os.path.join(outdir, STUDENTS, record["student"])
    os.makedirs(folder, exist_ok=True)
    write_atomic(os.path.join(folder, PAGE), feedback_html.student_page(the_rubric, record, lang))
    write_atomic(os.path.join(folder, MARKDOWN), gradebook.student_markdown(the_rubric, record, lang))
    write_atomic(os.path.join(folder, REPORT),
                 json.dumps(record, ensure_ascii=False, indent=1, allow_nan=False) + "\n")


# -- the judge: a long-lived process grading one submission after another -----------------------
PROBE_T, PROBE_D, PROBE_SEED = 6, 4, 20260612


def _grid(t):
    import math

    return [[None if not math.isfinite(v) else round(v, 4) for v in row]
            for row in t.double().tolist()]


def attention_maps(student):
    """The student's attention weights on one fixed small input beside the reference's, for the
    page's heatmaps: one call into the same worker after the checks (scores are already made).

    Two probes: the default causal mask, and an explicit band mask (itself and one back)."""
    import torch

    from .reference import ref
    from .student import StudentError, WorkerFailure

    if student.worker is None:
        return {"error": "the worker was not running any more after the checks"}
    T = PROBE_T
    g = torch.Generator().manual_seed(PROBE_SEED)
    q, k, v = (torch.randn(1, 1, T, PROBE_D, generator=g) for _ in range(3))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    band = causal & ~torch.ones(T, T, dtype=torch.bool).tril(-2)
    maps = {}
    for name, mask, allowed in (("causal", None, causal), ("band", band, band)):
        _, expected = ref.attend(q, k, v, mask=mask, return_weights=True)
        entry = {"T": T, "expected": _grid(expected[0, 0]), "allowed": allowed.tolist()}
        try:
            if student.worker is None:
                raise WorkerFailure("crashed", "the worker ended during an earlier probe")
            out = student.attend(q, k, v, mask=mask, return_weights=True)
            if not (isinstance(out, tuple) and len(out) == 2) or type(out[1]) is not torch.Tensor:
                raise ValueError(f"attend(..., return_weights=True) returned "
                                 f"{type(out).__name__}, not (context, weights)")
            weights = out[1]
            if weights.dim() < 2 or tuple(weights.shape[-2:]) != (T, T):
                raise ValueError(f"weights have shape {list(weights.shape)}, "
                                 f"expected [..., {T}, {T}]")
            w = weights.reshape(-1, T, T)[0].double()
        except StudentError as exc:
            entry["error"] = f"{exc.type}: {exc.message}"
        except WorkerFailure as exc:
            entry["error"] = f"{exc.kind}: {exc.message}"
        except (ValueError, RuntimeError, TypeError) as exc:
            entry["error"] = str(exc)[:300]
        else:
            nan = torch.isnan(w)
            entry["student"] = _grid(w)
            entry["leaks"] = (((w != 0) | nan) & ~allowed).tolist()
            entry["differs"] = (((w - expected[0, 0].double()).abs() > 1e-4) | nan).tolist()
        maps[name] = entry
    return maps


class _Started:
    """A submission whose worker is starting (or that cannot be graded: error is set)."""

    def __init__(self, task):
        self.task, self.began = task, time.monotonic()
        self.sub = self.student = self.error = self.crash = None


def _begin(task, isolation, limits, spawner=None):
    from . import grading
    from .submission import SubmissionError

    started = _Started(task)
    try:
        started.sub, started.student = grading.start(task["path"], isolation, limits, spawner)
    except SubmissionError as exc:
        started.error = str(exc).replace(task["path"], task["entry"])
    except Exception as exc:  # the grader's own trouble (e.g. no worker could start): not saved
        started.crash = exc
    return started


def _complete(started, config, session=None):
    from . import grading

    task = started.task
    if started.crash is not None:
        raise started.crash
    record = {"format": FORMAT, "student": task["student"], "entry": task["entry"],
              "digest": task["digest"], "grader": config["fingerprint"]}
    if started.error is not None:
        from . import rubric

        record.update(status="ungradable", error=started.error, score=0,
                      max_score=sum(c.points for c in rubric.load().checks), container=None,
                      report=None, attention_maps=None)
    else:
        student = started.student
        close = student.close
        student.close = lambda: None  # keep the worker for the heatmap probe after the checks
        try:
            data = grading.finish(started.sub, student, session=session)
            maps = attention_maps(student)
        finally:
            close()
        data["metadata"]["submission"] = task["entry"]
        package = getattr(started.sub, "package", None)  # a `make submit` zip, verified
        if package is not None:
            data["metadata"]["package"] = package
        record.update(status="graded", error=None, score=data["score"],
                      max_score=data["max_score"], container=getattr(started.sub, "container", None),
                      report=data, attention_maps=maps, package=package)
    record["seconds"] = round(time.monotonic() - started.began, 3)
    write_student(config["outdir"], record, config["lang"])
    return {"id": task["id"], "student": task["student"], "status": record["status"],
            "score": record["score"], "max_score": record["max_score"], "error": record["error"],
            "seconds": record["seconds"]}


def judge_main(argv):
    """Read tasks (JSON lines) on stdin, grade them, write the files, answer on stdout."""
    config = json.loads(argv[0])
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to the log, never into the answers
    sys.stdout = sys.stderr
    from . import sandbox

    limits = sandbox.Limits(**config["limits"])
    isolation, prefetch = config["isolation"], config["prefetch"]
    # One zygote per judge: torch is imported once, each submission's worker is a fork of it.
    from . import forkserver

    zygote = None
    if config.get("fork_server", True) and forkserver.supported(isolation):
        zygote = forkserver.ForkServer(isolation)
    spawner = zygote.spawn if zygote else None
    # The judge's own heavy imports now, while the zygote imports torch on the other core; then
    # pytest, configured and its checks collected once for all the submissions of this judge.
    from . import runner

    session = runner.CheckSession()
    inbox = queue.Queue()

    def read_tasks():
        for line in sys.stdin:
            if line.strip():
                inbox.put(json.loads(line))
        inbox.put(None)

    threading.Thread(target=read_tasks, daemon=True).start()
    ahead = collections.deque()  # started submissions, oldest first
    done, graded = False, 0
    while True:
        # Keep `prefetch` submissions starting behind the one being checked.
        while not done and len(ahead) <= prefetch:
            try:
                task = inbox.get(timeout=None if not ahead else 0.2)
            except queue.Empty:
                break
            if task is None:
                done = True
                break
            ahead.append(_begin(task, isolation, limits, spawner))
        if not ahead:
            break
        current = ahead.popleft()
        try:
            answer = _complete(current, config, session)
        except Exception as exc:  # an internal error: reported, not written, retried next run
            import traceback

            traceback.print_exc()
            answer = {"id": current.task["id"], "student": current.task["student"],
                      "status": "error", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            if current.student is not None:
                current.student.close()
        graded += 1
        try:
            answers.write(json.dumps(answer, ensure_ascii=False) + "\n")
        except (BrokenPipeError, OSError):
            pass  # the batch was killed: the files are written, the next run skips them
    for started in ahead:
        if started.student is not None:
            started.student.close()
    import resource

    # Peak resident memory (ru_maxrss, KiB on Linux): this judge, and its largest worker (a
    # forked worker's is reported by the zygote, which waits for it; shared pages count in full).
    session.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_kb, worker_cpu = children.ru_maxrss, children.ru_utime + children.ru_stime
    if zygote is not None:
        zygote.close()
        worker_kb, worker_cpu = zygote.peak_child_kb, zygote.child_cpu_seconds
    own = resource.getrusage(resource.RUSAGE_SELF)
    stats = {"judge_mb": own.ru_maxrss / 1024, "worker_mb": worker_kb / 1024,
             "judge_cpu": own.ru_utime + own.ru_stime, "worker_cpu": worker_cpu,
             "graded": graded, "fork_server": zygote is not None}
    try:
        answers.write(json.dumps({"stats": stats}) + "\n")
        answers.flush()
    except (BrokenPipeError, OSError):
        pass
    return 0


# -- the parent: dispatch, progress, class outputs ----------------------------------------------
class Progress:
    """count, rate and time left on stderr: a redrawn bar on a terminal, plain lines otherwise."""

    def __init__(self, total, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total, self.done, self.began = total, 0, time.monotonic()
        self.last_bar = 0.0

    def _status(self):
        elapsed = time.monotonic() - self.began
        rate = self.done / elapsed * 60 if elapsed > 0 and self.done else 0.0
        left = (self.total - self.done) / (rate / 60) if rate else None
        eta = "--:--" if left is None else f"{int(left // 60)}:{int(left % 60):02d}"
        return f"{self.done}/{self.total} · {rate:.1f}/min · {eta} left"

    def _bar(self):
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        return f"\r[{'#' * filled}{'.' * (width - filled)}] {self._status()}\033[K"

    def message(self, text):
        if self.tty:
            self.stream.write("\r\033[K" + text + "\n" + self._bar())
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def advance(self, answer):
        """One line per submission: its outcome, and the count, rate and time left."""
        self.done += 1
        if answer["status"] == "graded":
            text = f"{answer['student']}  {answer['score']:g}/{answer['max_score']:g}"
        elif answer["status"] == "ungradable":
            text = f"✗ {answer['student']}: 无法评分 cannot grade: {answer['error']}"
        else:
            text = (f"! {answer['student']}: 评分器错误 grader error: {answer['error']} "
                    f"(not saved; rerun to retry)")
        if self.tty:  # the bar is redrawn; only what needs attention stays on the screen
            if answer["status"] != "graded":
                self.message(text)
            self.stream.write(self._bar())
        else:
            self.stream.write(f"[{self.done}/{self.total}] {text} | {self._status()}\n")
        self.stream.flush()

    def tick(self):
        if self.tty and time.monotonic() - self.last_bar > 1:
            self.last_bar = time.monotonic()
            self.stream.write(self._bar())
            self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class _Judge:
    def __init__(self, number, config, events, log):
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        code = "import sys; from grader.batch import judge_main; sys.exit(judge_main(sys.argv[1:]))"
        self.number, self.outstanding, self.open = number, {}, True
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(config)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=log, cwd=ROOT, env=env, text=True, encoding="utf-8")
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        for line in self.proc.stdout:
            try:
                events.put((self, json.loads(line)))
            except ValueError:
                continue
        events.put((self, None))

    def send(self, task):
        self.outstanding[task["id"]] = task
        try:
            self.proc.stdin.write(json.dumps(task, ensure_ascii=False) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: its reader reports EOF and the task is retried

    def close_input(self):
        if self.open:
            self.open = False
            try:
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass

    def kill(self):
        try:
            self.proc.kill()
        except OSError:
            pass


def dispatch(tasks, jobs, config, progress, log, prefetch, stats=None):
    """Grade `tasks` on `jobs` judges; return {task id: answer}; `stats` gets each judge's peak
    memory.  A judge that dies has its
    tasks retried once on a new judge; a task that kills two judges is an error."""
    pending = collections.deque(tasks)
    stats = [] if stats is None else stats
    events, judges, answers = queue.Queue(), [], {}
    attempts = collections.Counter()
    per_judge = 1 + prefetch
    count = 0
    try:
        while pending or any(j.outstanding for j in judges):
            live = [j for j in judges if j.proc.poll() is None or j.outstanding]
            open_judges = [j for j in live if j.open]
            while pending and len(open_judges) < min(jobs, len(pending)):
                count += 1
                judge = _Judge(count, config, events, log)
                judges.append(judge)
                open_judges.append(judge)
            for judge in open_judges:
                while pending and len(judge.outstanding) < per_judge:
                    judge.send(pending.popleft())
            if not pending:
                for judge in open_judges:
                    judge.close_input()
            try:
                judge, answer = events.get(timeout=1.0)
            except queue.Empty:
                progress.tick()
                continue
            if answer is None:  # the judge ended: whatever it still held is retried once
                judge.proc.wait()
                judge.open = False
                for task in judge.outstanding.values():
                    attempts[task["id"]] += 1
                    if attempts[task["id"]] < 2:
                        pending.appendleft(task)
                    else:
                        answers[task["id"]] = {"id": task["id"], "student": task["student"],
                                               "status": "error",
                                               "error": "the grading process died twice on it"}
                        progress.advance(answers[task["id"]])
                judge.outstanding.clear()
                judges.remove(judge)
                continue
            if "stats" in answer:
                stats.append(answer["stats"])
                continue
            task = judge.outstanding.pop(answer.get("id"), None)
            if task is None:
                continue
            answers[task["id"]] = answer
            progress.advance(answer)
    finally:
        for judge in judges:
            judge.close_input()
        for judge in judges:
            try:
                judge.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                judge.kill()
        while True:  # the judges' last words: their peak memory
            try:
                _, answer = events.get_nowait()
            except queue.Empty:
                break
            if answer and "stats" in answer:
                stats.append(answer["stats"])
    return answers


def default_jobs():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _inside(child, parent):
    child, parent = os.path.realpath(child), os.path.realpath(parent)
    return os.path.commonpath([child, parent]) == parent


def run(args):
    from . import gradebook, sandbox

    source, outdir = os.path.abspath(args.dir), os.path.abspath(args.out)
    if not os.path.isdir(source):
        print(f"错误 error: {args.dir}: not a folder", file=sys.stderr)
        return 2
    if _inside(outdir, source):
        print(f"错误 error: --out {args.out} is inside {args.dir}; nothing may be written there",
              file=sys.stderr)
        return 2
    try:
        shard = parse_shard(args.shard) if args.shard else None
        isolation = sandbox.choose_isolation("bubblewrap" if args.require_sandbox else args.isolation)
    except (ValueError, RuntimeError) as exc:
        print(f"错误 error: {exc}", file=sys.stderr)
        return 2
    jobs = max(1, args.jobs or default_jobs())
    entries = list_entries(source)
    if shard:
        entries = [e for e in entries if shard_of(e.student, shard[1]) == shard[0]]
    os.makedirs(os.path.join(outdir, STUDENTS), exist_ok=True)
    _remove_leftovers(outdir)
    fingerprint = grader_fingerprint()
    manifest = {"format": FORMAT, "source": source, "grader": fingerprint,
                "shard": args.shard and f"{shard[0]}/{shard[1]}", "lang": args.lang,
                "isolation": isolation, "entries": [e.as_dict() for e in entries]}
    write_atomic(os.path.join(outdir, MANIFEST),
                 json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
    todo = [e for e in entries if not is_current(read_record(outdir, e.student), e, fingerprint)]
    limits = sandbox.Limits(call_seconds=args.call_timeout, memory_bytes=args.memory_mb * 2 ** 20)
    config = {"outdir": outdir, "lang": args.lang, "isolation": isolation,
              "limits": limits.describe(), "fingerprint": fingerprint,
              "prefetch": max(0, args.prefetch), "fork_server": not args.cold_workers}
    where = f" (shard {manifest['shard']})" if shard else ""
    from . import forkserver

    workers = ("forked from one warm zygote per process" if config["fork_server"]
               and forkserver.supported(isolation) else "one cold start per submission")
    print(f"{len(entries)} entries{where}: {len(entries) - len(todo)} up to date, grading "
          f"{len(todo)} with {min(jobs, len(todo)) or 0} processes; isolation {isolation}, "
          f"workers {workers}", file=sys.stderr)
    if isolation != "bubblewrap" and todo:
        print("warning: isolation process: submissions run as plain subprocesses, which can read "
              "what this user can read (README, Security); --require-sandbox refuses instead",
              file=sys.stderr)
    tasks = [{"id": i, "student": e.student, "entry": e.name, "path": e.path, "digest": e.digest}
             for i, e in enumerate(todo)]
    progress = Progress(len(tasks))
    began = time.monotonic()
    with open(os.path.join(outdir, LOG), "a", encoding="utf-8") as log:
        try:
            stats = []
            answers = dispatch(tasks, jobs, config, progress, log, config["prefetch"],
                               stats) if tasks else {}
        except KeyboardInterrupt:
            progress.close()
            print("interrupted: what was written is kept; run the same command to resume",
                  file=sys.stderr)
            return 130
    progress.close()
    seconds = time.monotonic() - began
    errors = [a for a in answers.values() if a["status"] == "error"]
    records = [read_record(outdir, e.student) or _missing(e) for e in entries]
    gradebook.write_class_outputs(outdir, records, args.lang)
    if tasks:
        memory = ""
        if stats:
            graded = sum(s["graded"] for s in stats) or 1
            memory = (f"; peak memory: judge {max(s['judge_mb'] for s in stats):.0f} MiB, "
                      f"worker {max(s['worker_mb'] for s in stats):.0f} MiB; CPU per submission: "
                      f"judge {sum(s['judge_cpu'] for s in stats) / graded:.2f} s, "
                      f"worker {sum(s['worker_cpu'] for s in stats) / graded:.2f} s")
        print(f"graded {len(tasks)} in {seconds:.1f} s ({len(tasks) / seconds * 60:.1f}/min, "
              f"{len(stats) or '?'} processes){memory}", file=sys.stderr)
    ungradable = sum(1 for r in records if r["status"] == "ungradable")
    print(f"{outdir}/gradebook.csv: {len(records)} rows ({ungradable} ungradable, "
          f"{len(errors)} not graded); summary.md, summary.html; students/<id>/feedback.html",
          file=sys.stderr)
    return 1 if errors else 0


def _missing(entry, why="not graded (grader error; run again)"):
    return {"format": FORMAT, "student": entry.student, "entry": entry.name,
            "digest": entry.digest, "status": "missing", "error": why, "score": 0,
            "max_score": None, "report": None}


def merge(args):
    """Join the outputs of shards (or of any batch runs) into one gradebook and summary."""
    from . import gradebook

    outdir = os.path.abspath(args.out)
    sources = [os.path.abspath(p) for p in args.outdirs]
    if outdir in sources:
        print("错误 error: --out must be a new folder, not one of the inputs", file=sys.stderr)
        return 2
    manifests = []
    for folder in sources:
        try:
            with open(os.path.join(folder, MANIFEST), encoding="utf-8") as handle:
                manifests.append((folder, json.load(handle)))
        except (OSError, ValueError):
            print(f"错误 error: {folder}: no {MANIFEST} (not a batch output)", file=sys.stderr)
            return 2
    fingerprints = {m["grader"] for _, m in manifests}
    if len(fingerprints) > 1:
        print(f"错误 error: the inputs were graded by different grader versions "
              f"({', '.join(sorted(fingerprints))}); regrade them with one version", file=sys.stderr)
        return 2
    chosen = {}
    for folder, manifest in manifests:
        for item in manifest["entries"]:
            seen = chosen.get(item["student"])
            if seen and seen[1]["digest"] != item["digest"]:
                print(f"错误 error: {item['student']} is in {seen[0]} and {folder} with different "
                      f"content", file=sys.stderr)
                return 2
            chosen.setdefault(item["student"], (folder, item))
    os.makedirs(os.path.join(outdir, STUDENTS), exist_ok=True)
    records = []
    for student in sorted(chosen):
        folder, item = chosen[student]
        record = read_record(folder, student)
        entry = Entry(item["entry"], None, student, item["digest"])
        if record is None or record.get("digest") != item["digest"]:
            records.append(_missing(entry, "not graded in its shard (run that shard again)"))
            continue
        target = os.path.join(outdir, STUDENTS, student)
        os.makedirs(target, exist_ok=True)
        for name in (PAGE, MARKDOWN, REPORT):  # report.json last, as in a run
            src = os.path.join(folder, STUDENTS, student, name)
            if os.path.exists(src):
                with open(src, encoding="utf-8") as handle:
                    write_atomic(os.path.join(target, name), handle.read())
        records.append(record)
    lang = manifests[0][1].get("lang", "zh")
    manifest = {"format": FORMAT, "merged_from": sources, "grader": fingerprints.pop(),
                "shard": None, "lang": lang,
                "entries": [dict(chosen[s][1]) for s in sorted(chosen)]}
    write_atomic(os.path.join(outdir, MANIFEST),
                 json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
    gradebook.write_class_outputs(outdir, records, lang)
    missing = [r for r in records if r["status"] == "missing"]
    for r in missing:
        print(f"! {r['student']}: {r['error']}", file=sys.stderr)
    print(f"{outdir}/gradebook.csv: {len(records)} rows from {len(sources)} outputs"
          f"{f', {len(missing)} not graded' if missing else ''}", file=sys.stderr)
    return 1 if missing else 0


def add_arguments(sub):
    """The `batch` and `merge` subcommands (called from grader/__main__.py)."""
    from . import sandbox

    p = sub.add_parser("batch", help="a folder of submissions: reports, pages, gradebook (instructors)")
    p.add_argument("dir", help="one entry per student: .py, .ipynb, folder, .zip or git repository")
    p.add_argument("--out", required=True, help="output folder (never inside DIR)")
    p.add_argument("--jobs", type=int, default=0, help="grading processes (default: the cores)")
    p.add_argument("--lang", choices=("zh", "en"), default="zh",
                   help="language of the Markdown and the page's first view")
    p.add_argument("--shard", help="K/N: grade only the K-th of N deterministic parts")
    p.add_argument("--prefetch", type=int, default=1,
                   help="submissions whose worker starts while one is checked (per process)")
    p.add_argument("--isolation", choices=("auto", "bubblewrap", "process"), default="auto")
    p.add_argument("--cold-workers", action="store_true",
                   help="start every worker with its own torch import instead of forking it from a "
                        "warm zygote (slower; the fork server is off anyway for bubblewrap as a "
                        "non-root user)")
    p.add_argument("--require-sandbox", action="store_true", help="refuse to grade without bubblewrap")
    p.add_argument("--call-timeout", type=float, default=sandbox.Limits.call_seconds)
    p.add_argument("--memory-mb", type=int, default=sandbox.Limits.memory_bytes // 2 ** 20)
    p = sub.add_parser("merge", help="join batch outputs (shards) into one gradebook")
    p.add_argument("outdirs", nargs="+", help="batch output folders")
    p.add_argument("--out", required=True, help="the merged output folder")


def main(args):
    return merge(args) if args.command == "merge" else run(args)
