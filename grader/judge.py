"""The judge: a long-lived process grading one submission after another (started by dispatch.py).

It reads tasks on stdin (one JSON line each), writes each student's files (records.py) and
answers on stdout (one JSON line per task, then one with its peak memory and CPU).  A judge
imports torch and pytest once and grades many submissions: pytest is configured and the checks
collected once (runner.CheckSession), and each submission's worker is forked from one warm zygote
(forkserver.py) or, without the fork server, started cold.  Each submission still gets its own
fresh sandboxed worker (grader/sandbox.py), and the judge starts the next submission's worker
before it runs the current one's checks, so the worker's torch import overlaps the checks.  After
the checks, the same worker is probed once more for the page's attention heatmaps.
"""
import collections
import json
import os
import queue
import sys
import threading
import time

from .records import FORMAT, write_student

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
            from .manifest import flag_identity

            flag_identity(package, task["student"])  # the entry's name is who it is
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
    if zygote is not None:
        try:
            zygote.wait_ready()
        except RuntimeError as exc:  # e.g. no namespaces here: correct but slower, and said so
            print(f"warning: {exc}; every submission gets a cold worker instead", file=sys.stderr)
            zygote.close()
            zygote = spawner = None
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
            answers.write(json.dumps(answer) + "\n")  # ASCII: any string the student made survives
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
             "graded": graded}
    try:
        answers.write(json.dumps({"stats": stats}) + "\n")
        answers.flush()
    except (BrokenPipeError, OSError):
        pass
    return 0
