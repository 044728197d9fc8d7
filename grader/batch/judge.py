"""A batch's judge process: one submission after another (started by dispatch.py).

Tasks come on stdin, one JSON line each; each student's files are written (records.py) and one
JSON line per task answers on stdout, then one with the judge's CPU figures.  It grades through
one service.Judge (checks collected once, workers forked from its zygote or started cold).
"""
import json
import resource
import sys
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


def _grade(task, config, judge):
    """Grade one task's submission and write its files; the answer for the parent."""
    from grader import rubric
    from grader.judge.manifest import flag_identity
    from grader.judge.runner import kit_errors
    from grader.judge.submission import SubmissionError

    began = time.monotonic()
    record = {"format": FORMAT, "student": task["student"], "entry": task["entry"],
              "digest": task["digest"], "grader": config["fingerprint"]}
    try:
        sub, student = judge.begin(task["path"])
    except SubmissionError as exc:  # said in both languages, with the entry's name, never our path
        said = {lang: exc.said(lang).replace(task["path"], task["entry"]) for lang in ("zh", "en")}
        record.update(status="ungradable", error=said["en"], error_said=said, score=0,
                      max_score=sum(c.points for c in rubric.load().checks),
                      container=None, report=None, attention_maps=None)
    else:
        try:
            package = getattr(sub, "package", None)  # a `make submit` zip, verified
            if package is not None:
                flag_identity(package, task["student"])  # the entry's name is who it is
            data = judge.finish(sub, student, entry=task["entry"])  # closes the worker
        except Exception:
            student.close()
            raise
        for check_id, verdict in kit_errors(data):  # the kit's own error: loud, in batch.log
            print(f"kit error grading {task['entry']}, {check_id}: "
                  f"{verdict['fields'].get('message', '')}\n{verdict['traceback']}",
                  file=sys.stderr, flush=True)
        record.update(status="graded", error=None, score=data["score"],
                      max_score=data["max_score"], container=getattr(sub, "container", None),
                      report=data, attention_maps=attention_maps(student), package=package)
    record["seconds"] = round(time.monotonic() - began, 3)
    write_student(config["outdir"], record, config["lang"])
    return {"id": task["id"], "student": task["student"], "status": record["status"],
            "score": record["score"], "max_score": record["max_score"], "error": record["error"],
            "error_said": record.get("error_said")}


def _grade_or_report(task, config, judge):
    try:
        return _grade(task, config, judge)
    except Exception as exc:  # an internal error: reported, not written, retried next run
        import traceback

        traceback.print_exc()
        return {"id": task["id"], "student": task["student"], "status": "error",
                "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def _cpu():
    """(this process's CPU seconds, its waited-for children's)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


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
    startup_cpu = _cpu()[0]
    graded = 0
    for line in sys.stdin:
        if line.strip():
            serving.reply(answers, _grade_or_report(json.loads(line), config, judge))
            graded += 1
    # The judge's CPU after its start, and its workers' (a forked worker's is reported by the
    # zygote, which waits for it).
    server = judge.workers.server
    judge.close()
    judge_cpu, worker_cpu = _cpu()
    if server is not None:
        worker_cpu = server.child_cpu_seconds
    serving.reply(answers, {"stats": {"judge_cpu": judge_cpu - startup_cpu,
                                      "worker_cpu": worker_cpu, "graded": graded,
                                      "threads": session.threads_given}})
    return 0  # dispatch.py's JUDGE_CODE ends the process without the interpreter's teardown
