"""One judge, kept for many gradings: the only way the kit grades, from one file to a class.

A Judge holds where its workers come from (workers.WorkerSource) and one pytest check session per
set of visibilities (runner.CheckSession).  Every door begins and finishes a submission through
it, so a file's verdict cannot depend on the door it came through.  Nothing heavy is imported
before `begin` has started the first worker: its torch import overlaps with the judge's own.
"""
from grader.judge.student import Student
from grader.judge.workers import WorkerSource


class Judge:
    """`start`: "exec" (every worker cold), "auto"/"fork" (forked where it works), "spare";
    `spares`: workers kept started ahead where there is no fork server; `refill`: replace them
    after each grading (False for a judge that grades one submission)."""

    def __init__(self, limits=None, isolation="auto", start="exec", spares=0, refill=True):
        self.workers = WorkerSource(isolation, limits, start=start, spares=spares, refill=refill)
        self.limits, self.isolation = self.workers.limits, self.workers.isolation
        self.sessions = {}

    def begin(self, path):
        """(sub, student) for the submission at `path`, its worker started; SubmissionError for
        what cannot be graded."""
        from grader import process
        from grader.judge import grading

        try:
            return grading.start(path, self.isolation, self.limits, self.workers)
        except BaseException:  # no checks for it: the held start is over (watch and the
            process.release_gc()  # notebook's judge go on waiting for the next file)
            raise

    def student(self, sub, limits=None):
        """The judge-side proxy of a loaded `sub` on this judge's workers (not started)."""
        return Student(lambda: sub.work_dir, limits=limits or self.limits, workers=self.workers,
                       source=sub.source)

    def session(self, visibilities):
        """The check session for these visibilities (made on first need)."""
        from grader.judge import memory, runner

        # Before the first check, which is when large answers come: their memory goes back when
        # freed.  Not in __init__: ctypes would be imported before a `grade`'s worker starts.
        memory.return_large_blocks()
        key = tuple(sorted(visibilities))  # a notebook's %check (public), its autograder (all)
        if key not in self.sessions:
            self.sessions[key] = runner.CheckSession(visibilities)
        return self.sessions[key]

    def finish(self, sub, student, visibilities=("public", "hidden"), entry=None,
               exercises=None):
        """The report data of a begun submission (grading.finish); its worker is closed."""
        from grader.judge import grading

        try:
            return grading.finish(sub, student, visibilities, session=self.session(visibilities),
                                  entry=entry, exercises=exercises)
        finally:
            self.workers.after_grading()  # replace the spares used, while the student is typing

    def grade(self, path, visibilities=("public", "hidden")):
        """One submission's report data, its checks run in this judge's kept session."""
        sub, student = self.begin(path)
        return self.finish(sub, student, visibilities)

    def close(self):
        from grader import process

        process.release_gc()  # where no session got as far as its checks
        for session in self.sessions.values():
            session.close()
        self.sessions = {}
        self.workers.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def grade(path, visibilities=("public", "hidden"), isolation="auto", limits=None):
    """One submission's report data, through a judge of its own with cold workers."""
    with Judge(limits, isolation) as judge:
        return judge.grade(path, visibilities)
