"""One submission, start to finish: work folder -> worker -> checks -> report data.

The worker is started before the judge imports torch and pytest, so the two imports overlap.
"""
import platform

from grader import process
from grader.judge import submission
from grader.judge.student import Student

SEED = 20261129


def start(path, isolation="auto", limits=None, workers=None):
    """Load the submission and start its worker at once (nothing heavy imported yet), from
    `workers` (a long-lived judge's workers.WorkerSource) or cold."""
    sub = submission.load(path)
    student = Student(lambda: sub.work_dir, limits=limits, isolation=isolation, workers=workers,
                      source=sub.source)
    student.start()
    return sub, student


def finish(sub, student, visibilities=("public", "hidden"), session=None, entry=None,
           exercises=None):
    """Run the checks against a started worker; return the report data, complete.

    `session`: a runner.CheckSession for these visibilities, kept across submissions.  `entry`
    names the submission instead of its path.  `exercises` (the notebook's `%check attend`) runs
    only their checks: each judges its own piece, so verdicts are a whole grading's."""
    import torch

    from grader import rubric as rubric_module
    from grader.render.model import Report
    from grader.judge import runner

    prepare(sub, student)
    rubric = rubric_module.load()
    try:
        checks = in_scope(rubric, rubric.select(visibilities), exercises)
        only = None if exercises is None else {check.id for check in checks}
        # pytest-json-report's document of the checks' tests: the report is built from it
        document = session.run(student, only) if session else \
            runner.run(student, visibilities, only)
    finally:
        student.close()
        sub.cleanup()
    metadata = {
        "submission": entry or sub.origin, "kind": sub.kind, "seed": sub.seed,
        "left_out": list(sub.left_out), "torch": torch.__version__,
        "python": platform.python_version(), "rubric_version": rubric.version,
        "rubric_hash": rubric.hash, "isolation": student.workers.isolation,
        "limits": student.limits.describe(), "worker_starts": student.starts,
        "worker_start": student.workers.kind,
        "worker_events": student.events, "student_output": student.student_output()[:4000],
        # Seconds spent waiting on the student's code (import and calls), the one time budget's
        # own account: tests bound a hostile submission by it instead of by a wall clock.
        "student_seconds": round(student.spent + student.reserve_spent, 3),
        "visibilities": list(visibilities), "devices": student.devices_seen or [],
        "hidden_not_run": 0 if "hidden" in visibilities else
        len(in_scope(rubric, rubric.select(("hidden",)), exercises)),
    }
    if exercises is not None:
        metadata["exercises"] = sorted(exercises)
    if getattr(sub, "package", None) is not None:  # a `make submit` zip: its manifest, verified
        metadata["package"] = sub.package
    return Report.from_parts(checks, runner.parts_of(document), metadata,
                             runner.carried(document)).data()


def prepare(sub, student):
    """What the judge sets before the checks of one submission run (every door, and plain
    pytest on the checks: checks/conftest.py)."""
    from grader.sandbox.runtime import copytask

    # The CPU's generator, which is all the judge draws from (its inputs come from generators of
    # their own): torch.manual_seed would queue one more formatted stack a submission.
    copytask.seed_cpu(SEED)
    student.seed = sub.seed  # the checks' `seed` fixture: fresh inputs, recorded in the report
    process.one_thread_here()  # tiny tensors: a pool per op only fights the other processes


def in_scope(rubric, checks, exercises=None):
    """The checks of `exercises` (all of them for None); an exercise the rubric lacks is an error."""
    if exercises is None:
        return checks
    unknown = sorted(set(exercises) - set(rubric.exercises()))
    if unknown:
        raise ValueError(f"no such exercise: {', '.join(unknown)}")
    return [check for check in checks if check.exercise in exercises]
