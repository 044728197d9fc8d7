"""The kit itself: stubs in step with the reference, the release reproducible and clean, the
reference at full marks in every front end and isolation mode, the stub at zero, the CLI."""
import contextlib
import filecmp
import io
import json
import os
import subprocess
import sys

import pytest

from grader.authoring import release, stubs as authoring
from grader.judge import submission
from grader.judge import service  # noqa: E402
from grader.render import report
from grader import rubric
from grader.sandbox import launch as sandbox

ROOT = authoring.ROOT
PY = sys.executable


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_exercise_stub_is_generated_from_the_solution():
    assert read(authoring.EXERCISE) == authoring.make_stub(read(authoring.SOLUTION)), \
        "exercises/attention.py is stale: run `make regen`"


def test_stub_keeps_signatures_and_raises():
    stub = read(authoring.EXERCISE)
    for signature in ("def split_heads(x, heads):", "def merge_heads(x):",
                      "def attend(q, k, v, mask=None, return_weights=False):",
                      "class CausalSelfAttention(nn.Module):",
                      "def __init__(self, d_model, n_heads, max_len=128):",
                      "def forward(self, x, return_weights=False):"):
        assert signature in stub
    assert stub.count("raise NotImplementedError") == 5
    assert "Q2_SHAPE_IS_ENOUGH = None" in stub


def test_release_is_reproduced_exactly(tmp_path):
    out = release.build_release(str(tmp_path / "release"))
    comparison = filecmp.dircmp(out, os.path.join(ROOT, "release"), ignore=["__pycache__", ".venv"])

    def differences(cmp):
        found = cmp.left_only + cmp.right_only + cmp.diff_files
        for sub in cmp.subdirs.values():
            found += differences(sub)
        return found

    stale = "release/ is stale: run `make regen` ({})"
    assert differences(comparison) == [], stale.format(differences(comparison))
    for root, _, files in os.walk(out):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), out)
            assert filecmp.cmp(os.path.join(root, name), os.path.join(ROOT, "release", rel),
                               shallow=False), stale.format(rel)


def test_release_holds_no_solution_and_no_hidden_check():
    release = os.path.join(ROOT, "release")
    names = {os.path.relpath(os.path.join(r, f), release)
             for r, _, files in os.walk(release) for f in files if "__pycache__" not in r}
    assert not [n for n in names if "hidden" in n or n.endswith(("reference.py", "variants.py"))]
    solution_lines = set()
    in_block = False
    for line in read(authoring.SOLUTION).splitlines():
        if line.strip() == authoring.BEGIN:
            in_block = True
        elif line.strip() == authoring.END:
            in_block = False
        elif in_block and line.strip() and not line.strip().startswith("#") \
                and not line.strip().endswith("= x.shape"):  # unpacking a shape gives nothing away
            solution_lines.add(line.strip())
    for name in names:
        text = read(os.path.join(release, name))
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN" not in text, name
        leaked = [line for line in solution_lines if line in text.splitlines()
                  or any(line == t.strip() for t in text.splitlines())]
        assert leaked == [], (name, leaked)


@pytest.fixture(scope="module")
def judge():
    """A judge whose workers are forked from a fork server, in the isolation `auto` chooses: the
    reference, the stub, the notebook and the tampering file below (a cold worker in each mode:
    the plain-subprocess fallback here, and test_doors.py's `grade` of its sample, the
    reference's whole verdict compared, in `auto`'s)."""
    with service.Judge(start="fork") as kept:
        yield kept


@pytest.fixture(scope="module")
def reference_report(judge):
    return judge.grade(authoring.SOLUTION)


def test_reference_gets_full_marks(reference_report):
    assert reference_report["max_score"] == sum(c.points for c in rubric.load().checks)
    failing = [c["id"] for c in reference_report["checks"] if c["status"] != "passed"]
    assert failing == []
    assert reference_report["score"] == reference_report["max_score"]


def test_every_front_end_gives_the_same_score(reference_report):
    r = rubric.load()
    as_json = json.loads(report.to_json(r, reference_report, "en"))
    assert as_json["score"] == reference_report["score"]
    assert {c["id"] for c in as_json["checks"]} == {c.id for c in r.checks}
    gradescope = json.loads(report.to_gradescope(r, reference_report, "zh"))
    assert sum(t["score"] for t in gradescope["tests"]) == reference_report["max_score"]
    assert all(t["status"] == "passed" for t in gradescope["tests"])
    assert {t["visibility"] for t in gradescope["tests"]} == {"visible", "after_published"}
    markdown = report.to_markdown(r, reference_report, "zh")
    score = f"**{reference_report['score']:g} / {reference_report['max_score']:g}**"
    assert score in markdown


