"""`python -m grader batch DIR --out OUTDIR`: a whole class, graded in parallel and resumably.

Each entry of DIR is one student (a .py, an .ipynb, a folder, a .zip or a cloned git repository);
the student id is the entry's name, a `make submit` package's too (its manifest's hashes are
verified and its student id compared: what does not match is a flag in the report, the gradebook
and the class page, never a rename).  OUTDIR gets:

    students/<id>/report.json      the report data, the entry's content hash, the attention maps
    students/<id>/feedback.html    self-contained page, zh with en switchable
    students/<id>/feedback.md      Markdown (--lang)
    gradebook.csv                  student, entry, one column per check, total, max_score, status,
                                   note, parts
    summary.json, summary.md, summary.html   the students by need, what to reteach and who, the
                                   histogram, per check, near-copy groups, overrides and history
    mistakes.csv                   one row per cause to reteach and student
    similarity.csv, similarity/    every pair's figures; the code compared and the pairs cache
    overrides.json                 the TAs' overrides (`override`), applied at every rebuild
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
the outputs of shards.  After the grading the parent keeps each entry's code as the submission
loader read it (similarity/sources) and the rebuild compares the pairs it has not compared yet
(similarity.py), applies the overrides (overrides.py) and counts root causes (mistakes.py).
The `override` and `recipes` subcommands are registered here; their code is in overrides.py and
recipes.py.  Nothing is ever written inside DIR: entries are only read (zips in memory, folders
by their attention file).
"""
import hashlib
import json
import os
import sys
import time

from grader.batch.dispatch import Progress, SharedZygote, default_jobs, dispatch
from grader.batch.entries import Entry, hash_file, list_entries, parse_shard, shard_of
from grader.batch.records import (FORMAT, MANIFEST, MARKDOWN, PAGE, REPORT, STUDENTS, is_current,
                                  read_record, records_in, remove_leftovers)
from grader.batch import similarity
from grader.batch.similarity import THRESHOLD, keep_source
from grader import options, paths
from grader.inert import json_text
from grader.statefile import write_atomic

ROOT = paths.KIT_ROOT
LOG = "batch.log"
# What decides a report or draws a page: the judge (checks, reference, variants), the sandbox and
# its runtime, the renderers, the rubric and the vocabulary (words.toml); of the batch, the judge
# process (the heatmaps' data), the records (the pages' files) and the gradebook (which the
# records draw the Markdown with).
# Editing anything else (the class outputs, rebuilt on every run anyway) never forces a regrade.
FINGERPRINTED = ("judge", "sandbox", "render", "rubric.py", "rubric.toml", "words.py",
                 "words.toml", "paths.py",
                 "batch/judge.py", "batch/records.py", "batch/gradebook.py")


def grader_fingerprint():
    """sha256 over the grader files that decide a report or draw a page, and the reference."""
    h = hashlib.sha256()
    files = [paths.SOLUTION]
    for rel in FINGERPRINTED:
        path = os.path.join(paths.GRADER, rel)
        if os.path.isfile(path):
            files.append(path)
        for root, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            files += [os.path.join(root, n) for n in names if n.endswith((".py", ".toml", ".ini"))]
    for path in sorted(files):
        h.update(os.path.relpath(path, ROOT).encode() + b"\0")
        hash_file(h, path)
    return h.hexdigest()[:16]


def _inside(child, parent):
    child, parent = os.path.realpath(child), os.path.realpath(parent)
    return os.path.commonpath([child, parent]) == parent


def _refuse(text):
    print(f"错误 error: {text}", file=sys.stderr)
    return 2


def _check_arguments(args, source, outdir):
    """(shard, isolation), or an error message for the command line."""
    from grader.sandbox import launch as sandbox

    if not os.path.isdir(source):
        raise ValueError(f"{args.dir}: not a folder")
    if _inside(outdir, source):
        raise ValueError(f"--out {args.out} is inside {args.dir}; nothing may be written there")
    if not 0 < args.similarity <= 1:
        raise ValueError(f"--similarity wants a share in (0, 1], e.g. 0.7 (got {args.similarity})")
    shard = parse_shard(args.shard) if args.shard else None
    return shard, sandbox.choose_isolation(options.isolation_of(args))


