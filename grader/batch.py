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

How it runs, one module per stage.  The parent process (no torch) lists and hashes the entries
(entries.py), skips every entry whose report.json carries the same content hash and grader
fingerprint (records.py), and hands the rest to --jobs judge processes (dispatch.py).  A judge
(judge.py) imports torch and pytest once, grades many submissions, each in its own fresh sandboxed
worker, and writes each student's files atomically, report.json last, so a batch killed at any
moment (kill -9) and run again regrades only what is missing or changed.  This module is the CLI:
the gradebook and the summary are rebuilt from the report files at the end of every run, so an
interrupted-then-resumed batch ends with the same gradebook as an uninterrupted one; `merge` joins
the outputs of shards.  Nothing is ever written inside DIR: entries are only read (zips in memory,
folders by their attention file).
"""
import hashlib
import json
import os
import sys
import time

from .dispatch import Progress, default_jobs, dispatch
from .entries import Entry, hash_file, list_entries, parse_shard, shard_of
from .records import (FORMAT, MARKDOWN, PAGE, REPORT, STUDENTS, is_current, read_record,
                      remove_leftovers)
from .statefile import write_atomic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRADER_DIR = os.path.join(ROOT, "grader")
MANIFEST, LOG = "batch.json", "batch.log"
# Grader files that cannot change a report or a page: editing them does not force a regrade.
# (judge.py, which draws the heatmaps' data, and records.py, which writes the pages, can: they
# are in.  The scheduling, the folder listing and the CLI are not.)
NOT_IN_FINGERPRINT = {"watch.py", "warm.py", "kernel_judge.py", "hints.py", "authoring.py", "__main__.py", "gradescope.py",
                      "batch.py", "submit.py", "entries.py", "dispatch.py"}


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
        hash_file(h, path)
    return h.hexdigest()[:16]


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
    remove_leftovers(outdir)
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
