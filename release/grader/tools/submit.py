"""`python -m grader submit [SUBMISSION] [--student ID]` (`make submit`): check the work, package it.

1. The student id: --student, else the one remembered beside the work, else asked once.
2. The work is imported in the sandboxed worker; one that does not import is never packaged.
3. The untouched stub is packaged only after a yes (--yes for scripts; nobody at the terminal:
   refused).
4. The public checks run in the same worker; failing ones are listed, they do not block.
5. `<student id>.zip` beside the work (--out elsewhere): the work file and manifest.json, read
   back and verified.
6. In a git checkout the work file alone is committed (never pushed).
"""
import ast
import datetime
import io
import os
import re
import subprocess
import sys
import zipfile

from grader import options, rubric as rubric_module, statefile, words
from grader.judge import grading, manifest, submission as submission_module
from grader.judge.student import Student, StudentError, WorkerFailure
from grader.judge.submission import SubmissionError
from grader.render.report import check_line, plural, points, still_hidden

STATE_VERSION = 1
# The pieces the stub leaves to the student; the quiz answers are the module's Q<n>_* names.
PIECES = ("split_heads", "merge_heads", "attend", "CausalSelfAttention.__init__",
          "CausalSelfAttention.forward")
ANSWER = re.compile(r"^Q\d+_\w+$")


def state_path(work):
    """Beside the work: release/attention.py -> release/.attention-submit.json."""
    return statefile.beside(work, "submit")


# -- is it still the stub? -----------------------------------------------------------------------
def _raises_not_implemented(body):
    for node in body:
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id == "NotImplementedError":
                return True
    return False


def stub_state(source):
    """Which pieces still raise NotImplementedError and which quiz answers are still None;
    `untouched`: every piece present still raises and every answer is None.  None when the source
    does not parse (the import check has said why)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    functions, answers = {}, {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions[f"{node.name}.{item.name}"] = item
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and ANSWER.match(target.id):
                    answers[target.id] = isinstance(node.value, ast.Constant) \
                        and node.value.value is None
    present = [p for p in PIECES if p in functions]
    todo = [p for p in present if _raises_not_implemented(functions[p].body)]
    unanswered = sorted(n for n, is_none in answers.items() if is_none)
    return {"not_implemented": todo, "unanswered": unanswered,
            "untouched": bool(present) and len(todo) == len(present)
            and len(unanswered) == len(answers)}


def _source_of(raw, path):
    if len(raw) > submission_module.MAX_BYTES:
        raise SubmissionError(f"{path}: larger than {submission_module.MAX_BYTES // 1024} KiB",
                              f"{path}：超过 {submission_module.MAX_BYTES // 1024} KiB")
    text = submission_module.decoded(raw, path)
    if submission_module.has_suffix(path, ".ipynb"):
        return submission_module.notebook_source(text), "notebook"
    return text, "python"


def resolve_work(path):
    """The student's work file: a .py or .ipynb, or the attention file of a folder."""
    path = submission_module.work_file(path)
    if not submission_module.has_suffix(path, ".py", ".ipynb"):
        raise SubmissionError(f"{path}: expected attention.py or attention.ipynb",
                              f"{path}：应当是 attention.py 或 attention.ipynb")
    return os.path.abspath(path)


def _sibling_with_work(work):
    """attention.ipynb beside an untouched attention.py (or the other way round), if it has work."""
    folder, name = os.path.split(work)
    stem, ext = os.path.splitext(name)
    other = os.path.join(folder, stem + (".ipynb" if ext == ".py" else ".py"))
    try:
        with open(other, "rb") as handle:
            state = stub_state(_source_of(handle.read(), other)[0])
    except (OSError, SubmissionError):
        return None
    return other if state and not state["untouched"] else None


# -- the public checks' summary ------------------------------------------------------------------
def summarize(data):
    checks = data["checks"]
    return {"score": data["score"], "max_score": data["max_score"],
            "passed": sum(1 for c in checks if c["status"] == "passed"), "total": len(checks),
            "not_passed": [c["id"] for c in checks if c["status"] != "passed"],
            "hidden_not_run": data["metadata"].get("hidden_not_run", 0),
            "isolation": data["metadata"].get("isolation")}


