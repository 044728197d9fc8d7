"""`make bench` cannot rot: one run of it with tiny sizes (BENCH_TINY=1) produces every figure.

Only that each figure is there and is a finite, positive number: never its value (the bench's
targets are printed by `make bench`, not asserted; a shared machine's timings are noise).  About
3-4 minutes on 2 busy cores: every door runs once (grade, check, Gradescope, watch forked and
with spares, the notebook in a kernel, a batch of 3, nbgrader on one notebook, --jobs 1 and the
default).
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPECTED = {
    # single
    "grade_x", "check_x", "gradescope_vs_grade",
    # student
    "watch_fork_worst_x", "watch_spare_worst_x", "notebook_x", "notebook_shutdown_x",
    "first_check_x", "later_check_x",
    # batch: throughput, memory, the CPU split
    "batch_per_submission_x", "batch_spread", "batch_outside_grading", "one_process_each_x",
    "nbgrader_x",
    "batch_vs_nbgrader",
    "judge_mb", "worker_mb", "cpu_per_reference", "cpu_per_submission", "cpu_judge", "cpu_checks",
    "cpu_pages", "cpu_worker", "cpu_training", "cpu_per_call",
    "cpu_start",
    "cpu_class_outputs", "cpu_similarity", "cpu_big_class_near_copies", "machine_busy_share",
    "cpu_machine_rest",
    # jobs
    "jobs_1_per_min", "jobs_default_vs_best", "jobs_small_default_vs_best",
    # memory
    "judge_peak_reference_mb", "judge_peak_largest_frames_mb",
}


def test_every_part_of_the_bench_produces_its_figures(tmp_path):
    figures = tmp_path / "figures.json"
    env = dict(os.environ, BENCH_TINY="1", BENCH_JSON=str(figures), BENCH_PART="all")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench.py")], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = json.loads(figures.read_text(encoding="utf-8"))
    assert EXPECTED <= set(found), sorted(EXPECTED - set(found))
    # A CPU figure may round to 0 on a coarse clock; every other figure is a time, a ratio of
    # times, a rate or a size, never 0.
    bad = {k: v for k, v in found.items() if not isinstance(v, (int, float))
           or not math.isfinite(v) or v < 0 or (v == 0 and not k.startswith("cpu_"))}
    assert bad == {}
    # Every figure is printed too, each with its target where it has one.
    for words in ("grade (every check)", "make watch, workers forked", "spares only",
                  "student notebook, top to bottom", "batch vs nbgrader",
                  "from one run to the next", "peak memory: judge",
                  "the copy task's training", "the near-copies", "near-copies of a class of",
                  "--jobs 1:", "judge peak after the largest frames"):
        assert words in result.stdout, words
    assert result.stdout.count("(target ") >= 10
    # ...and all of them again at the end, listed but not judged at tiny sizes.
    closing = result.stdout[result.stdout.rindex("targets: "):]
    assert closing.startswith("targets: ") and "not judged at tiny sizes" in closing
    assert closing.count("(target ") == result.stdout.count("(target ") // 2


def test_the_closing_summary_names_each_missed_target_with_its_margin():
    import bench

    targets = [("batch_vs_nbgrader", 48.0, ">=", 50, False), ("grade_x", 0.84, "<=", 1.05, True),
               ("judge_mb", 262.5, "<=", 350, True)]
    lines = bench.summary(targets, tiny=False)
    assert lines[0] == "targets: 1 of 3 MISSED"
    assert lines[1].split() == ["MISSED", "batch_vs_nbgrader:", "48", "(target", ">=", "50;",
                                "margin", "-4%)"]
    assert lines[2].split()[:2] == ["ok", "grade_x:"] and lines[2].endswith("margin +20%)")
    assert lines[3].endswith("margin +25%)")
    met = bench.summary(targets[1:], tiny=False)
    assert met[0] == "targets: all 2 met" and "MISSED" not in "\n".join(met)
    tiny = bench.summary(targets, tiny=True)
    assert "not judged" in tiny[0] and "MISSED" not in "\n".join(tiny)
    assert bench.summary([], tiny=False) == []
    hair = bench.summary([("check_x", 1.004, "<=", 1.0, False)], tiny=False)
    assert hair[1].endswith("margin -0.4%)")


def test_a_memory_bench_that_ends_without_its_figures_fails_the_run(monkeypatch, tmp_path):
    """Its figures come from a process of its own: one that dies says so and fails `make bench`
    (after the summary), never passes for a run with nothing to report."""
    import bench

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bench_judge_memory.py").write_text(
        "import sys\nprint('killed halfway')\nsys.exit(3)\n", encoding="utf-8")
    monkeypatch.setattr(bench, "PY", sys.executable)
    monkeypatch.setattr(bench, "ROOT", str(tmp_path))
    monkeypatch.setattr(bench, "BROKEN", [])
    bench.bench_memory()
    assert len(bench.BROKEN) == 1
    assert "without figures (exit 3)" in bench.BROKEN[0] and "killed halfway" in bench.BROKEN[0]