def run(args):
    """`batch DIR --out OUTDIR`: list, skip what is current, grade the rest, rebuild the class."""
    from grader.batch import gradebook

    source, outdir = os.path.abspath(args.dir), os.path.abspath(args.out)
    try:
        shard, isolation = _check_arguments(args, source, outdir)
    except (ValueError, RuntimeError) as exc:
        return _refuse(exc)
    entries = list_entries(source)
    if shard:
        entries = [e for e in entries if shard_of(e.student, shard[1]) == shard[0]]
    os.makedirs(os.path.join(outdir, STUDENTS), exist_ok=True)
    remove_leftovers(outdir)
    fingerprint = grader_fingerprint()
    manifest = {"format": FORMAT, "source": source, "grader": fingerprint,
                "shard": args.shard and f"{shard[0]}/{shard[1]}", "lang": args.lang,
                "isolation": isolation, "similarity": args.similarity,
                "entries": [e.as_dict() for e in entries]}
    write_atomic(os.path.join(outdir, MANIFEST),
                 json_text(manifest, ensure_ascii=False, indent=1) + "\n")
    todo = [e for e in entries if not is_current(read_record(outdir, e.student), e, fingerprint)]
    limits = options.limits_from(args)
    config = {"outdir": outdir, "lang": args.lang, "isolation": isolation,
              "limits": limits.describe(), "fingerprint": fingerprint,
              "prefetch": max(0, args.prefetch), "fork_server": not args.cold_workers}
    jobs = max(1, args.jobs or default_jobs(len(todo)))  # an explicit --jobs is obeyed
    _announce(entries, todo, manifest, config, jobs)
    answers = _grade(todo, config, jobs)
    if answers is None:
        return 130
    for entry in entries:  # the code as the grader read it: the near-copies compare these
        keep_source(outdir, entry)
    records = [read_record(outdir, e.student) or _missing(e) for e in entries]
    gradebook.write_class_outputs(outdir, records, args.lang, args.similarity)
    errors = [a for a in answers.values() if a["status"] == "error"]
    ungradable = sum(1 for r in records if r["status"] == "ungradable")
    print(f"{outdir}/gradebook.csv: {len(records)} rows ({ungradable} ungradable, "
          f"{len(errors)} not graded); summary.md, summary.html; students/<id>/feedback.html",
          file=sys.stderr)
    return 1 if errors else 0


def _announce(entries, todo, manifest, config, jobs):
    from grader.sandbox import forkserver

    where = f" (shard {manifest['shard']})" if manifest["shard"] else ""
    processes = min(jobs, len(todo))
    shared = "shared by the processes" if SharedZygote.mode(config, processes) else "per process"
    workers = (f"forked from one warm zygote {shared}" if config["fork_server"]
               and forkserver.supported(config["isolation"]) else "one cold start per submission")
    print(f"{len(entries)} entries{where}: {len(entries) - len(todo)} up to date, grading "
          f"{len(todo)} with {processes or 0} processes; isolation "
          f"{config['isolation']}, workers {workers}", file=sys.stderr)
    if config["isolation"] != "bubblewrap" and todo:
        print("warning: isolation process: submissions run as plain subprocesses, which can read "
              "what this user can read (docs/security.md); --require-sandbox refuses instead",
              file=sys.stderr)


def _grade(todo, config, jobs):
    """{task id: answer} for the entries to grade; None when interrupted (^C)."""
    tasks = [{"id": i, "student": e.student, "entry": e.name, "path": e.path, "digest": e.digest}
             for i, e in enumerate(todo)]
    if not tasks:
        return {}
    progress, stats = Progress(len(tasks)), []
    began = time.monotonic()
    with open(os.path.join(config["outdir"], LOG), "a", encoding="utf-8") as log:
        try:
            answers = dispatch(tasks, jobs, config, progress, log, config["prefetch"], stats)
        except KeyboardInterrupt:
            progress.close()
            print("interrupted: what was written is kept; run the same command to resume",
                  file=sys.stderr)
            return None
    progress.close()
    _report_speed(len(tasks), time.monotonic() - began, stats)
    return answers


def _report_speed(count, seconds, stats):
    """The rate, the judges' and workers' peak memory and where a submission's CPU went."""
    print(f"graded {count} in {seconds:.1f} s ({count / seconds * 60:.1f}/min, "
          f"{len(stats) or '?'} processes){_cpu_split(stats)}", file=sys.stderr)