def summary_lines(the_rubric, data, lang):
    words, s = TEXT[lang], summarize(data)
    lines = [words["summary"].format(score=points(s["score"]), max_score=points(s["max_score"]),
                                     passed=s["passed"], total=s["total"])]
    failing = [c for c in data["checks"] if c["status"] != "passed"]
    if failing:
        lines.append(words["not_passed"])
        for c in failing:
            title = the_rubric.by_id[c["id"]].title[lang]
            lines.append("    " + check_line(c, title, lang, mark="✗", status=""))
        lines.append(words["full_feedback"])
    n = s["hidden_not_run"]
    if n:
        lines.append(words["hidden"].format(n=n, checks=plural(n, "check", "checks"),
                                            are=plural(n, "is", "are"),
                                            what=still_hidden(the_rubric, lang)))
    return lines


# -- the package ---------------------------------------------------------------------------------
def write_package(path, work_name, work_bytes, the_manifest):
    """The zip, written to a temporary file beside `path` and renamed into place."""
    stamp = datetime.datetime.now(datetime.timezone.utc).timetuple()[:6]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in ((work_name, work_bytes),
                           (manifest.NAME, manifest.dumps(the_manifest).encode("utf-8"))):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = 0o644 << 16
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    statefile.write_atomic(path, buffer.getvalue())


# -- git (GitHub Classroom) ----------------------------------------------------------------------
def _git(folder, *args):
    return subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True,
                          encoding="utf-8", errors="replace")


def in_git_checkout(folder):
    try:
        return _git(folder, "rev-parse", "--show-toplevel").returncode == 0
    except OSError:  # no git installed
        return False


CLASSROOM_WORKFLOW = os.path.join(".github", "workflows", "classroom.yml")


def classroom_checkout(folder):
    """A GitHub Classroom repository: a remote on github.com and the Classroom workflow (a local
    `git init`, or a fork of the kit, hands in by the zip)."""
    top = _git(folder, "rev-parse", "--show-toplevel").stdout.strip()
    remotes = _git(folder, "remote", "-v").stdout
    on_github = any("github.com" in line.split()[1] for line in remotes.splitlines()
                    if len(line.split()) > 1)
    return bool(top) and on_github and os.path.isfile(os.path.join(top, CLASSROOM_WORKFLOW))


def git_commit(work, message):
    """Commit the work file alone, never push: ("no-git" | "unchanged", ""), ("committed", short
    hash) or ("failed", git's words)."""
    folder = os.path.dirname(work)
    if not in_git_checkout(folder):
        return "no-git", ""
    added = _git(folder, "add", "--", os.path.basename(work))
    if added.returncode != 0:
        return "failed", (added.stderr or added.stdout).strip()
    if _git(folder, "diff", "--cached", "--quiet", "--", os.path.basename(work)).returncode == 0:
        return "unchanged", ""
    done = _git(folder, "commit", "-q", "-m", message, "--", os.path.basename(work))
    if done.returncode != 0:
        return "failed", (done.stderr or done.stdout).strip()
    return "committed", _git(folder, "rev-parse", "--short", "HEAD").stdout.strip()


# -- the command's words -------------------------------------------------------------------------
TEXT = words.table("submit")
# Exit statuses after which the command has said why itself (`make submit` ends cleanly on them;
# a crash's 1 and argparse's 2 stay make's errors).
NOT_PACKAGED = 3
NOT_COMMITTED = 4  # packaged, but the work file not committed
YES = ("y", "yes", "是", "确定")


class Console:
    """The command's voice in one language; fail() says a TEXT entry with ✗ and returns `code`."""

    def __init__(self, lang, out):
        self.lang, self.out = lang, out

    def words(self, key, **fields):
        return TEXT[self.lang][key].format(**fields)

    def say(self, text=""):
        self.out.write(text + "\n")
        self.out.flush()

    def line(self, key, **fields):
        self.say(self.words(key, **fields))

    def fail(self, key, code, **fields):
        self.say("✗ " + self.words(key, **fields))
        return code


