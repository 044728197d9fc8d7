"""A batch's judge process: one submission after another (started by dispatch.py).

Tasks come on stdin, one JSON line each; each student's files are written (records.py) and one
JSON line per task answers on stdout, then one with the judge's CPU figures.  It grades through
one service.Judge (checks collected once, workers forked from its zygote or started cold), and
starts the next submission's worker before it runs the current one's checks.
"""
import collections
import json
import queue
import sys
import threading
import time

from grader import process, words
from grader.batch.records import FORMAT, write_student
from grader.judge import serving

PROBE_T = 5  # the T of the attend checks whose judged weights the page draws


def _grid(t):
    import math

    return [[None if not math.isfinite(v) else round(v, 4) for v in row]
            for row in t.double().tolist()]


def attention_maps(student):
    """The page's heatmaps: the weights the checks judged (support.judged_maps), one [T, T] slice
    each, beside the reference's on the same inputs.  No call of its own into the worker."""
    import torch

    from grader.judge.checks.support import judged_maps
    from grader.judge.secret.reference import ref

    maps = {}
    for name, judged in judged_maps(student).items():
        q, k, mask, weights = (judged[key] for key in ("q", "k", "mask", "weights"))
        v = judged.get("v")  # the weights do not depend on v: a failing call's map keeps none
        v = torch.zeros(*q.shape[:-1], 1) if v is None else v
        t = q.shape[-2]
        allowed = torch.ones(t, t, dtype=torch.bool).tril() if mask is None else mask
        _, expected = ref.attend(q, k, v, mask=mask, return_weights=True)
        entry = {"T": t, "expected": _grid(expected), "allowed": allowed.tolist()}
        if weights is None:
            hung = getattr(student, "poisoned", {}).get("call:attend")
            timed_out = hung is not None and getattr(hung, "kind", None) == "timeout"
            entry["error"] = words.pair("batch_judge", "timed_out" if timed_out else "no_weights")
        else:
            w = weights.double()
            nan = torch.isnan(w)
            entry["student"] = _grid(w)
            entry["leaks"] = (((w != 0) | nan) & ~allowed).tolist()
            entry["differs"] = (((w - expected.double()).abs() > 1e-4) | nan).tolist()
        maps[name] = entry
    return maps


class _Started:
    """A submission whose worker is starting (or that cannot be graded: error is set)."""

    def __init__(self, task):
        self.task, self.began = task, time.monotonic()
        self.sub = self.student = self.error = self.crash = None


def _begin(task, judge):
    from grader.judge.submission import SubmissionError

    started = _Started(task)
    try:
        started.sub, started.student = judge.begin(task["path"])
    except SubmissionError as exc:  # said in both languages, with the entry's name, never our path
        started.error = {lang: exc.said(lang).replace(task["path"], task["entry"])
                         for lang in ("zh", "en")}
    except Exception as exc:  # the grader's own trouble (e.g. no worker could start): not saved
        started.crash = exc
    return started


def _complete(started, config, judge):
    """Grade a started submission and write its files."""
    task = started.task
    if started.crash is not None:
        raise started.crash
    record = {"format": FORMAT, "student": task["student"], "entry": task["entry"],
              "digest": task["digest"], "grader": config["fingerprint"]}
    if started.error is not None:
        from grader import rubric

        record.update(status="ungradable", error=started.error["en"], error_said=started.error,
                      score=0, max_score=sum(c.points for c in rubric.load().checks),
                      container=None, report=None, attention_maps=None)
    else:
        from grader.judge.manifest import flag_identity
        from grader.judge.runner import kit_errors

        package = getattr(started.sub, "package", None)  # a `make submit` zip, verified
        if package is not None:
            flag_identity(package, task["student"])  # the entry's name is who it is
        data = judge.finish(started.sub, started.student, entry=task["entry"])  # closes the worker
        for check_id, verdict in kit_errors(data):  # the kit's own error: loud, in batch.log
            print(f"kit error grading {task['entry']}, {check_id}: "
                  f"{verdict['fields'].get('message', '')}\n{verdict['traceback']}",
                  file=sys.stderr, flush=True)
        record.update(status="graded", error=None, score=data["score"],
                      max_score=data["max_score"],
                      container=getattr(started.sub, "container", None), report=data,
                      attention_maps=attention_maps(started.student), package=package)
    record["seconds"] = round(time.monotonic() - started.began, 3)
    write_student(config["outdir"], record, config["lang"])
    return {"id": task["id"], "student": task["student"], "status": record["status"],
            "score": record["score"], "max_score": record["max_score"], "error": record["error"],
            "error_said": record.get("error_said")}


def judge_main(argv):
    """Read tasks (JSON lines) on stdin, grade them, write the files, answer on stdout."""
    process.hold_gc()  # until the checks are collected (process.py)
    config = json.loads(argv[0])
    answers = serving.reply_channel()
    from grader.sandbox import launch as sandbox
    from grader.judge.service import Judge

    # The judge's own heavy imports (pytest, the checks) while its zygote imports torch.
    judge = Judge(sandbox.Limits(**config["limits"]), config["isolation"],
                  start="auto" if config["fork_server"] else "exec")
    session = judge.session(("public", "hidden"))
    judge.workers.ready()
    session.ready.wait(timeout=120)  # a session that failed to start says so at its first run
    startup_cpu = _process_cpu()
    graded = _grade_tasks(_task_inbox(), config, judge, answers)
    serving.reply(answers, {"stats": dict(_stats(judge, graded, startup_cpu),
                                          threads=session.threads_given)})
    return 0  # dispatch.py's JUDGE_CODE ends the process without the interpreter's teardown


def _process_cpu():
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _task_inbox():
    """A queue of the tasks read from stdin (a thread reads them), None after the last."""
    inbox = queue.Queue()

    def read_tasks():
        for line in sys.stdin:
            if line.strip():
                inbox.put(json.loads(line))
        inbox.put(None)

    threading.Thread(target=read_tasks, daemon=True).start()
    return inbox


def _grade_tasks(inbox, config, judge, answers):
    """Grade every task, the next submission's worker starting while one is checked; returns how
    many were graded."""
    ahead = collections.deque()  # started submissions, oldest first: at most two
    done, graded = False, 0
    while True:
        while not done and len(ahead) < 2:
            try:
                task = inbox.get(timeout=None if not ahead else 0.2)
            except queue.Empty:
                break
            if task is None:
                done = True
                break
            ahead.append(_begin(task, judge))
        if not ahead:
            break
        serving.reply(answers, _complete_or_report(ahead.popleft(), config, judge))
        graded += 1
    return graded


def _complete_or_report(started, config, judge):
    try:
        return _complete(started, config, judge)
    except Exception as exc:  # an internal error: reported, not written, retried next run
        import traceback

        traceback.print_exc()
        if started.student is not None:
            started.student.close()
        return {"id": started.task["id"], "student": started.task["student"],
                "status": "error", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def _stats(judge, graded, startup_cpu):
    """This judge's CPU after its start, and its workers' (a forked worker's is reported by the
    zygote, which waits for it).  Closes the judge."""
    import resource

    server = judge.workers.server
    judge.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_cpu = children.ru_utime + children.ru_stime
    if server is not None:
        worker_cpu = server.child_cpu_seconds
    return {"judge_cpu": _process_cpu() - startup_cpu, "worker_cpu": worker_cpu,
            "graded": graded}