def test_metadata_is_recorded(reference_report):
    meta = reference_report["metadata"]
    # The seed comes from the submission's text: a regrade draws the same inputs, another file others.
    with open(authoring.SOLUTION, encoding="utf-8") as handle:
        assert meta["seed"] == submission.seed_of(handle.read())
    assert submission.seed_of("x = 1\n") != meta["seed"]
    assert meta["rubric_hash"] == rubric.load().hash
    assert meta["torch"].startswith("2.13")
    assert meta["isolation"] in ("bubblewrap", "process")


def test_plain_subprocess_fallback_gives_the_same_report(reference_report):
    fallback = service.grade(authoring.SOLUTION, isolation="process")
    assert fallback["metadata"]["isolation"] == "process"
    assert fallback["metadata"]["worker_start"] == "exec"  # a cold worker, the reference's forked
    strip = lambda data: [(c["id"], c["status"], c["score"]) for c in data["checks"]]  # noqa: E731
    assert strip(fallback) == strip(reference_report)


def test_stub_scores_zero_with_not_implemented(judge):
    data = judge.grade(authoring.EXERCISE)
    assert data["score"] == 0
    for check in data["checks"]:
        keys = {v["key"] for v in check["verdicts"]}
        expected = {"quiz_missing"} if check["exercise"] == "quiz" else {"not_implemented"}
        assert check["status"] == "failed" and keys == expected, check["id"]


def run_cli(*args):
    return subprocess.run([PY, "-m", "grader", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_cli_missing_path_is_a_one_line_error():
    for lang, words in (("en", "no such file"), ("zh", "没有这个文件")):
        result = run_cli("grade", "no/such/attention.py", "--lang", lang)
        assert result.returncode == 2
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr


# `check`'s text on the stub (public checks only, the hidden ones counted) is test_stub_report's
# run of `make check`'s command line; its JSON is test_doors.py's.


def test_cli_writes_gradescope_results(tmp_path):
    """`grade --format gradescope --out FILE`: the command (grade_command) run in this process, a
    cold worker (its command line as a process is test_doors.py's).  This is the door matrix's
    `grade` of the reference (test_doors.py's sample leaves it here): the verdict read from its
    pytest document is every check passed at its full points, the batch's verdict of it."""
    from door_matrix import verdict
    from grader.__main__ import grade_command, parse

    out = tmp_path / "results.json"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = grade_command(parse(["grade", authoring.SOLUTION, "--format", "gradescope",
                                    "--out", str(out)]))
    assert code == 0 and printed.getvalue() == ""
    data = json.loads(out.read_text())
    assert data["score"] == sum(t["max_score"] for t in data["tests"])
    full = {c.id: ("passed", c.points) for c in rubric.load().checks}
    assert verdict(data["extra_data"]) == full


def test_notebook_submission_drops_magics(tmp_path, judge):
    cells = [{"cell_type": "markdown", "source": ["# 多头注意力"]},
             {"cell_type": "code", "source": ["%matplotlib inline\n", "!pip list\n"]},
             {"cell_type": "code", "source": read(authoring.SOLUTION)}]
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                                "metadata": {}}))
    data = judge.grade(str(tmp_path), visibilities=("public",))
    assert data["score"] == data["max_score"] and data["metadata"]["kind"] == "notebook"


def test_original_submission_is_never_modified(tmp_path, judge):
    path = tmp_path / "attention.py"
    path.write_text(read(authoring.SOLUTION) + "\nopen(__file__, 'a').write('# tampered')\n")
    before = path.read_bytes()
    data = judge.grade(str(path), visibilities=("public",))
    if data["metadata"]["isolation"] == "process":  # its write went to its copy (bubblewrap's
        assert data["score"] == data["max_score"]  # read-only copy refuses it, and the import)
    assert path.read_bytes() == before


def test_isolation_is_reported_honestly():
    assert sandbox.choose_isolation("process") == "process"
    expected = "bubblewrap" if sandbox.bubblewrap_works() else "process"
    assert sandbox.choose_isolation("auto") == expected


def test_the_bwrap_probe_that_fails_says_process(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "bubblewrap_path", lambda: str(fake))
    assert sandbox.choose_isolation("auto") == "process"


def test_one_submission_commands_do_not_import_the_batch():
    """`grade` and `check` start their worker before anything heavy is imported: the instructors'
    batch commands are not loaded to parse their arguments (they are for `batch` and --help)."""
    code = ("import sys; from grader.__main__ import parse; args = parse(%r); "
            "print(args.command, any(m.startswith('grader.batch') for m in sys.modules))")
    for argv, expected in ((["check", "x.py"], "check False"), (["grade", "x.py"], "grade False"),
                           (["batch", "d", "--out", "o"], "batch True")):
        out = subprocess.run([sys.executable, "-c", code % (argv,)], capture_output=True,
                             text=True, cwd=ROOT, check=True).stdout.strip()
        assert out == expected
    helped = subprocess.run([sys.executable, "-m", "grader", "--help"], capture_output=True,
                            text=True, cwd=ROOT, check=True).stdout
    assert "batch" in helped and "override" in helped
