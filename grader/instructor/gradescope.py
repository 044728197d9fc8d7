"""Gradescope: build the autograder zip (`make gradescope`) and run it (`run_autograder`).

    python -m grader.instructor.gradescope build [--out build/gradescope/autograder.zip]
    python -m grader.instructor.gradescope run [--root /autograder] [--lang zh|en]

The zip holds setup.sh (run once when Gradescope builds the image: Python >= 3.11, a venv with
the pinned CPU torch and pytest), run_autograder (run for every submission), the grader with its
hidden checks, solutions/attention.py and requirements.txt (the grader's pins from the kit's).

`run` grades ROOT/submission (attention.py or .ipynb, alone, in a folder or in one .zip) into
ROOT/results/results.json (report.to_gradescope: one test per check, hidden ones shown after the
grades are published); one that cannot be graded gets every check at 0, and why.

Before the student's code starts, the judge holds the reference and every check module in memory,
removes solutions/ from the throwaway container and makes itself non-dumpable, so a worker outside
bubblewrap can read the reference neither from disk nor from the judge's memory, nor swap a check
file under the judge (the limits: docs/instructors.md, Gradescope, and docs/security.md).
"""
import argparse
import contextlib
import ctypes
import io
import os
import pkgutil
import shutil
import stat
import zipfile

from grader.statefile import write_atomic
from grader import paths
from grader import inert, options, words

ROOT = paths.KIT_ROOT
DEFAULT_OUT = os.path.join(ROOT, "build", "gradescope", "autograder.zip")
# The grader's runtime needs only these of requirements.txt (no matplotlib, no watchfiles).
RUNTIME_PACKAGES = ("torch", "numpy", "pytest")
LEFT_OUT = {"release_templates", "__pycache__"}

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu base image).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap util-linux >/dev/null
PY=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  # The grader needs Python >= 3.11 (tomllib); Ubuntu 22.04 ships 3.10.
  apt-get install -y -qq software-properties-common >/dev/null
  add-apt-repository -y ppa:deadsnakes/ppa
  apt-get update -qq
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  PY=python3.11
fi
"$PY" -m venv /autograder/venv
# The CPU build of torch (the default index would pull a multi-GB CUDA build).
/autograder/venv/bin/pip install --quiet --disable-pip-version-check \
  --extra-index-url https://download.pytorch.org/whl/cpu -r /autograder/source/requirements.txt
/autograder/venv/bin/python -c "import torch, pytest; print('torch', torch.__version__)"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission: it grades /autograder/submission and writes
# /autograder/results/results.json.  AUTOGRADER_ROOT and AUTOGRADER_PYTHON replace the defaults
# (tests run it against a fake autograder folder); GRADER_LANG=en for English feedback.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source" || exit 1
exec "$PY" -m grader.instructor.gradescope run --root "$ROOT" --lang "${GRADER_LANG:-zh}"
"""


def runtime_requirements():
    """The pinned lines of requirements.txt that the grader itself needs, and nothing else."""
    lines = ["# The grader's runtime, pinned as in the kit's requirements.txt."]
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as handle:
        for line in handle:
            name = line.split("#")[0].strip().split("==")[0].strip().lower()
            if name in RUNTIME_PACKAGES:
                lines.append(line.strip())
    missing = set(RUNTIME_PACKAGES) - {l.split("==")[0].lower() for l in lines[1:]}
    if missing:
        raise SystemExit(f"requirements.txt pins none of {sorted(missing)}")
    return "\n".join(lines) + "\n"


def autograder_files():
    """[(name in the zip, bytes, executable)], sorted: the same zip from the same sources."""
    files = [("setup.sh", SETUP_SH.encode(), True), ("run_autograder", RUN_AUTOGRADER.encode(), True),
             ("requirements.txt", runtime_requirements().encode(), False)]
    grader_dir = os.path.join(ROOT, "grader")
    for root, dirs, names in os.walk(grader_dir):
        dirs[:] = sorted(d for d in dirs if d not in LEFT_OUT)
        for name in sorted(names):
            if name.endswith((".py", ".toml", ".ini")):
                path = os.path.join(root, name)
                with open(path, "rb") as handle:
                    files.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), handle.read(),
                                  False))
    with open(os.path.join(ROOT, "solutions", "attention.py"), "rb") as handle:
        files.append(("solutions/attention.py", handle.read(), False))
    return sorted(files)


def build(out=DEFAULT_OUT):
    """Write the autograder zip (fixed timestamps: byte-identical for the same sources)."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data, executable in autograder_files():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    write_atomic(out, buffer.getvalue())
    return out


