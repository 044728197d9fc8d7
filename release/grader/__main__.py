"""Command line: `python -m grader grade SUBMISSION`, `check [SUBMISSION]`, `watch [SUBMISSION]`,
`hint [EXERCISE]` and `submit [SUBMISSION]` (and the batch's commands where grader/batch is)."""
import argparse
import contextlib
import os
import sys

from grader import options, process, words
from grader.judge.submission import SubmissionError

# The commands of release/ (students and one submission): for these the batch commands are not
# added to the parser, whose import would come before the worker of a `grade` could start.
ONE_SUBMISSION = ("grade", "check", "watch", "hint", "submit")

DEFAULT_EXERCISE = os.path.join("exercises", "attention.py")


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m grader",
                                     description="多头注意力练习评分器 · multi-head attention grader")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_grading(sub)
    _add_watch(sub)
    _add_hint(sub)
    _add_submit(sub)
    if not argv or argv[0] not in ONE_SUBMISSION:
        # instructors: batch, override, export (not in release/)
        with contextlib.suppress(ImportError):
            from grader.batch import engine

            engine.add_arguments(sub)
    return parser.parse_args(argv)


def _add_grading(sub):
    for name, help_text in (("grade", "every check, public and hidden (instructors)"),
                            ("check", "the public checks only (students)")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("submission", nargs="?" if name == "check" else None,
                       default=DEFAULT_EXERCISE if name == "check" else None,
                       help=".py, .ipynb, or a folder holding one")
        p.add_argument("--format", choices=("text", "json", "markdown", "gradescope"), default="text")
        options.add_lang(p)
        p.add_argument("--out", help="write the report here instead of stdout")
        options.add_isolation(p)
        options.add_limits(p, every=True)


def _add_watch(sub):
    p = sub.add_parser("watch", help="rerun the public checks on every save (students)")
    p.add_argument("submission", nargs="?", default=DEFAULT_EXERCISE, help="the .py file to watch")
    options.add_lang(p)
    p.add_argument("--poll", action="store_true",
                   help="poll the file instead of using watchfiles (network drives, tests)")
    options.add_isolation(p)
    # Shorter than check's: the public checks use tiny tensors, and an endless loop should not
    # hold the screen for long.
    options.add_limits(p, call_seconds=3.0)
    p.add_argument("--stats", help=argparse.SUPPRESS)  # JSON lines per screen: tests and bench
    p.add_argument("--worker-start", choices=("auto", "spare"), default="auto",
                   help=argparse.SUPPRESS)  # "spare": never fork (tests and bench of the spares)


def _add_hint(sub):
    p = sub.add_parser("hint", help="the next hint for an exercise, one level at a time (students)")
    p.add_argument("exercise", nargs="?", help="split_heads, merge_heads, attend, "
                   "CausalSelfAttention or quiz; default: the first unfinished one")
    p.add_argument("--submission", default=DEFAULT_EXERCISE,
                   help="the student's file: its hint state is kept beside it")
    options.add_lang(p)
    p.add_argument("--reset", action="store_true", help="start this exercise's hints again")
    options.add_isolation(p, require=False)
    options.add_limits(p, memory=False)


def _add_submit(sub):
    p = sub.add_parser("submit", help="check your work and package it for handing in (students)")
    p.add_argument("submission", nargs="?", default=DEFAULT_EXERCISE,
                   help="attention.py or attention.ipynb (or a folder holding one)")
    p.add_argument("--student", help="your student id (default: the one remembered beside your "
                   "file, else asked once)")
    p.add_argument("--out", help="folder for <student id>.zip (default: beside your file)")
    p.add_argument("--yes", action="store_true",
                   help="package even the untouched stub without asking")
    p.add_argument("--no-commit", action="store_true",
                   help="in a git checkout, do not commit the work file")
    options.add_lang(p)
    options.add_isolation(p, require=False)
    options.add_limits(p, memory=False)


def main(argv=None):
    process.pin_environment()  # before anything imports torch: judges, zygotes, their threads
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.command in ONE_SUBMISSION:
        process.hold_gc()  # a judge starts here: no collection until its checks are collected
    if args.command in ("batch", "override", "export"):
        from grader.batch import engine as batch

        return batch.main(args)
    if args.command == "submit":
        from grader.tools import submit

        return submit.main(args)
    if args.command in ("watch", "hint"):
        from grader.tools import hints, watch

        return (watch if args.command == "watch" else hints).main(args)
    return grade_command(args)


def grade_command(args):
    """`grade` and `check`: one submission graded, its report rendered where asked."""
    from grader.judge.service import Judge

    isolation, limits = options.isolation_of(args), options.limits_from(args)
    try:
        judge = Judge(limits, isolation)  # cold workers: one submission, nothing to keep warm
        sub, student = judge.begin(args.submission)
    except SubmissionError as exc:  # its reason names the student's files: inert
        from grader import inert

        said = exc.said(args.lang)
        print(words.text("cli", "error", args.lang) + inert.for_terminal(said),
              file=sys.stderr)
        return 2
    except RuntimeError as exc:  # --require-sandbox without bubblewrap (instructors)
        print(words.text("cli", "error", args.lang) + f"`{exc}`", file=sys.stderr)
        return 2
    visibilities = ("public",) if args.command == "check" else ("public", "hidden")
    try:
        data = judge.finish(sub, student, visibilities)
    finally:
        judge.close()
    text = render(data, args.format, args.lang)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return said_kit_errors(data, args.lang)


def said_kit_errors(data, lang):
    """Each check that failed through the kit's own code (not the submission's: its card says
    so) on stderr, with the traceback: exit status 1 where there was one, else 0."""
    from grader.judge.runner import kit_errors

    errors = kit_errors(data)
    for check_id, verdict in errors:
        print(words.text("cli", "error", lang) + f"{check_id}: {verdict['fields']['message']}\n"
              + verdict["traceback"], file=sys.stderr)
    return 1 if errors else 0


def render(data, fmt, lang):
    """The report in one format; a `make submit` zip's manifest lines follow text and Markdown."""
    from grader.render import package, report
    from grader import inert, rubric

    the_rubric = rubric.load()
    manifest = data["metadata"].get("package")
    if fmt == "text":
        text = report.to_text(the_rubric, data, lang, data["metadata"]["hidden_not_run"])
        return text + "".join(inert.for_terminal(line) + "\n"
                              for line in package.describe(manifest, lang))
    text = report.RENDERERS[fmt](the_rubric, data, lang)
    if fmt == "markdown" and manifest is not None:
        text += "".join(f"- {inert.markdown_inline(line)}\n"
                        for line in package.describe(manifest, lang))
    return text


if __name__ == "__main__":
    process.exit_now(main())
