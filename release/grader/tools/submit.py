"""`python -m grader submit [SUBMISSION] [--student ID]` (`make submit`): check the student's work,
then package it for handing in.

1. The student id: --student, else the one remembered beside the work (`.attention-submit.json`
   next to attention.py, never inside it), else asked once on the terminal and remembered.
2. The work must import: it is imported in the grader's sandboxed worker, as in grading.  A syntax
   error or an exception at import is shown with the student's line; nothing is packaged.
3. The untouched stub (every exercise still raises NotImplementedError, every quiz answer None) is
   warned about and packaged only after a yes: --yes (CONFIRM=1) for scripts; a run with nobody at
   the terminal to answer refuses.
4. The public checks run in the same worker and their summary is shown; failing checks do not
   block the package, they are listed (and recorded in the manifest).
5. One zip, `<student id>.zip` beside the work (--out elsewhere), holding the work file and
   manifest.json (grader/manifest.py) and nothing else; it is read back and verified.
6. In a git checkout (GitHub Classroom: the push is the submission) the work file alone is
   committed with a clear message.  Nothing is ever pushed.
"""
import ast
import datetime
import io
import os
import re
import subprocess
import sys
import zipfile

from grader.judge import manifest
from grader import statefile
from grader.judge import submission as submission_module
from grader.judge.submission import SubmissionError

STATE_VERSION = 1
# The pieces the stub leaves to the student; the quiz answers are the module's Q<n>_* names.
PIECES = ("split_heads", "merge_heads", "attend", "CausalSelfAttention.__init__",
          "CausalSelfAttention.forward")
ANSWER = re.compile(r"^Q\d+_\w+$")


# -- the remembered student id -------------------------------------------------------------------
def state_path(work):
    """Beside the work: release/attention.py -> release/.attention-submit.json."""
    return statefile.beside(work, "submit")


def load_state(path):
    return statefile.load(path, STATE_VERSION)


def save_state(path, state):
    statefile.save(path, state, STATE_VERSION)  # read-only folder: the id is asked again next time


# -- is it still the stub? -----------------------------------------------------------------------
def _raises_not_implemented(body):
    for node in body:
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id == "NotImplementedError":
                return True
    return False


def stub_state(source):
    """Which pieces still raise NotImplementedError and which quiz answers are still None.

    `untouched` is True when nothing of the exercise was done: every piece present still raises,
    every answer present is None.  Comments and blank lines do not count as work.  None when the
    source does not parse (the import check has said why)."""
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
    return {"pieces": present, "not_implemented": todo, "answers": sorted(answers),
            "unanswered": unanswered,
            "untouched": bool(present) and len(todo) == len(present)
            and len(unanswered) == len(answers)}


def _source_of(raw, path):
    if len(raw) > submission_module.MAX_BYTES:
        raise SubmissionError(f"{path}: larger than {submission_module.MAX_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SubmissionError(f"{path}: not UTF-8 text") from None
    if path.endswith(".ipynb"):
        return submission_module.notebook_source(text), "notebook"
    return text, "python"


def resolve_work(path):
    """The student's work file: a .py or .ipynb, or the attention file of a folder."""
    if not os.path.exists(path):
        raise SubmissionError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        path = submission_module._pick_in_folder(path)
    if not path.endswith((".py", ".ipynb")):
        raise SubmissionError(f"{path}: expected attention.py or attention.ipynb")
    return os.path.abspath(path)


def _sibling_with_work(work):
    """attention.ipynb beside an untouched attention.py (or the other way round) that has work
    in it: the student probably worked there."""
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
    zh = lang == "zh"
    s = summarize(data)
    lines = [(f"公开检查 public checks: {s['score']:g}/{s['max_score']:g} 分 · "
              f"{s['passed']}/{s['total']} 项通过 passed") if zh else
             f"public checks: {s['score']:g}/{s['max_score']:g} points · "
             f"{s['passed']}/{s['total']} passed"]
    failing = [c for c in data["checks"] if c["status"] != "passed"]
    if failing:
        lines.append("  未通过（不影响提交，但请看一看）· not passed (they do not block the package):"
                     if zh else "  not passed (they do not block the package):")
        for c in failing:
            title = the_rubric.by_id[c["id"]].title[lang]
            lines.append(f"    ✗ {c['id']}  {title}  [{c['score']:g}/{c['max_score']:g}]")
        lines.append("  详细反馈 full feedback: make check" if zh else "  full feedback: make check")
    if s["hidden_not_run"]:
        lines.append(f"  另有 {s['hidden_not_run']} 项隐藏检查，由老师评分时运行。" if zh else
                     f"  {s['hidden_not_run']} hidden checks are run by your instructor.")
    return lines


# -- the package ---------------------------------------------------------------------------------
def write_package(path, work_name, work_bytes, the_manifest):
    """The zip, written to a temporary file beside `path` and renamed into place."""
    stamp = datetime.datetime.now(datetime.timezone.utc).timetuple()[:6]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in ((work_name, work_bytes),
                           (manifest.NAME, manifest.dumps(the_manifest).encode("utf-8"))):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    statefile.write_atomic(path, buffer.getvalue())
    return path


# -- git (GitHub Classroom) ----------------------------------------------------------------------
def _git(folder, *args):
    return subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True,
                          encoding="utf-8", errors="replace")