def find_submission(folder):
    """What to grade in Gradescope's submission folder: the folder itself (attention.py or .ipynb
    anywhere in it, or its only .py/.ipynb), or its only .zip when it holds no code."""
    from grader.judge import submission

    if os.path.isdir(folder):
        entries = [e for e in os.listdir(folder) if not e.startswith(".")]
        code = [e for e in entries if submission.has_suffix(e, ".py", ".ipynb")]
        zips = [e for e in entries if submission.has_suffix(e, ".zip")]
        if not code and len(zips) == 1 and not any(os.path.isdir(os.path.join(folder, e))
                                                   for e in entries):
            return os.path.join(folder, zips[0])
    return folder


def _harden(root):
    """Before any student code runs: reference, checks and variants in memory; solutions/ off the
    disk of this throwaway container; the judge non-dumpable (no /proc/<pid>/mem for a worker)."""
    import pytest  # noqa: F401
    import torch  # noqa: F401

    from grader.judge import checks, runner  # noqa: F401
    from grader.judge.secret import reference, variants  # noqa: F401

    for folder in ("public", "hidden"):
        package = f"grader.judge.checks.{folder}"
        path = os.path.join(os.path.dirname(checks.__file__), folder)
        __import__(package)
        for module in pkgutil.iter_modules([path]):
            __import__(f"{package}.{module.name}")
    # Only where this grader *is* the autograder's source (ROOT/source), never in a kit checkout.
    if os.path.realpath(ROOT) == os.path.realpath(os.path.join(root, "source")):
        shutil.rmtree(os.path.join(ROOT, "solutions"), ignore_errors=True)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0


def not_graded_results(the_rubric, reason, lang):
    """results.json for a submission that could not be graded: every check at 0, and why."""
    from grader.render import report

    head = words.text("gradescope", "not_graded", lang)
    reason = inert.markdown_inline(reason)  # file and member names are the student's
    tests = [report.gradescope_test(c, n, (0, c.points), False, f"{head}: {reason}", lang)
             for n, c in enumerate(the_rubric.checks, 1)]
    return inert.json_text({"score": 0, "output_format": "md", "visibility": "visible",
                            "output": f"**{head}:** {reason}", "tests": tests},
                           ensure_ascii=False, indent=2)


def run(root, lang="zh"):
    from grader.judge import service
    from grader import rubric

    the_rubric = rubric.load()
    results = os.path.join(root, "results")
    os.makedirs(results, exist_ok=True)
    target = find_submission(os.path.join(root, "submission"))
    # A spare worker imports torch while the judge hardens, instead of after it.  No student
    # code runs before begin() hands it the file, which is after _harden has the reference in
    # memory and solutions/ deleted.
    with service.Judge(start="spare", spares=1, refill=False) as judge:
        judge.workers.fill()
        _harden(root)
        code, text = _graded(judge, target, the_rubric, root, lang)
    write_atomic(os.path.join(results, "results.json"), text)
    return code


def _graded(judge, target, the_rubric, root, lang):
    """(exit code, results.json text) of `target` graded by `judge`."""
    from grader.render import report
    from grader.judge.submission import SubmissionError

    try:
        return 0, report.to_gradescope(the_rubric, judge.grade(target), lang)
    except SubmissionError as exc:
        return 0, not_graded_results(the_rubric, str(exc).replace(root, ""), lang)
    except Exception as exc:  # the grader's own failure: say so, score 0, never silence
        return 1, not_graded_results(the_rubric, f"internal grader error, please tell your TA "
                                     f"({type(exc).__name__}: {str(exc)[:200]})", lang)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader.instructor.gradescope")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="write the autograder zip")
    p.add_argument("--out", default=DEFAULT_OUT)
    p = sub.add_parser("run", help="grade ROOT/submission into ROOT/results/results.json")
    p.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    options.add_lang(p)
    args = parser.parse_args(argv)
    if args.command == "build":
        print(build(args.out))
        return 0
    return run(os.path.abspath(args.root), args.lang)


if __name__ == "__main__":
    from grader import process

    process.run_judge(main)
