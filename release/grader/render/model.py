"""The report model: what one grading found, frozen, made once by `grading.finish` from each check's
parts' runs (Report.from_parts: every status and score is computed there).  It travels as plain
data (`Report.data()`); data read back goes through `Report.from_data`, which refuses what does
not have the model's shape instead of letting a renderer fail on it later.
"""
import dataclasses
import enum


class Status(str, enum.Enum):
    """A check's or a part's outcome; a str, so the plain data holds the word itself."""
    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    ERROR = "error"

    @classmethod
    def worst(cls, statuses):
        """The outcome a check with these failing parts has: an error over a timeout over a
        failure (what stopped the judge from seeing is said before what it saw)."""
        order = [cls.FAILED, cls.TIMEOUT, cls.ERROR]
        return max((cls(s) for s in statuses), key=order.index)


@dataclasses.dataclass(frozen=True)
class Part:
    """One test of a check (a check with several inputs has a part per input)."""
    name: str
    status: Status

    def data(self):
        return {"name": self.name, "status": self.status.value}


# The one part of a check that has no run (the judge never got to it).
DID_NOT_RUN = {"name": "", "status": "error", "verdict": {
    "status": "error", "key": "internal", "fields": {"message": "the check did not run"}}}


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One rubric check: its score is its points times the share of its parts that passed."""
    id: str
    exercise: str
    visibility: str
    status: Status
    max_score: float
    score: float
    parts: tuple
    verdicts: tuple  # the verdict data of the failing parts (key, fields, detail, heatmap)
    notes: tuple     # what a passing part could not judge here (it cost nothing)

    @classmethod
    def from_parts(cls, check, runs):
        """Rubric check `check`'s result from its parts' runs (dicts: name, status, verdict,
        note); a check with no run is one error part."""
        runs = runs or [DID_NOT_RUN]
        passed = sum(1 for r in runs if r["status"] == Status.PASSED)
        failing = [r for r in runs if r["status"] != Status.PASSED]
        return cls(
            id=check.id, exercise=check.exercise, visibility=check.visibility,
            status=Status.worst(r["status"] for r in failing) if failing else Status.PASSED,
            max_score=check.points, score=round(check.points * passed / len(runs), 4),
            parts=tuple(Part(r["name"], Status(r["status"])) for r in runs),
            verdicts=tuple(r["verdict"] for r in failing if r["verdict"]),
            notes=tuple(r["note"] for r in runs if r.get("note")))

    def data(self):
        return {"id": self.id, "exercise": self.exercise, "visibility": self.visibility,
                "status": self.status.value, "max_score": self.max_score, "score": self.score,
                "parts": [p.data() for p in self.parts], "verdicts": list(self.verdicts),
                "notes": list(self.notes)}


@dataclasses.dataclass(frozen=True)
class Report:
    score: float
    max_score: float
    checks: tuple
    metadata: dict
    # The checks' pytest-json-report document, as runner.carried keeps it: the same in every
    # door, which the door matrix (tests/test_doors.py) compares.
    pytest: dict = None

    def data(self):
        data = {"score": self.score, "max_score": self.max_score,
                "checks": [c.data() for c in self.checks], "metadata": dict(self.metadata)}
        if self.pytest is not None:
            data["pytest"] = self.pytest
        return data

    @classmethod
    def from_parts(cls, checks, parts, metadata, pytest=None):
        """The report of rubric `checks`, each from its parts' runs in `parts` (check id -> runs),
        carrying `pytest`, the document the parts were read from."""
        results = tuple(CheckResult.from_parts(check, parts.get(check.id)) for check in checks)
        return cls(score=round(sum(r.score for r in results), 4),
                   max_score=sum(r.max_score for r in results), checks=results, metadata=metadata,
                   pytest=pytest)

    @classmethod
    def from_data(cls, data):
        """The model of a report's plain data; ValueError where it is not one."""
        try:
            checks = tuple(_check_from(c) for c in data["checks"])
            report = cls(float(data["score"]), float(data["max_score"]), checks,
                         dict(data["metadata"]), data.get("pytest"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a grading report: {type(exc).__name__}: {exc}") from None
        if abs(report.score - sum(c.score for c in checks)) > 1e-3:
            raise ValueError("not a grading report: its score is not the sum of its checks'")
        return report


def _check_from(c):
    return CheckResult(str(c["id"]), str(c["exercise"]), str(c["visibility"]), Status(c["status"]),
                       float(c["max_score"]), float(c["score"]),
                       tuple(Part(str(p["name"]), Status(p["status"])) for p in c["parts"]),
                       tuple(dict(v) for v in c.get("verdicts") or ()),
                       tuple(dict(n) for n in c.get("notes") or ()))