def in_git_checkout(folder):
    try:
        return _git(folder, "rev-parse", "--show-toplevel").returncode == 0
    except OSError:  # no git installed
        return False


def git_commit(work, message):
    """Commit the work file alone if it lives in a git checkout.

    Returns (outcome, detail): ("no-git", ""), ("unchanged", ""), ("committed", short hash) or
    ("failed", git's words).  Never pushes."""
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


# -- the command ---------------------------------------------------------------------------------
def _ask_terminal(prompt):
    try:
        return input(prompt)
    except EOFError:
        return ""


def main(args, ask=None, out=None):
    """`ask(prompt) -> answer` is the terminal (tests pass their own); returns the exit status:
    0 packaged, 1 not packaged (import failure, refused stub) or not committed, 2 bad input."""
    from grader import rubric as rubric_module
    from grader.sandbox import launch as sandbox
    from grader.judge.student import Student, StudentError, WorkerFailure

    out = out or sys.stdout
    zh = args.lang == "zh"

    def t(chinese, english):
        return chinese if zh else english

    def say(text=""):
        out.write(text + "\n")
        out.flush()

    def fail(text, code):
        say(f"✗ {text}")
        return code

    interactive = ask is not None or (sys.stdin is not None and sys.stdin.isatty())
    ask = ask or _ask_terminal
    try:
        work = resolve_work(args.submission)
    except SubmissionError as exc:
        return fail(t(f"错误 error: {exc}", f"error: {exc}"), 2)
    work_name = "attention.ipynb" if work.endswith(".ipynb") else "attention.py"

    # 1. who is handing in
    state_file = state_path(work)
    remembered = load_state(state_file).get("student")
    student = (args.student or "").strip() or (remembered if isinstance(remembered, str) else "")
    if not student and interactive:
        student = ask(t("你的学号（或姓名），只问这一次 · your student id (asked once): ",
                        "your student id (asked once): ")).strip()
    if not student:
        return fail(t("没有学号，没有打包。请这样运行：make submit STUDENT=你的学号",
                      "no student id, nothing packaged: run make submit STUDENT=your-id"), 2)
    if not re.search(r"\w", student):
        return fail(t(f"学号 {student!r} 里没有字母或数字", f"student id {student!r} has no letter "
                      "or digit"), 2)
    if student != remembered:
        save_state(state_file, {"student": student})
        say(t(f"（学号记在 {os.path.basename(state_file)}，下次不用再写 · remembered for next time）",
              f"(the id is remembered in {os.path.basename(state_file)} for next time)"))
    sid = manifest.safe_id(student)
    shown = os.path.relpath(work)
    shown = work if shown.startswith("..") else shown
    say(t(f"提交 submitting {shown} · 学号 student: {student}",
          f"submitting {shown} · student: {student}"))

    # 2. it must import (in the sandboxed worker, as when it is graded)
    try:
        with open(work, "rb") as handle:
            raw = handle.read()
        source, kind = _source_of(raw, work)
    except OSError as exc:
        return fail(f"{work}: {exc.strerror}", 2)
    except SubmissionError as exc:
        return fail(t(f"错误 error: {exc}；没有打包", f"error: {exc}; nothing packaged"), 2)
    sub = submission_module.Submission(work, source, kind)
    limits = sandbox.Limits(call_seconds=args.call_timeout)
    try:
        proxy = Student(sub.work_dir, limits=limits, isolation=args.isolation).start()
    except Exception as exc:  # e.g. bubblewrap asked for and missing: the kit's trouble
        sub.cleanup()
        return fail(f"{type(exc).__name__}: {exc}", 2)
    try:  # the worker and the work folder go away however this ends (Ctrl-C at a question)
        import torch  # noqa: F401  the judge's imports overlap the worker's, as in grading.start

        from grader.judge import runner  # noqa: F401
        try:
            proxy.request("constants", names=[])
        except (StudentError, WorkerFailure) as exc:
            where = ""
            if isinstance(exc, StudentError):
                what = f"{exc.type}: {exc.message}"
                if exc.line:
                    cells = t("（笔记本代码单元格合起来的第几行）", " (counting the notebook's code "
                              "cells together)") if kind == "notebook" else ""
                    where = f"{os.path.basename(work)}:{exc.line}{cells}: {exc.code.strip()}"
            else:
                what = f"{exc.kind}: {exc.message}"
            say(t(f"✗ {os.path.basename(work)} 无法导入，没有打包 · cannot be imported, nothing packaged",
                  f"✗ {os.path.basename(work)} cannot be imported: nothing packaged"))
            say(f"    {what}")
            if where:
                say(f"    {where}")
            say(t("  改好后再运行 make submit（make check 可以边改边查）。",
                  "  Fix it and run make submit again (make check helps while you fix it)."))
            return 1

        # 3. the untouched stub
        state = stub_state(source)
        if state and state["untouched"]:
            say(t(f"⚠ {os.path.basename(work)} 还是没有改动过的模板：{len(state['not_implemented'])} 个部分"
                  f"都还在 raise NotImplementedError，{len(state['unanswered'])} 道检查题答案都还是 None。",
                  f"⚠ {os.path.basename(work)} is still the untouched stub: all "
                  f"{len(state['not_implemented'])} pieces still raise NotImplementedError and all "
                  f"{len(state['unanswered'])} quiz answers are None."))
            sibling = _sibling_with_work(work)
            if sibling:
                name = os.path.basename(sibling)
                say(t(f"  你的 {name} 有改动：是不是要交它？make submit SUBMISSION={name}",
                      f"  Your {name} has work in it: did you mean make submit SUBMISSION={name}?"))
            if not args.yes:
                if not interactive:
                    return fail(t("没有打包：没有人在终端上确认。确实要提交模板，请运行 "
                                  "make submit CONFIRM=1（或 --yes）。",
                                  "not packaged: nobody at the terminal to confirm. To hand in the "
                                  "stub anyway: make submit CONFIRM=1 (or --yes)."), 1)
                answer = ask(t("仍然提交吗？still submit it? [y/N] ", "Submit it anyway? [y/N] "))
                if answer.strip().lower() not in ("y", "yes", "是", "确定"):
                    return fail(t("没有打包。", "not packaged."), 1)

        # 4. the public checks, in the same worker
        from grader.judge import grading

        say(t("运行公开检查 running the public checks …", "running the public checks …"))
        data = grading.finish(sub, proxy, ("public",))
        the_rubric = rubric_module.load()
        for line in summary_lines(the_rubric, data, args.lang):
            say(line)
    finally:
        proxy.close()
        sub.cleanup()

    # 5. the package: the work file and the manifest, nothing else
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    the_manifest = manifest.build(student, created, work_name, raw, the_rubric, summarize(data))
    folder = os.path.abspath(args.out or os.path.dirname(work))
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, sid + ".zip")
    write_package(target, work_name, raw, the_manifest)
    check = submission_module.load_zip(target)  # read it back as the grader will
    check.cleanup()
    if not (check.package and check.package["intact"] and check.source == source):
        os.unlink(target)
        return fail(t("打包后校验失败，已删除；请再试一次。", "the package did not verify and was "
                      "removed; try again."), 1)
    size = os.path.getsize(target) / 1024
    say("")
    say(t(f"✓ 已打包 packaged: {target}（{work_name} + {manifest.NAME}，{size:.1f} KiB）",
          f"✓ packaged: {target} ({work_name} + {manifest.NAME}, {size:.1f} KiB)"))
    say(t(f"  请上传这一个文件 upload this one file: {os.path.basename(target)}"
          "（不要上传文件夹、.venv 或别的文件 · not the folder, not .venv）",
          f"  Upload this one file: {os.path.basename(target)} (not the folder, not .venv)."))
    if args.no_commit:
        return 0

    # 6. GitHub Classroom: commit the work (the push is the student's to do)
    s = summarize(data)
    message = (f"Submit {os.path.basename(work)}: {student}, public checks "
               f"{s['score']:g}/{s['max_score']:g} ({s['passed']}/{s['total']} passed)\n\nPackaged by `make submit` as "
               f"{os.path.basename(target)}; {work_name} sha256 {manifest.sha256(raw)[:16]}.")
    try:
        with open(work, "rb") as handle:
            now = handle.read()
    except OSError:
        now = None
    if now != raw and in_git_checkout(os.path.dirname(work)):
        # Saved again while it was checked: the commit would not be what was checked and packaged.
        return fail(t(f"{work_name} 在检查期间又被保存过，没有 commit；请再运行一次 make submit。",
                      f"{work_name} was saved again while it was checked: not committed; "
                      "run make submit again."), 1)
    outcome, detail = git_commit(work, message)
    if outcome == "committed":
        say(t(f"✓ 已提交到 git committed: {detail} “{message.splitlines()[0]}”",
              f"✓ committed to git: {detail} \"{message.splitlines()[0]}\""))
    elif outcome == "unchanged":
        say(t(f"  git：{work_name} 与上次提交相同，没有新的 commit。",
              f"  git: {work_name} is as last committed; no new commit."))
    elif outcome == "failed":
        say(t(f"✗ git commit 失败（包已写好）· git commit failed (the zip is written): {detail}",
              f"✗ git commit failed (the zip is written): {detail}"))
        return 1
    if outcome in ("committed", "unchanged"):
        say(t("  GitHub Classroom：你的提交就是 push。运行 git push（make submit 不会替你 push）。",
              "  GitHub Classroom: the push is your submission. Run git push (make submit never "
              "pushes)."))
    return 0
