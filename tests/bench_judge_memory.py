"""make bench, the judge's memory: its peak (its own high-water mark) grading the reference
(twice), then a submission whose every answer is as large as the wire lets through
(tests/submissions/isolation/huge_replies.py), in one process; the growth must stay within two
frames of wire.JUDGE_FRAME_BYTES (both answers of a call made twice).

Usage: python tests/bench_judge_memory.py [--isolation process|bubblewrap] [--json PATH]
[--public-only]  (`make bench` runs it as its part "memory": tests/bench.py reads the figures from
--json's file; its tiny run, the smoke test's, grades the public checks only: fewer frames, the
same bound.)
"""
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))


TARGET_MIB = 350  # the judge's peak under any submission (issue 24)


def peak_resident_mib():
    """This process's peak resident memory, in MiB: its memory map's high-water mark (VmHWM),
    which starts afresh at exec (ru_maxrss carries over the peak of the process that execed);
    ru_maxrss where there is no /proc (macOS: bytes there, KiB on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource  # only where there is no /proc

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024


def main():
    from grader.judge import service  # noqa: E402
    # Its own peak, never ru_maxrss: run by `make bench` (~1 GiB after the near-copies of its
    # class of 1000), ru_maxrss read that process's 1019 MiB.
    from grader.sandbox.runtime import wire
    from test_hostile import attack

    isolation = sys.argv[sys.argv.index("--isolation") + 1] if "--isolation" in sys.argv else "auto"
    checks = ("public",) if "--public-only" in sys.argv else ("public", "hidden")
    # Twice: a judge's second grading still grows it by ~8 MiB (what torch and pytest load or
    # cache on first use, the allocator's arenas), which is no frame's cost.
    for _ in range(2):
        service.grade(os.path.join(ROOT, "solutions", "attention.py"), checks, isolation)
    honest = peak_resident_mib()
    # The workers' peak: the largest of this process's waited-for descendants (each grading's
    # cold worker, inside its bubblewrap), which Linux carries up as each one is reaped.
    import resource

    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "attention.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(attack("huge_replies"))
        data = service.grade(path, checks, isolation)
    hostile = peak_resident_mib()
    # Two answers alive at once: each attend call is made twice and the answers compared
    # (randomness first, support.steady_call), so the growth is bounded by two frames.
    bound = 2 * wire.JUDGE_FRAME_BYTES / 2 ** 20
    target = "ok" if hostile <= TARGET_MIB else "MISSED"
    print(f"judge peak: {honest:.0f} MiB grading the reference, {hostile:.0f} MiB after a "
          f"submission answering {wire.MAX_PAYLOAD // 2 ** 20} MiB + {wire.MAX_HEADER // 1024} KiB "
          f"frames (+{hostile - honest:.0f} MiB; bound two frames, {bound:.0f} MiB)  "
          f"(target <= {TARGET_MIB}: {target}); its score {data['score']:g}")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w", encoding="utf-8") as handle:
            json.dump({"reference_mb": honest, "largest_frames_mb": hostile, "bound_mb": bound,
                       "target_mb": TARGET_MIB, "score": data["score"], "worker_mb": worker},
                      handle)
    return 0 if hostile - honest <= bound else 1

if __name__ == "__main__":
    sys.exit(main())