def _ask_terminal(prompt):
    try:
        return input(prompt)
    except EOFError:
        return ""


def who_hands_in(args, work, ui, interactive, ask):
    """The student id (asked once, then remembered beside the work), or None after saying why."""
    state_file = state_path(work)
    remembered = statefile.load(state_file, STATE_VERSION).get("student")
    student = (args.student or "").strip() or (remembered if isinstance(remembered, str) else "")
    if not student and interactive:
        student = ask(ui.words("ask_id")).strip()
    if not student:
        ui.fail("no_id", NOT_PACKAGED)
        return None
    if not re.search(r"\w", student):
        ui.fail("bad_id", NOT_PACKAGED, student=student)
        return None
    if student != remembered:  # a read-only folder: the id is asked again next time
        statefile.save(state_file, {"student": student}, STATE_VERSION)
        ui.line("remembered", file=os.path.basename(state_file))
    return student


def read_work(work, ui):
    """(raw bytes, source text, kind) of the work file, or an exit status after saying why."""
    try:
        with open(work, "rb") as handle:
            raw = handle.read()
        source, kind = _source_of(raw, work)
    except OSError as exc:
        return ui.fail("error", NOT_PACKAGED, message=f"{work}: `{exc.strerror}`")
    except SubmissionError as exc:
        return ui.fail("error_nothing", NOT_PACKAGED, message=exc.said(ui.lang))
    return raw, source, kind


def say_import_failure(exc, work, kind, ui):
    """What stopped the import and the student's line unstripped (an IndentationError is about
    its spaces)."""
    name = os.path.basename(work)
    ui.say("✗ " + ui.words("no_import", file=name))
    if isinstance(exc, StudentError):
        ui.say(f"    {exc.type}: {exc.message}")
        if exc.line:
            cells = ui.words("cells") if kind == "notebook" else ""
            ui.say("    " + ui.words("no_import_where", line=exc.line, cells=cells))
            ui.say(f"    {name}:{exc.line}:")
            ui.say(f"    | {exc.code.rstrip()}")
    else:
        ui.say(f"    {exc.kind}: {exc.message}")
    ui.line("fix_import")
    return NOT_PACKAGED


def stub_refused(source, work, args, ui, interactive, ask):
    """The untouched stub is packaged only after a yes: an exit status when refused, else None."""
    state = stub_state(source)
    if not (state and state["untouched"]):
        return None
    ui.say("⚠ " + ui.words("stub", file=os.path.basename(work),
                           pieces=len(state["not_implemented"]), answers=len(state["unanswered"])))
    sibling = _sibling_with_work(work)
    if sibling:
        ui.line("sibling", name=os.path.basename(sibling))
    if args.yes:
        return None
    if not interactive:
        return ui.fail("nobody", NOT_PACKAGED)
    if ask(ui.words("ask_stub")).strip().lower() not in YES:
        return ui.fail("declined", NOT_PACKAGED)
    return None


def check_work(args, work, source, kind, ui, interactive, ask):
    """Import the work in the sandboxed worker, ask about the stub, run the public checks: the
    report data, or an exit status when nothing may be packaged."""
    sub = submission_module.Submission(work, source, kind)
    limits = options.limits_from(args)
    try:
        proxy = Student(sub.work_dir, limits=limits, isolation=args.isolation).start()
    except Exception as exc:  # e.g. bubblewrap asked for and missing: the kit's trouble
        sub.cleanup()
        return ui.fail("error", NOT_PACKAGED, message=f"`{type(exc).__name__}: {exc}`")
    try:  # the worker and the work folder go away however this ends (Ctrl-C at a question)
        import torch  # noqa: F401  the judge's imports overlap the worker's, as in grading.start

        from grader.judge import runner  # noqa: F401
        try:
            proxy.request("constants", names=[])
        except (StudentError, WorkerFailure) as exc:
            return say_import_failure(exc, work, kind, ui)
        refused = stub_refused(source, work, args, ui, interactive, ask)
        if refused is not None:
            return refused
        ui.line("running")
        return grading.finish(sub, proxy, ("public",))
    finally:
        proxy.close()
        sub.cleanup()


