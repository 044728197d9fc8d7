"""make bench: grading time against the floor of any torch process, measured side by side.

Part 1 (one submission): each round runs the three commands one after the other (interleaved, so
drift hits all alike); medians and ratios to a bare `import torch` are printed.  Targets: grade
<= 1.5, check <= 1.3.

The student's loop (BENCH_PART=student, also in `all`), as ratios to the same run's `import torch`:
`make watch` on the reference, BENCH_SAVES (20) saves in a row, BENCH_PAUSE (1.0) s apart (a
student's shortest pause), save -> screen for each, every worker's warm/cold state (target: every
save, the 2nd and the 20th alike, <= 0.25); the student notebook of a freshly built bundle with
the reference filled in, executed top to bottom in a real kernel (targets: each `%check` after
the first <= 0.25, the whole notebook <= 5).

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
# The student's loop: "auto" forks workers where the fork server works, "spare" never does (what
# an ordinary user with bubblewrap gets): BENCH_WORKER_START=spare measures that path here.
START = os.environ.get("BENCH_WORKER_START", "auto")


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


# -- the student's loop: watch and the notebook ---------------------------------------------------
def import_torch_floor(rounds=3):
    timed([PY, "-c", "import torch"])  # the page cache
    return statistics.median(timed([PY, "-c", "import torch"]) for _ in range(rounds))


def bench_watch(floor, saves, pause):
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
    import test_watch  # its Watcher drives the real watch process, as the tests do

    with tempfile.TemporaryDirectory(prefix="attn-bench-watch-") as folder:
        target, scratch = os.path.join(folder, "attention.py"), os.path.join(folder, "tmp")
        os.makedirs(scratch)
        stats = os.path.join(folder, "stats.jsonl")
        test_watch.save(target, test_watch.SOLUTION)
        watcher = test_watch.Watcher(target, scratch, "--stats", stats, "--worker-start", START)
        try:
            watcher.next_block(0, lambda b: "5/5 exercises done" in b, seconds=300)
            seen = []
            for n in range(saves):
                time.sleep(pause)
                _, seconds = watcher.save_and_wait(target, test_watch.SOLUTION + f"# {n}\n",
                                                   lambda b: "5/5 exercises done" in b, 300)
                seen.append(seconds)
            watcher.interrupt()
        finally:
            watcher.kill()
        with open(stats, encoding="utf-8") as handle:
            runs = [json.loads(line) for line in handle][1:]
    workers = [w for r in runs for w in r["workers"]]
    cold = sum(1 for w in workers if not w["warm"])
    worst = max(seen)
    print(f"make watch, {saves} saves {pause:g} s apart (save -> screen): median "
          f"{statistics.median(seen):.2f} s = {statistics.median(seen) / floor:.2f}x, 2nd save "
          f"{seen[1] / floor:.2f}x, last {seen[-1] / floor:.2f}x, worst {worst / floor:.2f}x  "
          f"(target each <= 0.25: {'ok' if worst / floor <= 0.25 else 'MISSED'}); "
          f"{len(workers) - cold}/{len(workers)} workers warm")


def student_notebook(folder):
    """A freshly built student bundle's notebook with the reference in its solution cells."""
    from grader.authoring import stubs as authoring, notebook_build

    bundle = authoring.build_release(os.path.join(folder, "bundle"))
    with open(os.path.join(bundle, "attention.ipynb"), encoding="utf-8") as handle:
        release = json.load(handle)
    with open(authoring.SOLUTION, encoding="utf-8") as handle:
        pieces = dict(notebook_build.split_source(handle.read())[2])
    return bundle, notebook_build.handed_in(release, pieces)


def cell_seconds(cell):
    import datetime

    times = cell.metadata.get("execution", {})
    if "iopub.execute_input" not in times or "shell.execute_reply" not in times:
        return None
    begin, end = (datetime.datetime.fromisoformat(times[k].replace("Z", "+00:00"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - begin).total_seconds()


def bench_notebook(floor):
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, ROOT)
    with tempfile.TemporaryDirectory(prefix="attn-bench-nb-") as folder:
        bundle, nb = student_notebook(folder)
        node = nbformat.reads(json.dumps(nb), as_version=4)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ATTN_KIT_AUTOGRADE")}
        env["ATTN_KIT_WORKER_START"] = START
        began = time.perf_counter()
        saved, os.environ = os.environ, env  # the kernel inherits the environment
        try:
            NotebookClient(node, timeout=600, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": bundle}}).execute()
        finally:
            os.environ = saved
        whole = time.perf_counter() - began
    checks = [cell_seconds(c) for c in node.cells
              if c.cell_type == "code" and c.source.startswith("%check")]
    later = checks[1:]
    print("  %check cells, s:", " ".join(f"{c:.2f}" for c in checks))
    print(f"student notebook, top to bottom (kernel start included): {whole:.1f} s = "
          f"{whole / floor:.2f}x (target <= 5: {'ok' if whole / floor <= 5 else 'MISSED'}); "
          f"first %check {checks[0] / floor:.2f}x, later %check median "
          f"{statistics.median(later) / floor:.2f}x, worst {max(later) / floor:.2f}x "
          f"(target <= 0.25: {'ok' if max(later) / floor <= 0.25 else 'MISSED'})")


def bench_student():
    floor = import_torch_floor()
    print(f"\nthe student's loop (workers: {START}); bare `import torch` here: {floor:.2f} s "
          "(median of 3)")
    bench_watch(floor, int(os.environ.get("BENCH_SAVES", "20")),
                float(os.environ.get("BENCH_PAUSE", "1.0")))
    bench_notebook(floor)


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
    if part in ("all", "student"):
        bench_student()
    if part in ("all", "batch"):
        bench_batch()


if __name__ == "__main__":
    sys.exit(main())
