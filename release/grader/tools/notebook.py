"""The exercise's notebook from inside its Jupyter kernel: what the notebook's cells run.

  %load_ext grader.notebook    the magics `%check EXERCISE`, `%lang en`, `%autograde CHECK_ID`

The kit never judges the student's functions in the kernel: `check` and `autograde_cell` rebuild
attention.py from the cells the kernel executed (`assemble`) and grade that file in the kernel's
judge process (kernel_judge.py), sandboxed as in `make check`; a kernel whose torch was
monkeypatched changes nothing.  The kernel itself can still be tricked (its helpers replaced):
that is why `make autograde` regrades every notebook outside it (grader/instructor/nbregrade.py).
"""
import atexit
import hashlib
import os
import re
import shutil
import sys
import tempfile
import warnings

from grader import paths, rubric as rubric_module, words
from grader.judge import cells
from grader.judge.submission import comment_out_magics
from grader.render import report
from grader.tools.kernel_judge import KernelJudge

# The feedback's language: Chinese unless the notebook's first code cell says `%lang en` (or one
# check asks, `%check attend --lang en`).  ATTN_KIT_LANG is the instructors' default for a course.
LANG = os.environ.get("ATTN_KIT_LANG", "zh")
# Set by the course's nbgrader_config.py: the kernel is being autograded by nbgrader.
AUTOGRADE_ENV = "ATTN_KIT_AUTOGRADE"
# Under nbgrader: one call into the student's code, and all calls of one grading.  Well inside
# the cell timeout (nbgrade.CELL_TIMEOUT), with room for a busy machine.
AUTOGRADE_CALL_SECONDS, AUTOGRADE_BUDGET_SECONDS = 5.0, 20.0
# The kit's own lines in a notebook: its magics (which the CLI grader skips like any magic) and
# direct calls of its helpers.
KIT_LINE = re.compile(r"^\s*(%(check|autograde|lang|load_ext\s+grader|reload_ext\s+grader)\b|"
                      r"from\s+grader[\s.]|import\s+grader\b|kit\s*\.|autograde_cell\s*\()")


def assemble(sources):
    """attention.py from executed cell sources, oldest first.

    The statements kept are those the file grader keeps (judge/cells.py), so `%check` and the
    instructor's grade of the saved notebook read the same code: the imports, and the last
    definition of each function, class and top-level name, in the order the names first appeared.
    An assignment that calls something is wrapped in try/except, as the kernel had survived it;
    cells that do not parse are skipped (the kernel kept the previous definitions then).
    """
    imports, order, latest = [], [], {}
    for source in sources:
        for kind, key, text in kept_statements(source or ""):
            if kind == "import":
                if text not in imports:
                    imports.append(text)
                continue
            if key not in latest:
                order.append(key)
            latest[key] = text
    parts = ["# 由笔记本中已运行的单元拼成 · assembled from the notebook's executed cells"]
    parts += imports + [latest[key] for key in order]
    return "\n\n".join(parts) + "\n"


def kept_statements(source):
    """What one cell adds to attention.py: [(kind, name key, text), ...] of its kept statements."""
    source = comment_out_magics(source)
    body = cells.parse(source)
    lines = source.splitlines()
    kept = []
    for node in body or ():
        kind = cells.classify(node)
        if kind not in cells.KEPT:
            continue
        text = "\n".join(lines[cells.first_line(node) - 1:node.end_lineno])
        if kind == "import":
            kept.append((kind, None, text))
            continue
        key = (node.name,) if kind == "definition" else cells.target_names(node)
        if cells.guarded(node):
            body_text = "\n".join("    " + line for line in text.splitlines())
            text = f"try:\n{body_text}\nexcept Exception:\n    pass"
        kept.append((kind, key, text))
    return kept


def kernel_sources():
    """The cells this kernel executed, oldest first, as typed."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("grader.notebook.check runs inside a Jupyter/IPython kernel")
    return list(shell.history_manager.input_hist_raw[1:])


# {(the source's hash, hidden, limits, exercise): report data}: the notebook's autograder cells
# (one per check) share one grading of the same code.
_cache = {}
_kernel_judge = None


def kernel_judge():
    """This kernel's judge process (kernel_judge.py): one per kernel, started on first use."""
    global _kernel_judge
    if _kernel_judge is None:
        _kernel_judge = KernelJudge(env=judge_env())
        atexit.register(_kernel_judge.stop)
    return _kernel_judge


