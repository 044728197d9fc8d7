"""`python -m grader batch DIR --out OUTDIR`: a whole class, graded in parallel and resumably.

Each entry of DIR is one student (.py, .ipynb, folder, .zip or git repository), its id the
entry's name (entries.py).  OUTDIR gets students/<id>/ (report.json, feedback.html,
feedback.md), gradebook.csv, summary.json/md/html, mistakes.csv, similarity.csv and similarity/
(the code compared, the pairs cache), overrides.json, batch.json (the entries this run covers)
and batch.log (the judges' stderr).  Nothing is ever written inside DIR.

The parent (no torch) lists and hashes the entries, skips those whose report.json carries the same
content hash and grader fingerprint (records.py), and hands the rest to --jobs judge processes
(dispatch.py, judge.py), which write report.json last: a batch killed at any moment and run again
regrades only what is missing or changed.  The class outputs are rebuilt from the report files at
the end of every run (gradebook.py), so a resumed batch ends as an uninterrupted one.  `override`
and `export` are registered here too.
"""
import hashlib
import os
import time

from grader.batch.dispatch import Progress, default_jobs, dispatch
from grader.batch.entries import hash_file, list_entries
from grader.batch.records import (FORMAT, MANIFEST, STUDENTS, is_current, read_manifest,
                                  read_record, records_in, remove_leftovers, write_manifest)
from grader.batch import similarity
from grader.batch.refusal import Refusal, refuse, say
from grader.batch.similarity import THRESHOLD
from grader import options, paths, words

ROOT = paths.KIT_ROOT
LOG = "batch.log"
# What decides a report or draws a page (the batch's judge, records and gradebook among them).
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


def _check_arguments(args, source, outdir):
    """The isolation; a Refusal (or the sandbox's RuntimeError) when the command cannot run."""
    from grader.sandbox import launch as sandbox

    if not os.path.isdir(source):
        raise Refusal("not_a_folder", dir=args.dir)
    if _inside(outdir, source):
        raise Refusal("out_inside", out=args.out, dir=args.dir)
    if not 0 < args.similarity <= 1:
        raise Refusal("similarity_range", got=args.similarity)
    return sandbox.choose_isolation(options.isolation_of(args))


def run(args):
    """`batch DIR --out OUTDIR`: list, skip what is current, grade the rest, rebuild the class."""
    from grader.batch import gradebook

    source, outdir = os.path.abspath(args.dir), os.path.abspath(args.out)
    try:
        isolation = _check_arguments(args, source, outdir)
    except (Refusal, RuntimeError) as exc:
        return refuse(exc, args.lang)
    entries = list_entries(source)
    os.makedirs(os.path.join(outdir, STUDENTS), exist_ok=True)
    remove_leftovers(outdir)
    fingerprint = grader_fingerprint()
    manifest = {"format": FORMAT, "source": source, "grader": fingerprint, "lang": args.lang,
                "isolation": isolation, "similarity": args.similarity,
                "entries": [{"student": e.student, "entry": e.name, "digest": e.digest}
                            for e in entries]}
    write_manifest(outdir, manifest)
    todo = [e for e in entries if not is_current(read_record(outdir, e.student), e, fingerprint)]
    limits = options.limits_from(args)
    config = {"outdir": outdir, "lang": args.lang, "isolation": isolation,
              "limits": limits.describe(), "fingerprint": fingerprint,
              "fork_server": not args.cold_workers, "verbose": args.verbose}
    jobs = max(1, args.jobs or default_jobs())  # an explicit --jobs is obeyed
    _announce(entries, todo, config, jobs)
    answers = _grade(todo, config, jobs)
    if answers is None:
        return 130
    for entry in entries:  # the code as the grader read it: the near-copies compare these
        similarity.keep_source(outdir, entry)
    records = [read_record(outdir, e.student) or _missing(e.student, e.name, e.digest)
               for e in entries]
    gradebook.write_class_outputs(outdir, records, args.lang, args.similarity,
                                  verbose=args.verbose)
    errors = [a for a in answers.values() if a["status"] == "error"]
    ungradable = sum(1 for r in records if r["status"] == "ungradable")
    say("done", args.lang, out=outdir, rows=len(records), ungradable=ungradable,
        not_graded=len(errors))
    return 1 if errors else 0


def _announce(entries, todo, config, jobs):
    """How many entries, how many to grade; with --verbose, how they are run."""
    from grader.sandbox import forkserver

    lang = config["lang"]
    say("entries", lang, n=len(entries), current=len(entries) - len(todo), todo=len(todo))
    if config["isolation"] != "bubblewrap" and todo:  # safety, not an internal: always said
        say("no_sandbox", lang)
    if config["verbose"] and todo:
        forked = config["fork_server"] and forkserver.supported(config["isolation"])
        say("verbose_setup", lang, isolation=config["isolation"], processes=min(jobs, len(todo)),
            workers=words.text("batch", "verbose_forked" if forked else "verbose_cold", lang))


