"""The corpus's hostile submissions (tests/submissions/hostile/*.py): each attacks the grader, and
HOSTILE says what must come out.  A file apart from test_corpus.py (whose grading by a judge of
its own, test_corpus.graded, it shares for the files it grades cold), so that make test's workers
(`--dist loadfile`) grade these slow submissions beside the rest of the corpus."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import zygotes
from grader.sandbox.launch import Limits
from test_corpus import (GRADE_SECONDS, ISOLATION, ROOT, RUBRIC, SUBMISSIONS, Graded, corpus,
                         graded, ids, within_budget)


def test_every_hostile_file_has_its_expectations():
    assert set(ids(corpus("hostile"))) == {f"{name}.py" for name in HOSTILE}


# -- hostile submissions ---------------------------------------------------------------------
# Checks that score the module's forward (and so attend, split_heads and merge_heads).
FORWARD = ["module.shapes", "module.causal", "module.reference", "module.gradients",
           "module.learns"]
# Checks of pieces built in __init__ (the parameters, the mask) and of the source: a crash, hang
# or memory bomb in forward must not cost them (forward's behaviour only adds where it runs).
MODULE_BUILD = ["module.no_library_attention", "module.param_count", "module.mask_buffer"]
ALL = ["*"]

# name -> zero: patterns of checks that must score 0 and not pass; full: patterns of checks that
# must pass with full points (the hostile part must not cost them); status: allowed statuses;
# keys: a message key each matching check's verdicts must hold.
HOSTILE = {
    "exit_at_import": dict(zero=ALL, keys={"quiz.*": "import_failed", "attend.*": "import_failed"}),
    "import_grader": dict(zero=ALL, keys={"quiz.*": "import_failed", "attend.*": "import_failed"}),
    "os_exit_in_attend": dict(
        zero=["attend.*"] + FORWARD,
        full=["split_heads.*", "merge_heads.*", "quiz.*"] + MODULE_BUILD,
        status={"attend.*": {"error"}}, keys={"attend.*": "crashed"}),
    "infinite_loop_in_attend": dict(
        zero=["attend.*"] + FORWARD,
        full=["split_heads.*", "merge_heads.*", "quiz.*"] + MODULE_BUILD,
        status={"attend.*": {"timeout"}}, keys={"attend.*": "timeout"}),
    "memory_hog_in_split": dict(
        zero=["split_heads.*"] + FORWARD,
        full=["merge_heads.*", "attend.*", "quiz.*"] + MODULE_BUILD,
        status={"split_heads.*": {"error"}}, keys={"split_heads.*": "memory_limit"}),
    # a memory bomb is named by the memory limit, however slowly it reaches it (student.Overtime)
    "memory_bomb_in_attend": dict(
        zero=["attend.*"] + FORWARD,
        full=["split_heads.*", "merge_heads.*", "quiz.*"] + MODULE_BUILD,
        status={"attend.*": {"error"}}, keys={"attend.*": "memory_limit",
                                              "module.shapes": "memory_limit"}),
    # a worker that ignores SIGTERM is killed all the same (SIGKILL); the count, read from torch's
    # registries before forward runs, keeps its points
    "forward_ignores_sigterm": dict(
        zero=FORWARD,
        full=["split_heads.*", "merge_heads.*", "attend.*", "quiz.*"] + MODULE_BUILD,
        status={"module.shapes": {"timeout"}}, keys={"module.shapes": "timeout",
                                                     "module.causal": "timeout"}),
    "patch_allclose": dict(zero=ALL),
    "fake_json_stdout": dict(zero=ALL),
    "lying_tensor": dict(zero=ALL, keys={"split_heads.shape": "wrong_shape",
                                         "split_heads.transpose": "wrong_shape"}),
    # attend.device judges only attention it has seen on the CPU: the impostor is the other
    # attend cards' to name, that card says it could not observe (and costs what it is worth)
    "fake_shape_object": dict(zero=ALL, keys={"merge_heads.*": "wrong_type",
                                              "attend.[!d]*": "wrong_type",
                                              "attend.device": "device_unobserved"}),
    "write_results_json": dict(zero=ALL),
    # nothing defined is nothing attempted: every check says which name is missing
    "defines_nothing": dict(zero=ALL, keys={"split_heads.*": "not_defined",
                                            "merge_heads.*": "not_defined",
                                            "attend.*": "not_defined", "module.*": "not_defined",
                                            "quiz.*": "quiz_missing"}),
}


# A worker that dies, hangs or meets its memory limit in a call is replaced for later calls, a
# cold start each (~2.5 s of CPU), and every grading here is a verdict of the judge's, which it
# names alike however its worker started (tests/test_forkserver.py): the files are graded by
# workers forked from this module's fork server (zygotes.server), but those whose own subject is
# a cold worker's: an exit and an import of the grader at import time (the worker that never says
# hello), the fake results file in a course's folder (test_results_json_is_...) and, through the
# one CLI run below, the fake JSON on stdout.  A cold worker's crash, hang and restarts stay proven
# by test_hostile.py's test_import_time_and_restarts_count_against_one_budget (cold bubblewrap),
# the kill past SIGTERM by test_held_out.py's test_a_worker_that_ignores_sigterm_is_killed (every
# mode), the memory limit's verdict by test_held_out.py's
# test_memory_that_grows_past_the_calls_time_is_named_by_the_limit and test_sandbox.py's
# test_memory_hog_is_stopped_by_the_limit (every mode, cold ones included).
COLD_HERE = ("exit_at_import", "import_grader", "write_results_json")
# The hangs spin for each call's whole time: 2 s a call, not the kit's 5 (what they prove is the
# verdict a timeout gets, not its length; the reference's own calls take well under a tenth of it
# and training has a limit of its own, as in test_batch's and test_classpage's hostile classes).
HANG_LIMITS = {name: Limits(call_seconds=2.0)
               for name in ("infinite_loop_in_attend", "forward_ignores_sigterm")}
_forked = {}


def graded_forked(path):
    """graded(path), but by a worker forked from this module's fork server; what it left in the
    server's spool (a forked worker's copy of the file, in bubblewrap) counts as left over."""
    from grader.judge import grading
    from grader.judge.workers import forked
    from grader.sandbox import forkserver, launch

    isolation = launch.choose_isolation(ISOLATION)
    if not forkserver.supported(isolation):
        return graded(path)
    if path not in _forked:
        server = zygotes.server(isolation)
        limits, workers = HANG_LIMITS.get(path.stem), forked(server)
        g = Graded.grade(path, lambda p: grading.finish(*grading.start(p, isolation, limits,
                                                                       workers)))
        if server.spool:  # a copy is removed when the zygote reports its worker's exit
            deadline = time.monotonic() + 15
            while os.listdir(server.spool) and time.monotonic() < deadline:
                time.sleep(0.1)
            g.leftovers += sorted(os.listdir(server.spool))
        _forked[path] = g
    return _forked[path]


def graded_hostile(name, tmp_path_factory):
    """hostile/NAME.py graded by a forked worker, but COLD_HERE by graded() (a judge of its own,
    a cold worker) and write_results_json once in a course's layout (graded_in_a_course, which
    test_results_json_is_not_... reads)."""
    if name == "write_results_json":
        return graded_in_a_course(tmp_path_factory)[0]
    path = SUBMISSIONS / "hostile" / f"{name}.py"
    return graded(path) if name in COLD_HERE else graded_forked(path)


def _matching(g, patterns):
    found = [c for pattern in patterns for c in g.select(pattern)]
    assert found, f"no check matches {patterns}"
    return found


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_submission(name, tmp_path_factory):
    spec = HOSTILE[name]
    g = graded_hostile(name, tmp_path_factory)
    assert within_budget(g.data)
    assert g.unchanged, "the original submission was written to"
    assert len(g.data["checks"]) == len(RUBRIC.checks)
    # The work and runtime folders are removed.  In bubblewrap nothing else is writable; a plain
    # subprocess can write beside its work folder (here: the fake results.json), a known limit.
    allowed = ["results.json"] if (name == "write_results_json"
                                   and g.data["metadata"]["isolation"] == "process") else []
    assert g.leftovers == allowed
    for result in _matching(g, spec["zero"]):
        assert result["status"] != "passed" and result["score"] == 0, result["id"]
    for result in _matching(g, spec["full"]) if "full" in spec else []:
        assert result["status"] == "passed", (result["id"], result["verdicts"])
        assert result["score"] == result["max_score"], result["id"]
    for pattern, statuses in spec.get("status", {}).items():
        for result in _matching(g, [pattern]):
            assert result["status"] in statuses, (result["id"], result["status"])
    for pattern, key in spec.get("keys", {}).items():
        for result in _matching(g, [pattern]):
            assert key in {v["key"] for v in result["verdicts"]}, (result["id"], result["verdicts"])
    expected_total = sum(c["max_score"] for c in _matching(g, spec["full"])) if "full" in spec else 0
    if spec["zero"] == ALL:
        assert g.data["score"] == 0
    else:
        assert g.data["score"] < g.data["max_score"]
        assert g.data["score"] >= expected_total


@pytest.mark.parametrize("name", ["exit_at_import", "import_grader"])
def test_import_failure_is_named_by_every_check(name):
    g = graded(SUBMISSIONS / "hostile" / f"{name}.py")
    wrong = {c["id"]: sorted(g.keys(c["id"])) for c in g.data["checks"]
             if g.keys(c["id"]) != {"import_failed"}}
    assert wrong == {}


def test_import_grader_fails_for_want_of_grader():
    g = graded(SUBMISSIONS / "hostile" / "import_grader.py")
    verdict = next(v for v in g.by_id["split_heads.shape"]["verdicts"] if v["key"] == "import_failed")
    assert verdict["fields"]["type"] == "ModuleNotFoundError"
    assert "grader" in verdict["fields"]["message"]


def test_student_output_is_captured_not_reported_as_a_grade():
    g = graded_forked(SUBMISSIONS / "hostile" / "fake_json_stdout.py")
    assert '"score": 39' in g.data["metadata"]["student_output"]
    assert g.data["score"] == 0


def test_fake_json_on_stdout_does_not_reach_the_cli():
    # The student's stdout is the worker's, captured whatever the format: one CLI run (JSON); the
    # other JSON format, Gradescope's, is the same render of the same report (below).
    path = SUBMISSIONS / "hostile" / "fake_json_stdout.py"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(path), "--format", "json",
                           "--lang", "en", "--isolation", ISOLATION],
                          cwd=ROOT, capture_output=True, text=True, timeout=GRADE_SECONDS)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # the whole of stdout is the one real report
    assert out["score"] == 0
    assert '"score": 39' not in done.stderr
    # a cold worker's stdout, captured into the report (the in-process gradings here fork)
    assert out["metadata"]["worker_start"] == "exec"
    assert '"score": 39' in out["metadata"]["student_output"]


def test_fake_json_on_stdout_leaves_gradescopes_report_one_json_document():
    """What `grade --format gradescope` writes to stdout (grader.__main__.render) for the same
    submission: one JSON document, whose score is the real one."""
    from grader.__main__ import render

    text = render(graded_forked(SUBMISSIONS / "hostile" / "fake_json_stdout.py").data,
                  "gradescope", "en")
    out = json.loads(text)
    assert out["score"] == 0


_course = []


def graded_in_a_course(tmp_path_factory):
    """write_results_json.py graded as alice's file in a course folder, once: (test_corpus's
    Graded of it, the folder that holds the course, its scratch temp folder, the file's bytes)."""
    if not _course:
        tmp_path = tmp_path_factory.mktemp("results-json")
        course = tmp_path / "course"
        (course / "alice").mkdir(parents=True)
        submission = course / "alice" / "attention.py"
        shutil.copy(SUBMISSIONS / "hostile" / "write_results_json.py", submission)
        scratch = tmp_path / "scratch"  # the grader's work folders
        scratch.mkdir()
        before = submission.read_bytes()
        g = Graded.grade(submission, scratch=scratch)
        _course.append((g, tmp_path, scratch, before))
    return _course[0]


def test_results_json_is_not_written_beside_the_submission(tmp_path_factory):
    g, tmp_path, scratch, before = graded_in_a_course(tmp_path_factory)
    course = tmp_path / "course"
    submission = course / "alice" / "attention.py"
    data = g.data
    assert within_budget(data)
    assert data["score"] == 0
    assert submission.read_bytes() == before
    assert sorted(p.name for p in course.rglob("*")) == ["alice", "attention.py"]
    assert not (tmp_path / "results.json").exists()
    if data["metadata"]["isolation"] == "bubblewrap":
        # In the sandbox only the work folder is writable, and it is removed afterwards.
        assert list(scratch.rglob("results.json")) == []
