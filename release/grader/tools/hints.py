"""`python -m grader hint [EXERCISE]`: the next hint for one exercise, one level at a time.

The hints are the rubric's [hints.EXERCISE] tables (zh and en, level by level, never the
solution).  The level reached, and the last watch/hint run's per-exercise progress, live in a
JSON state file beside the student's file (`.attention-hints.json`), never inside it.  Without
EXERCISE the first unfinished exercise is taken: from that state file when it describes the file
as it is now, else by running the public checks once.
"""
import hashlib
import os
import sys

from grader import options, rubric as rubric_module, statefile, words
from grader.judge import service, submission as submission_module
from grader.judge.submission import SubmissionError

STATE_VERSION = 1
TEXT = words.table("hints")  # the tool's own words; the hints themselves are the rubric's


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


def record_run(path, source_sha, progress, ladder_of=None):
    """Remember which exercises the file with this content passes (for a plain `make hint`), and
    which ladder each unfinished one leads to."""
    state = load_state(path)
    state["last_run"] = {"sha256": source_sha, "done": dict(progress), "ladders": ladder_of or {}}
    statefile.save(path, state, STATE_VERSION)


# -- hints ---------------------------------------------------------------------------------------
def resolve(rubric, name):
    """An exercise name as the rubric spells it: any case, or a check-id prefix (module.*)."""
    names = {n.lower(): n for n in rubric.hints}
    for check in rubric.checks:
        if check.exercise in rubric.hints:
            names.setdefault(check.id.split(".")[0].lower(), check.exercise)
    return names.get(name.strip().lower())


def render(exercise, level, total, text, lang, repeated, section=None, addresses=()):
    """One hint, where the lesson teaches it (`section`, and the `addresses` of its titles on the
    course's pages where the instructor set them), and what next."""
    words = TEXT[lang]
    lines = [words["title"].format(exercise=exercise, level=level, total=total), "",
             f"  {text}", ""]
    if section:
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
    """(the first unfinished exercise's ladder or None, "state" or "checked"): from the state file
    if it describes the file as it is, else by running the public checks."""
    sub = submission_module.load(submission)
    sha = source_hash(sub.source)
    sub.cleanup()
    rubric = rubric_module.load()
    last, progress = load_state(state_file).get("last_run"), []
    if isinstance(last, dict) and last.get("sha256") == sha and isinstance(last.get("done"), dict):
        done, how = last["done"], "state"
        progress = [(n, done[n] is True) for n in rubric.exercises() if n in done]
        ladder_of = last.get("ladders") or {}
    if not progress:  # no record of this content (or one from another rubric): check
        data = service.grade(submission, ("public",), args.isolation, options.limits_from(args))
        progress, ladder_of, how = exercise_progress(rubric, data), ladders(rubric, data), "checked"
        record_run(state_file, sha, progress, ladder_of)
    exercise = first_unfinished(progress)
    ladder = ladder_of.get(exercise) if exercise else None
    return (ladder if ladder in rubric.hints else exercise), how


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
    levels = rubric.hints[exercise][args.lang]
    level = min(already + 1, len(levels))  # the last level stays
    state["levels"][exercise] = level
    statefile.save(state_file, state, STATE_VERSION)
    check = next((c for c in rubric.checks if exercise in (c.hints, c.exercise)), None)
    sys.stdout.write(render(exercise, level, len(levels), levels[level - 1], args.lang,
                            repeated=already >= len(levels),
                            section=check and rubric.section(check.section, args.lang),
                            addresses=rubric.addresses(check.section) if check else ()))
    return 0