def _cpu_split(stats):
    """A judge's start (torch, pytest, the checks collected, its zygote) is paid once per judge:
    the CPU per submission is what each one adds (`make bench` prints the split)."""
    if not stats:
        return ""
    graded = sum(s["graded"] for s in stats) or 1

    def each(key):
        return sum(s.get(key) or 0 for s in stats) / graded
    startup = sum(s.get("startup_cpu") or 0 for s in stats)
    return (f"; peak memory: judge {max(s['judge_mb'] for s in stats):.0f} MiB, worker "
            f"{max(s['worker_mb'] for s in stats):.0f} MiB; CPU per submission: judge "
            f"{(sum(s['judge_cpu'] for s in stats) - startup) / graded:.3f} s (checks "
            f"{each('check_cpu'):.3f} s, pages {each('render_cpu'):.3f} s) + worker "
            f"{each('worker_cpu'):.3f} s, after a start of {startup / len(stats):.2f} s per "
            f"judge; compute threads per judge {max((s.get('threads') or 0) for s in stats)}")


def _missing(entry, why="not graded (grader error; run again)"):
    return {"format": FORMAT, "student": entry.student, "entry": entry.name,
            "digest": entry.digest, "status": "missing", "error": why, "score": 0,
            "max_score": None, "report": None}


def _read_manifests(sources):
    """[(folder, batch.json)] of the inputs; ValueError when one is no batch output or they were
    graded by different grader versions."""
    manifests = []
    for folder in sources:
        try:
            with open(os.path.join(folder, MANIFEST), encoding="utf-8") as handle:
                manifests.append((folder, json.load(handle)))
        except (OSError, ValueError):
            raise ValueError(f"{folder}: no {MANIFEST} (not a batch output)") from None
    fingerprints = {m["grader"] for _, m in manifests}
    if len(fingerprints) > 1:
        raise ValueError(f"the inputs were graded by different grader versions "
                         f"({', '.join(sorted(fingerprints))}); regrade them with one version")
    return manifests


def _choose_entries(manifests):
    """{student: (folder, entry)}; ValueError when two inputs hold one student differently."""
    chosen = {}
    for folder, manifest in manifests:
        for item in manifest["entries"]:
            seen = chosen.get(item["student"])
            if seen and seen[1]["digest"] != item["digest"]:
                raise ValueError(f"{item['student']} is in {seen[0]} and {folder} with different "
                                 f"content")
            chosen.setdefault(item["student"], (folder, item))
    return chosen


def _copy_student(folder, outdir, student):
    """The student's files (report.json last, as in a run) and the code the near-copies use."""
    target = os.path.join(outdir, STUDENTS, student)
    os.makedirs(target, exist_ok=True)
    for name in (PAGE, MARKDOWN, REPORT):
        _copy_text(os.path.join(folder, STUDENTS, student, name), os.path.join(target, name))
    saved = similarity.read_source(folder, student)
    if saved is not None:
        os.makedirs(os.path.dirname(similarity.source_path(outdir, student)), exist_ok=True)
        _copy_text(similarity.source_path(folder, student), similarity.source_path(outdir, student))


def _copy_text(src, dst):
    if os.path.exists(src):
        with open(src, encoding="utf-8") as handle:
            write_atomic(dst, handle.read())


def merge(args):
    """Join the outputs of shards (or of any batch runs) into one gradebook and summary; the
    pairs the shards compared are reused, the overrides of every input carried over."""
    from grader.batch import gradebook, overrides

    outdir = os.path.abspath(args.out)
    sources = [os.path.abspath(p) for p in args.outdirs]
    if outdir in sources:
        return _refuse("--out must be a new folder, not one of the inputs")
    if args.similarity is not None and not 0 < args.similarity <= 1:
        return _refuse(f"--similarity wants a share in (0, 1], e.g. 0.7 (got {args.similarity})")
    try:
        manifests = _read_manifests(sources)
        chosen = _choose_entries(manifests)
        carried, history = overrides.combine([outdir] + sources)
    except ValueError as exc:
        return _refuse(exc)
    os.makedirs(os.path.join(outdir, STUDENTS), exist_ok=True)
    records = []
    for student in sorted(chosen):
        folder, item = chosen[student]
        record = read_record(folder, student)
        if record is None or record.get("digest") != item["digest"]:
            entry = Entry(item["entry"], None, student, item["digest"])
            records.append(_missing(entry, "not graded in its shard (run that shard again)"))
            continue
        _copy_student(folder, outdir, student)
        records.append(record)
    similarity.merge_caches(outdir, sources)
    if carried or history:
        overrides.save(outdir, carried, history)
    lang = manifests[0][1].get("lang", "zh")
    threshold = args.similarity or manifests[0][1].get("similarity") or THRESHOLD
    manifest = {"format": FORMAT, "merged_from": sources, "grader": manifests[0][1]["grader"],
                "shard": None, "lang": lang, "similarity": threshold,
                "entries": [dict(chosen[s][1]) for s in sorted(chosen)]}
    write_atomic(os.path.join(outdir, MANIFEST),
                 json_text(manifest, ensure_ascii=False, indent=1) + "\n")
    gradebook.write_class_outputs(outdir, records, lang, threshold)
    missing = [r for r in records if r["status"] == "missing"]
    for r in missing:
        print(f"! {r['student']}: {r['error']}", file=sys.stderr)
    print(f"{outdir}/gradebook.csv: {len(records)} rows from {len(sources)} outputs"
          f"{f', {len(missing)} not graded' if missing else ''}", file=sys.stderr)
    return 1 if missing else 0