def _grade(todo, config, jobs):
    """{task id: answer} for the entries to grade; None when interrupted (^C)."""
    tasks = [{"id": i, "student": e.student, "entry": e.name, "path": e.path, "digest": e.digest}
             for i, e in enumerate(todo)]
    if not tasks:
        return {}
    progress, stats = Progress(len(tasks), config["lang"]), []
    began = time.monotonic()
    with open(os.path.join(config["outdir"], LOG), "a", encoding="utf-8") as log:
        try:
            answers = dispatch(tasks, jobs, config, progress, log, stats)
        except KeyboardInterrupt:
            progress.close()
            say("interrupted", config["lang"])
            return None
    progress.close()
    seconds = time.monotonic() - began
    say("graded", config["lang"], count=len(tasks), seconds=f"{seconds:.1f}",
        rate=f"{len(tasks) / seconds * 60:.1f}")
    if config["verbose"] and stats:  # the judges' and workers' CPU, each judge's start apart
        graded = sum(s["graded"] for s in stats) or 1
        say("verbose_speed", config["lang"], processes=len(stats),
            judge_cpu=f"{sum(s['judge_cpu'] for s in stats) / graded:.3f}",
            worker_cpu=f"{sum(s['worker_cpu'] for s in stats) / graded:.3f}",
            threads=max((s.get("threads") or 0) for s in stats))
    return answers


def _missing(student, entry, digest):
    """The record of an entry with no report, its why said in both languages."""
    said = words.pair("batch", "not_graded")
    return {"format": FORMAT, "student": student, "entry": entry, "digest": digest,
            "status": "missing", "error": said["en"],
            "error_said": said, "score": 0, "max_score": None, "report": None}


def override_command(args):
    """`override`: record the override (set, change or remove), then rebuild the gradebook, the
    summary and the student's page; or list the overrides and their history."""
    from grader import inert
    from grader.batch import overrides
    from grader.batch.roster import ACTION_WORDS

    outdir = args.out = os.path.abspath(args.out)
    manifest = read_manifest(outdir)
    lang = args.lang or (manifest or {}).get("lang")  # the batch's language, else zh
    lang = lang if lang in options.LANGS else "zh"
    if manifest is None:
        return refuse(Refusal("no_manifest", folder=outdir, manifest=MANIFEST), lang)
    if args.list:
        try:
            print("\n".join(inert.one_line(line) for line in overrides.history_lines(outdir, lang)))
        except Refusal as exc:
            return refuse(exc, lang)
        return 0
    students = {e["student"] for e in manifest["entries"]}
    try:
        event = overrides.record_command(args, students)
    except Refusal as exc:
        return refuse(exc, lang)
    rebuild(outdir)
    say("override_done", lang, action=words.text("roster", ACTION_WORDS[event["action"]], lang),
        student=args.student, check=args.check, was=f"{event['replaced']:g}",
        score=f"{event['score']:g}", file=overrides.FILE)
    return 0


def rebuild(outdir):
    """The class outputs again from the folder's records (after an override): nothing regraded."""
    from grader.batch import gradebook

    manifest, records = records_in(outdir, missing=lambda item: _missing(
        item["student"], item["entry"], item["digest"]))
    return gradebook.write_class_outputs(outdir, records, manifest.get("lang", "zh"),
                                         manifest.get("similarity") or THRESHOLD)


def add_arguments(sub):
    """The `batch` subcommand and the TA's commands on its output (called from
    grader/__main__.py)."""
    p = sub.add_parser("batch", help="a folder of submissions: reports, pages, gradebook (instructors)")
    p.add_argument("dir", help="one entry per student: .py, .ipynb, folder, .zip or git repository")
    p.add_argument("--out", required=True, help="output folder (never inside DIR)")
    p.add_argument("--jobs", type=int, default=0, help="grading processes (default: one per usable core, fewer where memory "
                   "is short or there are few submissions; docs/instructors.md, Speed)")
    options.add_lang(p, help="language of the Markdown and the page's first view")
    options.add_isolation(p)
    p.add_argument("--cold-workers", action="store_true",
                   help="start every worker with its own torch import instead of forking it from a "
                        "warm zygote (slower; the fork server is off anyway for bubblewrap as a "
                        "non-root user)")
    options.add_limits(p)
    p.add_argument("--similarity", type=float, default=THRESHOLD,
                   help=f"flag two submissions as near-copies when this share of one's own code "
                        f"(given code left out) is found in the other (default {THRESHOLD})")
    p.add_argument("--verbose", action="store_true",
                   help="also say how it ran: isolation, worker processes, CPU per submission, "
                        "compute threads, pairs compared")
    from grader.batch import export, overrides

    overrides.add_arguments(sub)
    export.add_arguments(sub)


def main(args):
    from grader.batch import export

    commands = {"override": override_command, "export": export.main}
    return commands.get(args.command, run)(args)
