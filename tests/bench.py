"""make bench: grading time against the floor of any torch process, measured side by side.

Part 1 (one submission): each round runs the three commands one after the other (interleaved, so
drift hits all alike); medians and ratios to a bare `import torch` are printed.  Targets: grade
<= 1.5, check <= 1.3.

Part 2 (a class): BENCH_N (200) submissions, copies of the corpus's .py fixtures (the reference,
the correct styles, the one-mistake ones), graded by `python -m grader batch --jobs 2`, next to
the same submissions graded one `python -m grader grade` process each (two at a time) and as
notebooks by `nbgrader autograde`.  The two slow ways grade the first BENCH_SAMPLE (20) of the
same list unless BENCH_SAMPLE=BENCH_N; seconds per submission are compared.  Target: the batch
at least 30 times nbgrader's throughput.  BENCH_PART=single|batch runs one part.
"""
import concurrent.futures
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, ".venv", "bin", "python")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
COMMANDS = {
    "import torch": [PY, "-c", "import torch"],
    "grade reference (all checks)": [PY, "-m", "grader", "grade", "solutions/attention.py",
                                     "--format", "json"],
    "make check (public checks)": ["make", "-s", "check", "SUBMISSION=solutions/attention.py"],
}
TARGETS = {"grade reference (all checks)": 1.5, "make check (public checks)": 1.3}


def timed(argv):
    began = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - began


def bench_single():
    for argv in COMMANDS.values():  # warm the page cache once
        timed(argv)
    times = {name: [] for name in COMMANDS}
    for _ in range(ROUNDS):
        for name, argv in COMMANDS.items():
            times[name].append(timed(argv))
    floor = statistics.median(times["import torch"])
    print(f"{'command':32} {'median s':>9} {'min s':>7} {'ratio':>6}  target")
    for name, values in times.items():
        median = statistics.median(values)
        target = TARGETS.get(name)
        verdict = "" if target is None else f"<= {target}  {'ok' if median / floor <= target else 'MISSED'}"
        print(f"{name:32} {median:9.2f} {min(values):7.2f} {median / floor:6.2f}  {verdict}")
    print(f"({ROUNDS} interleaved rounds, {os.cpu_count()} cores)")


# -- part 2: a class ----------------------------------------------------------------------------
def class_fixtures():
    """The corpus's .py submissions that are also a notebook (each exercise in its own cell)."""
    sys.path.insert(0, ROOT)
    from grader.authoring import notebook_build
    from grader import rubric

    exercises = set(rubric.load().exercises())
    paths = [os.path.join(ROOT, "solutions", "attention.py")]
    paths += sorted(glob.glob(os.path.join(ROOT, "tests", "submissions", "correct", "*.py")))
    paths += sorted(glob.glob(os.path.join(ROOT, "tests", "submissions", "wrong", "*.py")))
    usable = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            names = {name for name, _ in notebook_build.split_source(handle.read())[2]}
        if names <= exercises:
            usable.append(path)
    return usable


def run_batch(folder, out):
    began = time.perf_counter()
    result = subprocess.run([PY, "-m", "grader", "batch", folder, "--out", out, "--jobs", "2"],
                            cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    memory = re.search(r"judge (\d+) MiB, worker (\d+) MiB", result.stderr)
    workers = re.search(r"workers ([^\n]+)", result.stderr)
    return seconds, memory.groups() if memory else ("?", "?"), workers.group(1) if workers else "?"


def run_one_process_each(paths):
    def one(path):
        subprocess.run([PY, "-m", "grader", "grade", path, "--format", "json"], cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(one, paths))
    return time.perf_counter() - began


def run_nbgrader(paths, folder):
    """`nbgrader autograde` of the same submissions as notebooks, in a throw-away course."""
    from grader.authoring import course as nbgrade
    from grader.authoring import notebook_build

    course = os.path.join(folder, "course")
    os.makedirs(course)
    release = nbgrade.new_course(course)
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            pieces = dict(notebook_build.split_source(handle.read())[2])
        target = os.path.join(course, "submitted", os.path.basename(path)[:-3], nbgrade.ASSIGNMENT)
        os.makedirs(target)
        with open(os.path.join(target, "attention.ipynb"), "w", encoding="utf-8") as handle:
            handle.write(notebook_build.dumps(notebook_build.handed_in(release, pieces)))
    code, output, seconds = nbgrade.nbgrader(["autograde", nbgrade.ASSIGNMENT, "--force"], course)
    graded = len(glob.glob(os.path.join(course, "autograded", "*", nbgrade.ASSIGNMENT)))
    if code != 0 or graded != len(paths):
        raise RuntimeError(f"nbgrader autograde: exit {code}, {graded}/{len(paths)} graded\n"
                           + output[-2000:])
    return seconds


def bench_batch():
    n = int(os.environ.get("BENCH_N", "200"))
    sample = min(int(os.environ.get("BENCH_SAMPLE", "20")), n)
    fixtures = class_fixtures()
    with tempfile.TemporaryDirectory(prefix="attn-bench-") as folder:
        klass = os.path.join(folder, "class")
        os.makedirs(klass)
        paths = []
        for i in range(n):
            source = fixtures[i % len(fixtures)]
            paths.append(os.path.join(klass, f"s{i:03d}_{os.path.basename(source)}"))
            shutil.copyfile(source, paths[-1])
        batch_seconds, (judge_mb, worker_mb), workers = run_batch(klass, os.path.join(folder, "out"))
        process_seconds = run_one_process_each(paths[:sample])
        nbgrader_seconds = run_nbgrader(paths[:sample], folder)
    rows = [("python -m grader batch --jobs 2", n, batch_seconds),
            ("one `grader grade` process each (2 at a time)", sample, process_seconds),
            ("nbgrader autograde (notebooks)", sample, nbgrader_seconds)]
    per_nbgrader = nbgrader_seconds / sample
    print(f"\n{n} submissions ({len(fixtures)} distinct fixtures, copied); "
          f"the slow ways on the first {sample} of them")
    print(f"{'method':48} {'graded':>6} {'wall s':>8} {'s/submission':>13} {'throughput':>11}")
    for name, count, seconds in rows:
        per = seconds / count
        print(f"{name:48} {count:6d} {seconds:8.1f} {per:13.3f} {per_nbgrader / per:10.1f}x")
    ratio = per_nbgrader / (batch_seconds / n)
    print(f"batch vs nbgrader: {ratio:.1f}x  (target >= 30x: {'ok' if ratio >= 30 else 'MISSED'}); "
          f"batch vs one process each: {process_seconds / sample / (batch_seconds / n):.1f}x")
    print(f"peak memory: judge {judge_mb} MiB, worker {worker_mb} MiB (resident, shared torch "
          f"pages counted in full); workers {workers}")


def main():
    part = os.environ.get("BENCH_PART", "all")
    if part in ("all", "single"):
        bench_single()
    if part in ("all", "batch"):
        bench_batch()


if __name__ == "__main__":
    sys.exit(main())
