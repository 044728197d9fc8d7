"""`python -m grader hint [EXERCISE]`: the next hint for one exercise, one level at a time.

The hints are the rubric's [hints.EXERCISE] tables (zh and en, level by level, never the
solution).  How far a student got, and the last watch/hint run's per-exercise progress, live in a
small JSON state file beside the student's file (`.attention-hints.json` next to attention.py),
never inside it.  Without EXERCISE the first unfinished exercise is taken: from that state file
when it describes the file as it is now, else by running the public checks once.
"""
import hashlib
import os
import sys

from grader import rubric as rubric_module
from grader import statefile
from grader.judge.submission import SubmissionError

STATE_VERSION = 1


# -- progress: which exercises pass, shared with watch -------------------------------------------
def exercise_progress(rubric, data):
    """[(exercise, done)] in rubric order; done = every check of it that ran has passed."""
    ran = {}
    for result in data["checks"]:
        ran.setdefault(result["exercise"], []).append(result["status"] == "passed")
    return [(name, all(ran[name])) for name in rubric.exercises() if name in ran]


def first_unfinished(progress):
    return next((name for name, done in progress if not done), None)


def source_hash(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- the state file ------------------------------------------------------------------------------
def state_path(submission):
    """Beside the student's file: exercises/attention.py -> exercises/.attention-hints.json."""
    if os.path.isdir(submission):
        submission = os.path.join(submission, "attention.py")
    return statefile.beside(submission, "hints")


def load_state(path):
    """The saved state, or a fresh one: a missing, garbled or foreign file never stops a hint."""
    state = statefile.load(path, STATE_VERSION)
    levels = state.get("levels")
    state["levels"] = {k: v for k, v in levels.items() if isinstance(v, int)} \
        if isinstance(levels, dict) else {}
    return state


def save_state(path, state):
    statefile.save(path, state, STATE_VERSION)


def record_run(path, source_sha, progress):
    """Remember which exercises the file with this content passes (for a plain `make hint`)."""
    state = load_state(path)
    state["last_run"] = {"sha256": source_sha, "done": dict(progress)}
    save_state(path, state)


# -- hints ---------------------------------------------------------------------------------------
def resolve(rubric, name):
    """An exercise name as the rubric spells it: any case, or a check-id prefix (module.*)."""
    names = {n.lower(): n for n in rubric.hints}
    for check in rubric.checks:
        if check.exercise in rubric.hints:
            names.setdefault(check.id.split(".")[0].lower(), check.exercise)
    return names.get(name.strip().lower())


def next_hint(rubric, exercise, lang, state):
    """Advance the exercise's level (staying on the last one); return (level, total, text)."""
    levels = rubric.hints[exercise][lang]
    reached = min(state["levels"].get(exercise, 0) + 1, len(levels))
    state["levels"][exercise] = reached
    return reached, len(levels), levels[reached - 1]


def render(exercise, level, total, text, lang, repeated):
    make = f"make hint EX={exercise}"
    if lang == "zh":
        lines = [f"提示 hint · {exercise} · 第 {level}/{total} 级", "", f"  {text}", ""]
        if repeated:
            lines.append(f"这已经是最后一级提示（{total}/{total}），再显示一次。"
                         "提示不会给出答案：对照课文，把你的输出和期望值比一比。")
        elif level == total:
            lines.append(f"这是 {exercise} 的最后一级提示。")
        else:
            lines.append(f"还卡着？再运行 {make} 看第 {level + 1} 级提示。")
    else:
        lines = [f"hint · {exercise} · level {level}/{total}", "", f"  {text}", ""]
        if repeated:
            lines.append(f"That was the last hint ({total}/{total}); here it is again. Hints never "
                         "give the solution: compare your output with the expected one, "
                         "lesson in hand.")
        elif level == total:
            lines.append(f"This is the last hint for {exercise}.")
        else:
            lines.append(f"Still stuck? Run {make} again for hint {level + 1}.")
    return "\n".join(lines) + "\n"


def unfinished_now(submission, args, state_file):
    """The first unfinished exercise: from the state file if it matches the file, else by checking.

    Returns (exercise or None, how it was learnt: "state" or "checked").
    """
    from grader.judge import submission as submission_module

    sub = submission_module.load(submission)
    sha = source_hash(sub.source)
    sub.cleanup()
    last = load_state(state_file).get("last_run")
    if isinstance(last, dict) and last.get("sha256") == sha and isinstance(last.get("done"), dict):
        done = last["done"]
        progress = [(n, done[n] is True) for n in rubric_module.load().exercises() if n in done]
        if progress:  # else a record from another rubric: check again
            return first_unfinished(progress), "state"
    from grader.judge import grading
    from grader.sandbox import launch as sandbox

    limits = sandbox.Limits(call_seconds=args.call_timeout)
    data = grading.grade(submission, ("public",), args.isolation, limits)
    progress = exercise_progress(rubric_module.load(), data)
    record_run(state_file, sha, progress)
    return first_unfinished(progress), "checked"


def main(args):
    rubric = rubric_module.load()
    state_file = state_path(args.submission)
    zh = args.lang == "zh"
    if args.exercise:
        exercise = resolve(rubric, args.exercise)
        if exercise is None:
            known = ", ".join(rubric.hints)
            print(f"错误 error: 没有这个练习 no such exercise: {args.exercise} ({known})",
                  file=sys.stderr)
            return 2
    else:
        try:
            exercise, source = unfinished_now(args.submission, args, state_file)
        except SubmissionError as exc:
            print(f"错误 error: {exc}", file=sys.stderr)
            return 2
        if exercise is None:
            print("公开检查全部通过，不需要提示了。" if zh else
                  "Every exercise passes its public checks: no hint needed.")
            return 0
        if source == "checked":
            print(f"（运行了公开检查：第一个未完成的练习是 {exercise}）" if zh else
                  f"(ran the public checks: the first unfinished exercise is {exercise})")
    if exercise not in rubric.hints:
        print(f"{exercise}: 没有提示 no hints in the rubric", file=sys.stderr)
        return 2
    state = load_state(state_file)
    if args.reset:
        state["levels"].pop(exercise, None)
    already = state["levels"].get(exercise, 0)
    level, total, text = next_hint(rubric, exercise, args.lang, state)
    save_state(state_file, state)
    sys.stdout.write(render(exercise, level, total, text, args.lang, repeated=already >= total))
    return 0
