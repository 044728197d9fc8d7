"""`make gradescope`'s autograder zip, run as Gradescope would, in a fake /autograder folder.

The zip is built, unpacked into ROOT/source, a submission is put in ROOT/submission and
ROOT/source/run_autograder runs with AUTOGRADER_ROOT=ROOT (and this venv's Python instead of
/autograder/venv); ROOT/results/results.json is then checked against Gradescope's format.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from door_matrix import baseline, batched, verdict  # noqa: E402,F401
from grader.instructor import gradescope
from grader import rubric  # noqa: E402

RUBRIC = rubric.load()
MAX = sum(c.points for c in RUBRIC.checks)
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("zip") / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "grader.instructor.gradescope", "build", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def fake_autograder(tmp_path, autograder_zip, files):
    root = tmp_path / "autograder"
    for folder in ("source", "submission"):
        (root / folder).mkdir(parents=True)
    with zipfile.ZipFile(autograder_zip) as archive:
        for info in archive.infolist():
            archive.extract(info, root / "source")
            mode = info.external_attr >> 16
            if mode:
                os.chmod(root / "source" / info.filename, stat.S_IMODE(mode))
    for name, src in files.items():
        target = root / "submission" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            target.write_bytes(src)
        else:
            shutil.copy(src, target)
    return root


def run_autograder(root, **env):
    environment = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable,
                       **env)
    proc = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=300)
    results = root / "results" / "results.json"
    assert results.exists(), proc.stderr
    return proc, json.loads(results.read_text(encoding="utf-8"))


def validate(results):
    """Gradescope's results.json: score, and tests with the fields Gradescope reads."""
    assert isinstance(results["score"], (int, float))
    tests = results["tests"]
    assert len(tests) == len(RUBRIC.checks)
    for test, check in zip(tests, RUBRIC.checks):
        assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(test)
        assert test["name"].startswith(check.id + ": ")
        assert test["max_score"] == check.points
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed")
        assert (test["status"] == "passed") == (test["score"] == test["max_score"])
        assert test["visibility"] in VISIBILITIES
        assert test["visibility"] == ("visible" if check.visibility == "public" else "after_published")
        assert test.get("output_format", "md") == "md"
    assert sum(t["score"] for t in tests) == pytest.approx(results["score"])
    assert sum(t["max_score"] for t in tests) == MAX
    return {t["name"].split(":")[0]: t for t in tests}


def gives_the_batchs_verdict(results, table):
    """The door matrix's agreement (tests/door_matrix.py): Gradescope's results give the batch's
    verdict `table` of the same file, check by check."""
    got = {t["name"].split(":")[0]: (t["status"], round(float(t["score"]), 4))
           for t in results["tests"]}
    # Gradescope knows two statuses: a check passes there when it passed here.
    expected = {c: ("passed" if s == "passed" else "failed", p) for c, (s, p) in table.items()}
    assert got == expected
    assert results["score"] == pytest.approx(sum(p for _, p in table.values()))
    assert verdict(results["extra_data"]) == table


def test_zip_holds_what_gradescope_needs(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        infos = {i.filename: i for i in archive.infolist()}
    for name in ("setup.sh", "run_autograder", "requirements.txt", "solutions/attention.py",
                 "grader/__init__.py", "grader/rubric.toml", "grader/words.toml",
                 "grader/judge/checks/pytest.ini",
                 "grader/judge/checks/hidden/check_attend_reference.py",
                 "grader/judge/secret/reference.py", "grader/sandbox/runtime/worker.py",
                 "grader/instructor/gradescope.py"):
        assert name in infos, name
    for name in ("setup.sh", "run_autograder"):
        assert infos[name].external_attr >> 16 & 0o111, f"{name} is not executable"
    assert not [n for n in infos if "__pycache__" in n or "release_templates" in n]
    with zipfile.ZipFile(autograder_zip) as archive:
        requirements = archive.read("requirements.txt").decode()
    pins = [l for l in requirements.splitlines() if l and not l.startswith("#")]
    assert all("==" in l for l in pins) and any(l == "torch==2.13.0" for l in pins)
    assert not any(l.startswith(("matplotlib", "watchfiles")) for l in pins)
    # The same sources give the same zip.
    again = autograder_zip.parent / "again.zip"
    gradescope.build(str(again))
    assert again.read_bytes() == autograder_zip.read_bytes()


def test_run_autograder_writes_gradescope_results(autograder_zip, tmp_path, baseline):
    """A named mistake in attend (the slow doors' sample's), its verdict the batch's (the door
    matrix's Gradescope sample, test_doors_platforms.py)."""
    wrong = ROOT / "tests" / "submissions" / "wrong" / "mask_missing.py"
    root = fake_autograder(tmp_path, autograder_zip, {"attention.py": wrong})
    proc, results = run_autograder(root)
    assert proc.returncode == 0, proc.stderr
    tests = validate(results)
    assert 0 < results["score"] < MAX
    causal = tests["attend.causal"]
    assert causal["status"] == "failed" and causal["score"] == 0
    assert RUBRIC.message("mask_missing", "zh") in causal["output"]  # the named mistake (Markdown)
    assert causal["output"].startswith("```text")
    assert tests["split_heads.shape"]["status"] == "passed"
    assert tests["attend.reference"]["visibility"] == "after_published"
    # The reference was in the judge's memory, then removed from the throwaway container.
    assert not (root / "source" / "solutions").exists()
    assert (ROOT / "solutions" / "attention.py").exists()  # never the kit's own copy
    gives_the_batchs_verdict(results, baseline["wrong-mask_missing"])


def test_an_ungradable_submission_still_gets_results(autograder_zip, tmp_path):
    root = fake_autograder(tmp_path, autograder_zip, {"notes.txt": b"I forgot the code",
                                                      "draft/README.md": b"nothing"})
    proc, results = run_autograder(root, GRADER_LANG="en")
    assert proc.returncode == 0, proc.stderr
    tests = validate(results)
    assert results["score"] == 0 and all(t["score"] == 0 for t in tests.values())
    assert "Could not be graded" in results["output"] and "no attention.py" in results["output"]
    assert str(root) not in results["output"]


def test_a_zip_upload_is_graded(autograder_zip, tmp_path, baseline):
    """Gradescope unpacks uploaded zips itself; a zip left inside (uploaded within a zip) is read.
    It holds the stub: nothing done, its verdict the batch's (the door matrix's Gradescope
    sample, test_doors_platforms.py)."""
    inner = tmp_path / "hw.zip"
    with zipfile.ZipFile(inner, "w") as archive:
        archive.write(ROOT / "exercises" / "attention.py", "hw/attention.py")  # the stub
    root = fake_autograder(tmp_path, autograder_zip, {"hw.zip": inner})
    proc, results = run_autograder(root)
    assert proc.returncode == 0, proc.stderr
    tests = validate(results)
    assert results["score"] < MAX and "还没有实现" in tests["attend.scale"]["output"]
    gives_the_batchs_verdict(results, baseline["stub"])
