"""make bench: grading time against the floor of any torch process, measured side by side.

Each round runs the three commands one after the other (interleaved, so drift hits all alike);
medians and ratios to a bare `import torch` are printed.  Targets: grade <= 1.5, check <= 1.3.
"""
import os
import statistics
import subprocess
import sys
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


def main():
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


if __name__ == "__main__":
    sys.exit(main())
