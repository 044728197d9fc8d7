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
from grader import statefile, words
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


def ladders(rubric, data):
    """{exercise: the hint ladder its first failing check names} (attend.device leads to the
    device ladder, not attend's)."""
    found = {}
    for result in data["checks"]:
        if result["status"] != "passed" and result["exercise"] not in found:
            found[result["exercise"]] = rubric.by_id[result["id"]].hints
    return found


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


def record_run(path, source_sha, progress, ladder_of=None):
    """Remember which exercises the file with this content passes (for a plain `make hint`), and
    which ladder each unfinished one leads to."""
    state = load_state(path)
    state["last_run"] = {"sha256": source_sha, "done": dict(progress), "ladders": ladder_of or {}}
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


# The hint tool's own words (the hints themselves are the rubric's), zh and en.
TEXT = words.table("hints")


def render(exercise, level, total, text, lang, repeated, section=None, addresses=()):
    """One hint, where the lesson teaches it (`section`, and each of its titles' `addresses` on
    the course's pages where the instructor set them), and what next."""
    words = TEXT[lang]
    lines = [words["title"].format(exercise=exercise, level=level, total=total), "",
             f"  {text}", ""]
    if section:  # where in the lesson the exercise is taught
        lines += [words["section"].format(section=section)]
        lines += ["  " + address for address in addresses] + [""]
    if repeated:
        lines.append(words["repeated"].format(total=total))
    elif level == total:
        lines.append(words["last"].format(exercise=exercise))
    else:
        lines.append(words["more"].format(make=f"make hint EX={exercise}", next=level + 1))
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
        done, rubric = last["done"], rubric_module.load()
        progress = [(n, done[n] is True) for n in rubric.exercises() if n in done]
        if progress:  # else a record from another rubric: check again
            exercise = first_unfinished(progress)
            ladder = (last.get("ladders") or {}).get(exercise) if exercise else None
            return (ladder if ladder in rubric.hints else exercise), "state"
    from grader.judge import service
    from grader import options

    limits = options.limits_from(args)
    data = service.grade(submission, ("public",), args.isolation, limits)
    rubric = rubric_module.load()
    progress, ladder_of = exercise_progress(rubric, data), ladders(rubric, data)
    record_run(state_file, sha, progress, ladder_of)
    exercise = first_unfinished(progress)
    return (ladder_of.get(exercise, exercise) if exercise else None), "checked"


def main(args):
    rubric = rubric_module.load()
    state_file = state_path(args.submission)
    words = TEXT[args.lang]
    if args.exercise:
        exercise = resolve(rubric, args.exercise)
        if exercise is None:
            print(words["no_exercise"].format(name=args.exercise, known=", ".join(rubric.hints)),
                  file=sys.stderr)
            return 2
    else:
        try:
            exercise, source = unfinished_now(args.submission, args, state_file)
        except SubmissionError as exc:
            print(words["error"].format(message=exc.said(args.lang)), file=sys.stderr)
            return 2
        if exercise is None:
            print(words["all_pass"])
            return 0
        if source == "checked":
            print(words["ran"].format(exercise=exercise))
    if exercise not in rubric.hints:
        print(words["no_hints"].format(exercise=exercise), file=sys.stderr)
        return 2
    state = load_state(state_file)
    if args.reset:
        state["levels"].pop(exercise, None)
    already = state["levels"].get(exercise, 0)
    level, total, text = next_hint(rubric, exercise, args.lang, state)
    save_state(state_file, state)
    check = next((c for c in rubric.checks if exercise in (c.hints, c.exercise)), None)
    section = check and rubric.section(check.section, args.lang)
    sys.stdout.write(render(exercise, level, total, text, args.lang, repeated=already >= total,
                            section=section,
                            addresses=rubric.addresses(check.section) if check else ()))
    return 0
