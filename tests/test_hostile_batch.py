"""Issue 13 and 23, through a whole class: `python -m grader batch` on a class that mixes honest
entries with attacks (each alone in tests/test_hostile.py) grades the honest as if alone and leaves
nothing behind, and names a student chooses are inert in every file the batch writes.

Split from tests/test_hostile.py so that `pytest --dist loadfile` runs these batches on another
worker than the attacks one by one; the attacks and helpers are that file's.
"""
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import door_matrix
from grader.authoring import stubs as authoring
from grader.sandbox import uidpool
from test_hostile import (COLD_BWRAP, FORK_BWRAP, REFERENCE, RUBRIC, attack, eventually,
                          pool_processes, shm_segments)
from test_hostile_inputs import _outside_fences, _zip


# -- a mixed batch ------------------------------------------------------------------------------------
SUBMISSIONS = Path(__file__).parent / "submissions"
HONEST = {"h01": "correct/einsum.py", "h03": "wrong/scale_none.py", "h05": "wrong/mask_missing.py",
          "h07": "correct/manual_softmax.py", "h09": "correct/view_permute.py"}
BATCH_ATTACKS = {"x02": "replace_with_fifo", "x04": "deep_tree", "x06": "shm_leftover",
                 "x08": "fill_tmp", "x10": "fork_flood", "x12": "hostile_message",
                 "x14": "forge_reply_amplified", "x16": "reserved_keys"}
BATCH_MODES = {"fork-bubblewrap": ["--isolation", "bubblewrap"],
               "cold-bubblewrap": ["--isolation", "bubblewrap", "--cold-workers"],
               "process": ["--isolation", "process"]}
# What a plain subprocess cannot defend (test_hostile.py: test_tmp_has_a_size, the fork flood).
UNDEFENDED_BY_PROCESS = ("fill_tmp", "fork_flood")
# --cold-workers changes how each worker starts (bubblewrap's own, no fork server), not what the
# judge does with a worker's answers or how the batch writes them: the fork server's run grades
# the whole class, the cold run the attacks on the machine that two cold workers alive at once
# could meet in (kernel state, a full /tmp, a fork flood) beside an honest entry of full marks
# and one of part marks.  Each of its entries costs a cold worker; the blocking file and the deep
# tree are left out of it: a cold bubblewrap worker cannot write its folder at all
# (test_hostile.py: bwrap_writes, the read-only probe, both swaps and the tree, graded cold).
COLD_CLASS = ("h01", "h03", "x06", "x08", "x10")
# The batch's own machinery (its judges, the zygote each starts, the records and the writers) is
# the same whatever isolation the workers get, and every attack is graded alone in each mode in
# tests/test_hostile.py: the whole class is graded once, through bubblewrap's fork servers where
# this machine has them, else through plain ones ("process").
WHOLE_CLASS = "fork-bubblewrap" if FORK_BWRAP else "process"
FORMULA_ENTRY = '=HYPERLINK("evil.example","click").py'  # a name has no "/"


def _outcome(checks):
    return [(c["id"], c["status"], c["score"], [v["key"] for v in c["verdicts"]]) for c in checks]


def graded_alone(tmp_path_factory):
    """{entry: report} of the honest entries graded in a class without attacks: the corpus's
    batch (door_matrix.batch_of_corpus), which the door matrix holds every door to and make test
    makes once for all its workers (where a run selects the whole corpus, as make test does; else
    a batch of these five files alone).  The forked and the cold batches are held to it (a forked
    worker's verdicts are a cold one's: tests/test_forkserver.py)."""
    named = {name: _corpus_name(SUBMISSIONS / path) for name, path in HONEST.items()}
    whole = {path for corpus_name, path in door_matrix.FILES.items()
             if corpus_name.startswith(("correct-", "wrong-"))} <= door_matrix.SELECTED
    _, reports, _ = door_matrix.batch_of_corpus(door_matrix.shared_folder(tmp_path_factory),
                                                None if whole else sorted(named.values()))
    return {name: reports[corpus_name] for name, corpus_name in named.items()}


def _corpus_name(path):
    return next(name for name, file in door_matrix.FILES.items() if file == path.resolve())


# -- the processes a batch started, wherever they went ---------------------------------------------
_cgroups = itertools.count()


