"""`make bench` cannot rot: one run of it with tiny sizes (BENCH_TINY=1) produces every figure.

Only that each figure is there and is a finite, positive number: never its value (the bench's
floors are printed by `make bench`, not asserted; a shared machine's timings are noise).  A few
minutes on 2 busy cores: every door runs once (check, grade, watch forked and with spares, the
notebook in a kernel, a class of 2 with and without the fork server, nbgrader on one notebook,
three files of the corpus, the judge's memory).
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPECTED = {
    "meta_op_x", "check_x", "grade_x",  # single
    "watch_fork_worst_x", "watch_spare_worst_x", "notebook_x",  # student
    "class_per_submission_x", "class_vs_nbgrader", "fork_server_gain",  # class
    "corpus_per_submission_x",  # corpus
    "judge_mb", "worker_mb", "judge_peak_largest_frames_mb",  # memory
}


def test_every_part_of_the_bench_produces_its_figures(tmp_path):
    figures = tmp_path / "figures.json"
    env = dict(os.environ, BENCH_TINY="1", BENCH_JSON=str(figures), BENCH_PART="all")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench.py")], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found = json.loads(figures.read_text(encoding="utf-8"))
    assert EXPECTED <= set(found), sorted(EXPECTED - set(found))
    bad = {k: v for k, v in found.items() if not isinstance(v, (int, float))
           or not math.isfinite(v) or v <= 0}
    assert bad == {}
    for words in ("make check (public checks)", "grade (every check)", "make watch, workers forked",
                  "spares only", "student notebook, top to bottom", "batch vs nbgrader autograde",
                  "what the fork server buys", "worker peak grading the reference", "the kit's corpus",
                  "judge peak after the largest frames"):
        assert words in result.stdout, words
    assert result.stdout.count("(floor ") >= 8
    closing = result.stdout[result.stdout.rindex("floors: "):]
    assert "not judged at tiny sizes" in closing
    assert closing.count("(floor ") == result.stdout.count("(floor ") // 2


def test_the_closing_summary_names_each_missed_floor_with_its_margin():
    import bench

    floored = [("class_vs_nbgrader", 28.5, ">=", 30, False), ("grade_x", 0.84, "<=", 1.2, True),
               ("judge_mb", 262.5, "<=", 350, True)]
    lines = bench.summary(floored, tiny=False)
    assert lines[0] == "floors: 1 of 3 MISSED"
    assert lines[1].split() == ["MISSED", "class_vs_nbgrader:", "28.5", "(floor", ">=", "30;",
                                "margin", "-5%)"]
    assert lines[2].split()[:2] == ["ok", "grade_x:"] and lines[2].endswith("margin +30%)")
    assert lines[3].endswith("margin +25%)")
    met = bench.summary(floored[1:], tiny=False)
    assert met[0] == "floors: all 2 met" and "MISSED" not in "\n".join(met)
    tiny = bench.summary(floored, tiny=True)
    assert "not judged" in tiny[0] and "MISSED" not in "\n".join(tiny)
    assert bench.summary([], tiny=False) == []
    hair = bench.summary([("check_x", 1.104, "<=", 1.1, False)], tiny=False)
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
    assert len(bench.BROKEN) == 1 and "without figures (exit 3)" in bench.BROKEN[0]
    assert "killed halfway" in bench.BROKEN[0]