def rebuild(outdir):
    """The class outputs again from the folder's records (after an override): nothing regraded."""
    from grader.batch import gradebook

    manifest, records = records_in(outdir, missing=lambda item: _missing(
        Entry(item["entry"], None, item["student"], item["digest"])))
    return gradebook.write_class_outputs(outdir, records, manifest.get("lang", "zh"),
                                         manifest.get("similarity") or THRESHOLD)


def add_arguments(sub):
    """The `batch` and `merge` subcommands (called from grader/__main__.py)."""
    p = sub.add_parser("batch", help="a folder of submissions: reports, pages, gradebook (instructors)")
    p.add_argument("dir", help="one entry per student: .py, .ipynb, folder, .zip or git repository")
    p.add_argument("--out", required=True, help="output folder (never inside DIR)")
    p.add_argument("--jobs", type=int, default=0, help="grading processes (default: one per usable core, fewer where memory "
                   "is short or there are few submissions; docs/instructors.md, Speed)")
    options.add_lang(p, help="language of the Markdown and the page's first view")
    p.add_argument("--shard", help="K/N: grade only the K-th of N deterministic parts")
    p.add_argument("--prefetch", type=int, default=1,
                   help="submissions whose worker starts while one is checked (per process)")
    options.add_isolation(p)
    p.add_argument("--cold-workers", action="store_true",
                   help="start every worker with its own torch import instead of forking it from a "
                        "warm zygote (slower; the fork server is off anyway for bubblewrap as a "
                        "non-root user)")
    options.add_limits(p)
    p.add_argument("--similarity", type=float, default=THRESHOLD, help=SIMILARITY_HELP)
    p = sub.add_parser("merge", help="join batch outputs (shards) into one gradebook")
    p.add_argument("outdirs", nargs="+", help="batch output folders")
    p.add_argument("--out", required=True, help="the merged output folder")
    p.add_argument("--similarity", type=float, help=SIMILARITY_HELP + " (default: the shards')")
    from grader.batch import export, overrides, recipes

    overrides.add_arguments(sub)
    export.add_arguments(sub)
    recipes.add_arguments(sub)


SIMILARITY_HELP = (f"flag two submissions as near-copies when this share of one's own code "
                   f"(given code left out) is found in the other (default {THRESHOLD})")


def main(args):
    if args.command == "override":
        return override_command(args)
    if args.command == "recipes":
        from grader.batch import recipes

        return recipes.main(args)
    if args.command == "export":
        from grader.batch import export

        return export.main(args)
    return merge(args) if args.command == "merge" else run(args)


def override_command(args):
    """Record the override (set, change or remove), then rebuild the gradebook, the summary and
    the student's page; or list the overrides and their history."""
    from grader import rubric
    from grader.batch import overrides

    outdir = args.out = os.path.abspath(args.out)
    try:
        with open(os.path.join(outdir, MANIFEST), encoding="utf-8") as handle:
            students = {e["student"] for e in json.load(handle)["entries"]}
    except (OSError, ValueError, KeyError):
        print(f"错误 error: {outdir}: no {MANIFEST} (not a batch output)", file=sys.stderr)
        return 2
    if args.list:
        from grader import inert

        print("\n".join(inert.one_line(line) for line in overrides.history_lines(outdir)))
        return 0
    try:
        event = overrides.command(args, rubric.load(), students, read_record)
    except overrides.OverrideError as exc:
        print(f"错误 error: {exc}", file=sys.stderr)
        return 2
    rebuild(outdir)
    print(f"{event['action']} {args.student} {args.check}: {event['replaced']:g} -> "
          f"{event['score']:g} ({overrides.FILE}); gradebook.csv, summary and "
          f"students/{args.student}/feedback.html rebuilt", file=sys.stderr)
    return 0