@contextlib.contextmanager
def own_cgroup():
    """A cgroup of its own for the batch about to start, under this process's own (cgroup v1's
    `pids` hierarchy, else v2's): yields the file its first process writes its pid to, or None
    where no cgroup can be made here.  A process stays in its cgroup whoever its parent becomes,
    so the batch's leftovers are told from another test worker's (pool_processes() alone takes a
    process re-parented to init for this one's)."""
    folder = None
    mine = {}  # controller ("" for cgroup v2) -> this process's cgroup in its hierarchy
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            mine.update((controller, path) for controller in controllers.split(","))
    with open("/proc/self/mountinfo") as handle:
        mounts = [line.split() for line in handle]
    for fs, controllers in (("cgroup", "pids"), ("cgroup2", "")):
        for fields in mounts:
            tail = fields[fields.index("-") + 1:]
            if tail[0] != fs or (fs == "cgroup" and controllers not in tail[2].split(",")) \
                    or controllers not in mine:
                continue
            root, point, path = fields[3], fields[4], mine[controllers]
            inside = os.path.relpath(path, root) if path.startswith(root) else None
            if inside is None or inside.startswith(".."):
                continue
            name = f"hostile-batch-{os.getpid()}-{next(_cgroups)}"
            candidate = os.path.normpath(os.path.join(point, inside, name))
            try:
                os.mkdir(candidate)
            except OSError:
                continue
            procs = os.path.join(candidate, "cgroup.procs")
            if subprocess.run(["sh", "-c", 'echo $$ > "$0"', procs],
                              stderr=subprocess.DEVNULL).returncode == 0:
                folder = candidate
                break
            os.rmdir(candidate)
        if folder:
            break
    try:
        yield os.path.join(folder, "cgroup.procs") if folder else None
    finally:
        if folder:
            with contextlib.suppress(OSError):  # it fails only where a process is left in it
                os.rmdir(folder)


def cgroup_pool_processes(procs):
    """The processes in the cgroup `procs` (own_cgroup) running as one of the workers' uids; all
    of pool_processes() where no cgroup could be made."""
    if procs is None:
        return pool_processes()
    found = []
    with open(procs) as handle:
        for pid in handle.read().split():
            with contextlib.suppress(OSError):
                if uidpool.FIRST_UID <= os.stat(f"/proc/{pid}").st_uid < \
                        uidpool.FIRST_UID + uidpool.SLOTS:
                    found.append(int(pid))
    return found


def _make_mixed_class(folder, mode):
    """The class `mode`'s batch grades: {entry: file name}."""
    import hashlib

    from grader.judge import manifest

    folder.mkdir()
    made = {}
    for name, fixture in HONEST.items():
        made[name] = f"{name}.py"
        shutil.copy(SUBMISSIONS / fixture, folder / made[name])
    for name, snippet in BATCH_ATTACKS.items():
        if mode == "process" and snippet in UNDEFENDED_BY_PROCESS:
            continue
        made[name] = f"{name}.py"
        (folder / made[name]).write_text(attack(snippet), encoding="utf-8")
    if mode == "cold-bubblewrap":
        for name in set(made) - set(COLD_CLASS):
            os.remove(folder / made.pop(name))
        return made
    (folder / "x18.ipynb").write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _zip(folder / "x20.zip", [("attention.py", REFERENCE)] + [(f"j/{i}", b"") for i in range(1500)])
    work = REFERENCE.encode()
    claim = {"format": 1, "kind": manifest.KIND, "student": "h01", "work": "attention.py",
             "kit_version": RUBRIC.version, "rubric_hash": RUBRIC.hash, "created": "t",
             "files": {"attention.py": {"sha256": hashlib.sha256(work).hexdigest(),
                                        "bytes": len(work)}}}
    _zip(folder / "x22.zip", [("manifest.json", json.dumps(claim)), ("attention.py", work)])
    (folder / FORMULA_ENTRY).write_text(REFERENCE, encoding="utf-8")
    made.update({"x18": "x18.ipynb", "x20": "x20.zip", "x22": "x22.zip"})
    return made


@pytest.mark.parametrize("mode", [WHOLE_CLASS] + (["cold-bubblewrap"] if COLD_BWRAP else []))
def test_a_mixed_batch_grades_the_honest_as_if_alone_and_leaves_nothing(tmp_path,
                                                                         tmp_path_factory, mode):
    source, out = tmp_path / "class", tmp_path / "out"
    made = _make_mixed_class(source, mode)
    scratch = tmp_path / "scratch"  # the batch's temp folder: empty again at the end
    scratch.mkdir()
    shm_before = shm_segments()
    command = [sys.executable, "-m", "grader", "batch", str(source), "--out", str(out), "--jobs",
               "2", "--call-timeout", "20", "--lang", "en", *BATCH_MODES[mode]]
    with own_cgroup() as procs:
        enter = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs] if procs else []
        with subprocess.Popen(enter + command, cwd=authoring.ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, errors="surrogateescape",
                              env={**os.environ, "TMPDIR": str(scratch)}) as proc:
            try:  # the reports alone read meanwhile: the batch mostly waits on its attacks
                alone = graded_alone(tmp_path_factory)
                stderr = proc.communicate(timeout=1800)[1]
            except BaseException:
                proc.kill()
                raise
        assert proc.returncode == 0, stderr[-3000:]
        assert "\x1b" not in stderr and "\x07" not in stderr  # the progress lines
        assert eventually(lambda: not os.listdir(scratch)), os.listdir(scratch)
        assert eventually(lambda: not (shm_segments() - shm_before)), "a segment outlived the batch"
        assert eventually(lambda: cgroup_pool_processes(procs) == []), \
            "a worker's process outlived the batch"

    def record(student):
        return json.loads((out / "students" / student / "report.json").read_text("utf-8"))

    assert {name: record(name)["entry"] for name in made} == made  # every entry has its record
    for name, report in alone.items():
        if name in made:
            assert _outcome(record(name)["report"]["checks"]) == _outcome(report["checks"]), name
    if mode != "cold-bubblewrap":
        _assert_the_class_outputs_are_inert(out, record)