def package(student, work, raw, source, data, the_rubric, target, ui):
    """Write <id>.zip and read it back as the grader will: an exit status when it does not verify."""
    work_name = "attention.ipynb" if work.endswith(".ipynb") else "attention.py"
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    the_manifest = manifest.build(student, created, work_name, raw, the_rubric, summarize(data))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    write_package(target, work_name, raw, the_manifest)
    check = submission_module.load_zip(target)
    check.cleanup()
    if not (check.package and check.package["intact"] and check.source == source):
        os.unlink(target)
        return ui.fail("unverified", NOT_PACKAGED)
    ui.say("")
    ui.line("packaged", target=target, work=work_name, manifest=manifest.NAME,
            size=f"{os.path.getsize(target) / 1024:.1f}")
    return None


def commit_message(work, student, data, target, raw):
    s = summarize(data)
    return (f"Submit {os.path.basename(work)}: {student}, public checks "
            f"{points(s['score'])}/{points(s['max_score'])} ({s['passed']}/{s['total']} passed)"
            f"\n\nPackaged by `make submit` as {os.path.basename(target)}; "
            f"{os.path.basename(work)} sha256 {manifest.sha256(raw)[:16]}.")


def hand_in_by_git(work, raw, message, target, ui):
    """Commit the work file; say what to hand in: the push (GitHub Classroom) or the zip."""
    name = os.path.basename(work)
    try:
        with open(work, "rb") as handle:
            now = handle.read()
    except OSError:
        now = None
    if now != raw:  # saved again while it was checked: the commit would not be what was checked
        return ui.fail("changed", NOT_COMMITTED, work=name)
    outcome, detail = git_commit(work, message)
    if outcome == "failed":
        return ui.fail("commit_failed", NOT_COMMITTED, detail=detail)
    if outcome == "committed":
        ui.line("committed", detail=detail, subject=message.splitlines()[0])
    else:
        ui.line("unchanged", work=name)
    if classroom_checkout(os.path.dirname(work)):
        ui.line("push", name=os.path.basename(target))
    else:
        ui.line("upload", name=os.path.basename(target))
    return 0


def main(args, ask=None, out=None):
    """`ask(prompt) -> answer` is the terminal (tests pass their own); the exit status."""
    ui = Console(args.lang, out or sys.stdout)
    interactive = ask is not None or (sys.stdin is not None and sys.stdin.isatty())
    ask = ask or _ask_terminal
    try:
        work = resolve_work(args.submission)
    except SubmissionError as exc:
        return ui.fail("error", NOT_PACKAGED, message=exc.said(ui.lang))
    student = who_hands_in(args, work, ui, interactive, ask)
    if student is None:
        return NOT_PACKAGED
    shown = os.path.relpath(work)
    ui.line("submitting", work=work if shown.startswith("..") else shown, student=student)
    target = os.path.join(os.path.abspath(args.out or os.path.dirname(work)),
                          manifest.safe_id(student) + ".zip")
    loaded = read_work(work, ui)
    data = check_work(args, work, *loaded[1:], ui, interactive, ask) \
        if isinstance(loaded, tuple) else loaded
    if isinstance(data, int):  # nothing packaged: an earlier zip must not look current
        if os.path.exists(target):
            os.unlink(target)
            ui.line("stale", name=os.path.basename(target))
        return data
    raw, source, _ = loaded
    the_rubric = rubric_module.load()
    for line in summary_lines(the_rubric, data, args.lang):
        ui.say(line)
    failed = package(student, work, raw, source, data, the_rubric, target, ui)
    if failed is not None:
        return failed
    if not args.no_commit and in_git_checkout(os.path.dirname(work)):  # one way to hand in
        return hand_in_by_git(work, raw, commit_message(work, student, data, target, raw),
                              target, ui)
    ui.line("upload", name=os.path.basename(target))
    return 0