def judge(source, hidden, call_seconds=None, budget_seconds=None, timeout=None, exercise=None):
    """Grade `source` (attention.py text) in this kernel's judge process: every check, or
    `exercise`'s only; the report data, or an error dict."""
    key = (hashlib.sha256(source.encode()).hexdigest(), hidden, call_seconds, budget_seconds,
           exercise)
    if key in _cache:
        return _cache[key]
    folder = tempfile.mkdtemp(prefix="attn-nb-")
    try:
        path = os.path.join(folder, "attention.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        data = kernel_judge().grade(path, hidden, call_seconds, budget_seconds, timeout, exercise)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _cache[key] = data
    return data


def judge_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = paths.KIT_ROOT + (os.pathsep + env["PYTHONPATH"]
                                          if env.get("PYTHONPATH") else "")
    env.pop(AUTOGRADE_ENV, None)
    return env


def _exercise_report(data, exercise):
    checks = [c for c in data["checks"] if c["exercise"] == exercise]
    return dict(data, checks=checks, score=round(sum(c["score"] for c in checks), 4),
                max_score=sum(c["max_score"] for c in checks))


# What the kernel's helpers print themselves (the feedback is the report's and the rubric's).
TEXT = words.table("notebook")


def parse_check_line(line):
    """`%check [EXERCISE] [--lang zh|en]` -> (exercise or None for all, lang or None), or None
    when the line cannot be read that way."""
    words, exercise, lang = line.split(), None, None
    while words:
        word = words.pop(0)
        if word in ("--lang", "-l") and words and words[0] in TEXT:
            lang = words.pop(0)
        elif word.startswith("--lang=") and word.split("=", 1)[1] in TEXT:
            lang = word.split("=", 1)[1]
        elif exercise is None and not word.startswith("-"):
            exercise = word
        else:
            return None
    return exercise, lang


def check_magic(line):
    """`%check`: every exercise; `%check attend`: one; `--lang en` for this one check."""
    parsed = parse_check_line(line)
    if parsed is None:
        print(TEXT[LANG]["usage"])
        return
    check(*parsed)


def lang_magic(line):
    """`%lang en` (or zh): the language of every feedback from now on, in this kernel."""
    global LANG
    choice = line.strip()
    if choice not in TEXT:
        print(TEXT[LANG]["lang_usage"])
        return
    LANG = choice
    print(TEXT[LANG]["lang_set"])


def check(exercise=None, lang=None):
    """Print the public checks' feedback on the kernel's current code: one exercise's, or all."""
    lang = lang or LANG
    rubric = rubric_module.load()
    if exercise is not None and exercise not in rubric.exercises():
        print(TEXT[lang]["no_exercise"].format(name=exercise, known=", ".join(rubric.exercises())))
        print(TEXT[lang]["usage"])
        return
    if os.environ.get(AUTOGRADE_ENV):
        print(TEXT[lang]["autograding"])
        return
    # One exercise asked for: only its checks run (each check judges its own piece, so their
    # verdicts are those of a whole grading), and the cell answers sooner.
    data = judge(assemble(kernel_sources()), hidden=False, exercise=exercise)
    if "error" in data:
        print(TEXT[lang]["could_not_run"].format(message=data["error"]))
        return
    hidden = len([c for c in rubric.select(("hidden",)) if exercise in (None, c.exercise)])
    shown = data if exercise is None else _exercise_report(data, exercise)
    print(report.to_text(rubric, shown, lang, hidden), end="")


def autograde_cell(check_id, lang=None):
    """One autograder cell: the kit's verdict for `check_id` on the kernel's current code.

    Passed: one line on stdout, full credit.  Partly passed: the feedback on stdout and the score
    as the cell's value (nbgrader's partial credit).  Failed: the feedback on stdout and one line
    on stderr, which nbgrader scores as 0.  Never a traceback, never the check's source.
    """
    lang = lang or LANG
    rubric = rubric_module.load()
    check_ = rubric.by_id.get(check_id)
    if check_ is None:
        sys.stderr.write(f"✗ unknown check {check_id!r}\n")
        return None
    hidden_here = os.path.isdir(os.path.join(paths.CHECKS, "hidden"))
    if check_.visibility == "hidden" and not hidden_here:
        print(TEXT[lang]["hidden"].format(id=check_id))
        return None
    def zero(why=""):  # one line on stderr: nbgrader scores the cell 0
        sys.stderr.write(f"✗ {check_id}: 0/{report.points(check_.points)}{why}\n")

    autograding = bool(os.environ.get(AUTOGRADE_ENV))
    source = None
    # No warning of the kit's may reach the cell's stderr: nbgrader scores stderr output as failure.
    with warnings.catch_warnings(action="ignore"):
        try:
            source = assemble(kernel_sources())
            data = judge(source, hidden=hidden_here,
                         call_seconds=AUTOGRADE_CALL_SECONDS if autograding else None,
                         budget_seconds=AUTOGRADE_BUDGET_SECONDS if autograding else None)
        except KeyboardInterrupt:  # nbgrader's cell timeout: later cells must not wait again
            digest = hashlib.sha256((source or "").encode()).hexdigest()
            for hidden in (True, False) if source is not None else ():
                _cache[(digest, hidden, AUTOGRADE_CALL_SECONDS, AUTOGRADE_BUDGET_SECONDS,
                        None)] = {"error": "grading this code was interrupted (timeout)"}
            return zero(" " + TEXT[lang]["interrupted"])
    if "error" in data:
        return zero(f" ({data['error']})")
    result = next((c for c in data["checks"] if c["id"] == check_id), None)
    if result is None:
        return zero(" " + TEXT[lang]["not_run"])
    print(report.card(rubric, result, lang))
    if result["status"] == "passed":
        return None
    if result["score"] > 0:
        return result["score"]
    return zero()


def load_ipython_extension(ipython):
    """`%load_ext grader.notebook` (the kit's cell): the magics, and the kernel's judge started."""
    kernel_judge().start()
    ipython.register_magic_function(check_magic, "line", "check")
    ipython.register_magic_function(lang_magic, "line", "lang")
    ipython.register_magic_function(lambda line: autograde_cell(line.strip()), "line", "autograde")