def _assert_the_class_outputs_are_inert(out, record):
    """What the whole class's batch wrote: the entries that cannot be graded say why, a package
    claiming another student is noted, and a hostile message or name is inert everywhere."""
    import csv

    assert record("x18")["status"] == "ungradable" and "notebook" in record("x18")["error"]
    assert record("x20")["status"] == "ungradable" and "members" in record("x20")["error"]
    claim = record("x22")
    assert claim["status"] == "graded" and claim["package"]["identity"]["manifest"] == "h01"
    assert record("h01")["entry"] == "h01.py" and record("h01")["package"] is None
    message = record("x12")["report"]
    assert any("\ud800" in v["fields"].get("message", "") for c in message["checks"]
               for v in c["verdicts"])
    feedback = (out / "students" / "x12" / "feedback.md").read_text("utf-8")
    assert "\x1b" not in feedback and "\n# Hacked" not in _outside_fences(feedback)
    summary = (out / "summary.md").read_text("utf-8")
    assert "\x1b" not in summary
    with open(out / "gradebook.csv", encoding="utf-8", newline="") as handle:
        rows = {r["entry"]: r for r in csv.DictReader(handle)}
    assert rows["'" + FORMULA_ENTRY]["status"] == "graded"  # the cell is text, not a formula
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
               for row in rows.values() for cell in row.values() if cell)
    assert "its manifest names student 'h01'" in rows["x22.zip"]["note"]


# -- names a student chooses, through a whole batch (issue 23) --------------------------------------
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                         "\u2066-\u2069]")
# What the hostile names below carry that a Markdown or HTML reader would act on.
STUDENT_MARKUP = ("<img", "<script", "<b>", "](", "**b**", "# Title")
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _markdown_outside_code(markdown):
    """What a Markdown reader renders as markup: fences, code spans and backslash escapes gone."""
    markdown = re.sub(r"(?ms)^(`{3,}).*?^\1\s*$", "", markdown)
    markdown = re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", markdown)
    return re.sub(r"\\.", "", markdown, flags=re.S)


def _scan_file(path):
    """What in one output file a reader's screen, Markdown, browser or spreadsheet would act on."""
    import csv
    import io

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return [f"not UTF-8 ({exc.reason})"]
    problems = []
    body = text.replace("\r\n", "\n") if path.suffix == ".csv" else text  # csv's own line ends
    found = RAW_CONTROL.search(body)
    if found:
        problems.append(f"raw control {found.group()!r}")
    if path.suffix == ".md":
        rendered = _markdown_outside_code(text)
        problems += [f"markup {m!r}" for m in STUDENT_MARKUP if m in rendered]
    if path.suffix == ".html":
        problems += [f"markup {m!r}" for m in ("<img", "<script>alert", "<b>")
                     if m in text]
    if path.suffix == ".csv":
        problems += [f"formula {cell[:30]!r}"
                     for row in csv.reader(io.StringIO(text, newline="")) for cell in row
                     if cell.startswith(FORMULA_PREFIXES)]
    if path.suffix == ".json":
        json.loads(text)
    return problems


def scan_outputs(folder):
    """Every file under `folder`, scanned: [problem, ...]."""
    return [f"{p.relative_to(folder)}: {problem}" for p in sorted(Path(folder).rglob("*"))
            if p.is_file() for problem in _scan_file(p)]


def test_the_scan_finds_what_it_exists_for(tmp_path):
    (tmp_path / "a.md").write_text("ok `<img x>`\n```\n# Title\n```\n\\<b\\> but <img src=x>\n")
    (tmp_path / "b.csv").write_text("name,x\r\n'=ok,1\r\n\"=HYPERLINK(1)\",2\r\n")
    (tmp_path / "c.html").write_text("<p>&lt;img&gt;</p><script>alert(1)</script>")
    (tmp_path / "d.log").write_text("a\x1b[2J")
    (tmp_path / "e.txt").write_bytes(b"\xff")
    assert [p.split(": ", 1)[1] for p in scan_outputs(tmp_path)] == [
        "markup '<img'", "formula '=HYPERLINK(1)'", "markup '<script>alert'",
        "raw control '\\x1b'", "not UTF-8 (invalid start byte)"]


def _hostile_class(folder):
    """Entries whose names (and a package's manifest and member names) attack each medium; three
    are graded in full (two near-copies), the others fail at import or cannot be graded."""
    import io
    import zipfile

    from grader.judge import manifest

    wrong = (SUBMISSIONS / "wrong" / "scale_none.py").read_bytes()
    broken = b"def broken(:\n"
    files = {"\x1b]52;c;SGFjaw==\x07\x1b[2Jesc.py": wrong,
             "# Title [l](x\r\ny) **b**.PY": wrong,            # upper case: graded all the same
             "<img src=x onerror=alert(1)>.py": broken,
             '=HYPERLINK("e.x","c").py': broken, "@SUM(1)" + "A" * 200 + ".py": broken,
             "张" * 84 + ".py": broken,                         # 252 bytes: the id must fit
             "+1.Ipynb": b"{not json", b"\xff\xfebad.py": b"\xff not UTF-8"}
    member = io.BytesIO()
    with zipfile.ZipFile(member, "w") as archive:
        archive.writestr("<script>alert(1)</script>\x1b[31m/attention.py", b"\xff")
    files["-2|x|`tick`.ZIP"] = member.getvalue()
    claim = {"format": 1, "kind": manifest.KIND, "student": "<img src=x>\x1b[2J# Title",
             "work": "attention.py", "kit_version": "=1+1\x07", "rubric_hash": "**b**",
             "created": "@now\r\n# Title",
             "files": {"attention.py": {"sha256": "0" * 64, "bytes": 1},
                       "<script>alert(3)</script>\x1b.py": {"sha256": "0" * 64, "bytes": 1}}}
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("manifest.json", json.dumps(claim))
        archive.writestr("attention.py", wrong)
        archive.writestr("[l](x)<b>extra\x1b.txt", b"x")
    files["pkg\u202egpj.zip"] = package.getvalue()
    folder.mkdir()
    for name, data in files.items():
        raw = name if isinstance(name, bytes) else name.encode()
        (folder / os.fsdecode(raw)).write_bytes(data)
    (folder / "<b>folder<\\b>\x07").mkdir()  # a folder entry with no attention file


def test_hostile_names_are_inert_in_every_class_output(tmp_path):
    import csv

    source, out = tmp_path / "class", tmp_path / "out"
    _hostile_class(source)
    # One judge: what is proven is what the writers make of the names (judges of their own and
    # their zygotes are test_batch's and the mixed batch's above).
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(source), "--out", str(out),
                           "--jobs", "1", "--call-timeout", "20", "--lang", "en"],
                          cwd=authoring.ROOT, capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stderr = proc.stderr.decode("utf-8")  # the progress lines and the log: inert too
    assert not RAW_CONTROL.search(stderr.replace("\r", "")), stderr[-2000:]
    assert scan_outputs(out) == []
    # The hostile strings did reach the outputs (made inert, not dropped): the scan had work.
    with open(out / "gradebook.csv", encoding="utf-8", newline="") as handle:
        rows = {r["entry"]: r for r in csv.DictReader(handle)}
    assert rows["'=HYPERLINK(\"e.x\",\"c\").py"]["status"] == "import_failed"  # its syntax error
    assert rows["# Title [l](x\\x0d\ny) **b**.PY"]["status"] == "graded"
    assert float(rows["# Title [l](x\\x0d\ny) **b**.PY"]["total"]) > 0  # .PY: graded, not refused
    assert rows["'+1.Ipynb"]["status"] == "ungradable"  # read as a notebook (a broken one)
    assert "notebook" in rows["'+1.Ipynb"]["note"]
    assert rows["\\xff\\xfebad.py"]["status"] == "ungradable"
    summary = (out / "summary.md").read_text("utf-8")
    assert "\\<script\\>alert(1)\\</script\\>\\\\x1b" in summary  # the zip member's name
    assert "## Near-copies" in summary and "2Jesc" in summary.split("## Near-copies")[1]
    page = (out / "students" / "pkg_gpj" / "feedback.md").read_text("utf-8")
    assert "\\<img src=x\\>\\\\x1b\\[2J\\# Title" in page  # the manifest's student field
    assert "&lt;b&gt;folder&lt;\\b&gt;\\x07: no attention.py" in \
        (out / "summary.html").read_text("utf-8")
