"""Batch grading (grader/batch/engine.py): a mixed class folder, the gradebook, the summary, resuming
after kill -9, and that nothing in the class folder is ever written to.

The mixed folder is graded once per module by the real CLI (about 20-40 s on 2 cores: six
submissions that reach the checks); the kill test grades again, for real.
"""
import csv
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.batch import engine as batch, entries, judge
from grader.judge import submission
from grader import rubric
from grader.sandbox import launch as sandbox  # noqa: E402
import words  # noqa: E402
from grader import words as vocabulary  # noqa: E402


def said(key, lang="zh", **fields):
    """A line of what a class run prints (words.toml's [batch]), in `lang`."""
    return vocabulary.text("batch", key, lang, **fields)

SUBMISSIONS = ROOT / "tests" / "submissions"
PY = sys.executable
RUBRIC = rubric.load()
CHECK_IDS = [c.id for c in RUBRIC.checks]
MAX = sum(c.points for c in RUBRIC.checks)
GRADED = {"alice", "bob", "carol", "dave", "erin", "henry"}
UNGRADABLE = {"frank": "not a readable zip", "gina": "no attention.py",
              "ivan": "symlink to a file outside"}
# The same reasons as the (default) Chinese gradebook says them.
UNGRADABLE_ZH = {"frank": "不是可读取的 zip 文件", "gina": "里面没有 attention.py",
                 "ivan": "是指向提交之外文件的符号链接"}


def digest_tree(path):
    """Every path, mode and byte under `path` (symlinks by target, .git included)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files) + sorted(dirs):
            full = os.path.join(root, name)
            st = os.lstat(full)
            h.update(f"{os.path.relpath(full, path)}\0{st.st_mode}\0".encode())
            if os.path.islink(full):
                h.update(os.readlink(full).encode())
            elif os.path.isfile(full):
                h.update(Path(full).read_bytes())
    return h.hexdigest()


def make_class(folder):
    """py, ipynb, folder, zip, git repository, broken zip, empty folder, escaping symlink."""
    folder.mkdir(parents=True)
    shutil.copy(SUBMISSIONS / "correct" / "einsum.py", folder / "alice.py")
    shutil.copy(SUBMISSIONS / "wrong" / "module_scale_sqrt_D.py", folder / "bob.py")
    shutil.copy(SUBMISSIONS / "correct" / "notebook.ipynb", folder / "carol.ipynb")
    shutil.copytree(SUBMISSIONS / "correct" / "folder_submission", folder / "dave")
    with zipfile.ZipFile(folder / "erin.zip", "w") as archive:
        archive.write(SUBMISSIONS / "wrong" / "mask_missing.py", "erin-lesson12/attention.py")
        archive.writestr("__MACOSX/erin-lesson12/._attention.py", "junk")
    (folder / "frank.zip").write_bytes(b"PK\x03\x04 this is not really a zip")
    (folder / "gina").mkdir()
    repo = folder / "henry"
    repo.mkdir()
    shutil.copy(SUBMISSIONS / "wrong" / "mask_after_softmax.py", repo / "attention.py")
    marker = folder.parent / "REPO_CODE_RAN"
    for name in ("conftest.py", "setup.py", "sitecustomize.py"):  # never run by the grader
        (repo / name).write_text(f"open({str(marker)!r}, 'w').write('{name}')\n")
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "classroom.yml").write_text("on: push\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "submit"], cwd=repo, check=True)
    (folder / "ivan").mkdir()
    os.symlink(ROOT / "solutions" / "attention.py", folder / "ivan" / "attention.py")
    (folder / ".DS_Store").write_bytes(b"\0")  # OS litter: not a student
    return marker


def run_batch(source, out, *extra, timeout=600, env=None):
    return subprocess.run([PY, "-m", "grader", "batch", str(source), "--out", str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def read_gradebook(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    base = tmp_path_factory.mktemp("class")
    source = base / "submissions"
    marker = make_class(source)
    before = digest_tree(source)
    out = base / "out"
    began = time.monotonic()
    # An instructor's shell asking for a pool of 4: the judges must still compute on one thread.
    proc = run_batch(source, out, "--jobs", "2", "--verbose",
                     env=dict(os.environ, OMP_NUM_THREADS="4"))
    seconds = time.monotonic() - began
    assert proc.returncode == 0, proc.stderr
    return {"source": source, "out": out, "proc": proc, "before": before, "marker": marker,
            "seconds": seconds}


# -- the mixed folder -------------------------------------------------------------------------------
def test_each_judge_forks_its_workers_from_a_zygote_of_its_own(mixed):
    from grader.sandbox import forkserver, launch

    if forkserver.supported(launch.choose_isolation("auto")) is None:
        pytest.skip("no fork server here: every worker starts cold")
    assert "2 个评分进程" in mixed["proc"].stderr  # --verbose, in the batch's language (zh)
    assert said("verbose_forked") in mixed["proc"].stderr


def test_every_entry_gets_a_row_and_the_right_outcome(mixed):
    rows = read_gradebook(mixed["out"] / "gradebook.csv")
    assert list(rows[0].keys()) == ["student", "entry"] + CHECK_IDS + [
        "total", "max_score", "status", "note", "parts"]
    by_id = {r["student"]: r for r in rows}
    assert set(by_id) == GRADED | set(UNGRADABLE)  # .DS_Store is no student
    assert [r["student"] for r in rows] == sorted(by_id)
    for sid in ("alice", "carol", "dave"):
        assert float(by_id[sid]["total"]) == MAX, sid
    assert by_id["carol"]["entry"] == "carol.ipynb" and by_id["erin"]["entry"] == "erin.zip"
    for sid in ("bob", "erin", "henry"):
        assert 0 < float(by_id[sid]["total"]) < MAX, sid
    assert float(by_id["bob"]["module.reference"]) == 0
    assert float(by_id["erin"]["attend.causal"]) == 0
    assert float(by_id["henry"]["attend.softmax"]) == 0
    for sid in GRADED:
        row = by_id[sid]
        assert row["status"] == "graded" and row["note"] == ""
        assert float(row["max_score"]) == MAX
        assert sum(float(row[c]) for c in CHECK_IDS) == pytest.approx(float(row["total"]), abs=1e-3)
    for sid, reason in UNGRADABLE_ZH.items():
        row = by_id[sid]
        assert row["status"] == "ungradable" and reason in row["note"], row
        assert words.foreign_lines(row["note"].replace(sid, ""), "zh") == [], row["note"]  # a name is data
        record = json.loads((mixed["out"] / "students" / sid / "report.json").read_text())
        assert UNGRADABLE[sid] in record["error"] and reason in record["error_said"]["zh"]
        assert float(row["total"]) == 0 and all(row[c] == "" for c in CHECK_IDS)
        assert str(mixed["source"]) not in row["note"]  # the entry's name, not the TA's path


def test_reports_pages_and_kinds(mixed):
    out = mixed["out"]
    for sid in GRADED | set(UNGRADABLE):
        folder = out / "students" / sid
        record = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        assert record["student"] == sid
        assert record["digest"] == entries.entry_digest(str(mixed["source"] / record["entry"]))
        html = (folder / "feedback.html").read_text(encoding="utf-8")
        assert html.startswith("<!DOCTYPE html>") and sid in html
        assert (folder / "feedback.md").read_text(encoding="utf-8").startswith("# ")
    containers = {sid: json.loads((out / "students" / sid / "report.json").read_text())["container"]
                  for sid in GRADED}
    assert containers == {"alice": "file", "bob": "file", "carol": "file", "dave": "folder",
                          "erin": "zip", "henry": "git"}
    henry = json.loads((out / "students" / "henry" / "report.json").read_text())
    maps = henry["attention_maps"]
    assert maps["causal"]["student"] and len(maps["causal"]["student"]) == judge.PROBE_T
    erin = json.loads((out / "students" / "erin" / "report.json").read_text())
    leaks = erin["attention_maps"]["causal"]["leaks"]  # mask_missing: the future leaks
    assert sum(map(sum, leaks)) == judge.PROBE_T * (judge.PROBE_T - 1) // 2


def outcome(checks):
    """What a grading decided, check by check (no timings, paths or output)."""
    return [(c["id"], c["status"], c["score"], [v["key"] for v in c["verdicts"]]) for c in checks]


def test_class_summary_names_the_mistakes(mixed):
    summary = json.loads((mixed["out"] / "summary.json").read_text(encoding="utf-8"))
    assert summary["students"] == 9 and summary["graded"] == 6
    assert {u["student"] for u in summary["ungradable"]} == set(UNGRADABLE)
    assert summary["full_marks"] == 3
    assert sum(b["count"] for b in summary["histogram"]) == 6
    assert summary["histogram"][-1]["count"] >= 3
    mistakes = {m["key"]: m for m in summary["mistakes"]}
    assert mistakes["scale_sqrt_D"]["students"] == 1 and mistakes["scale_sqrt_D"]["percent"] == 17
    assert mistakes["mask_missing"]["students"] >= 1
    assert mistakes["mask_after_softmax"]["students"] == 1
    assert "√D" in mistakes["scale_sqrt_D"]["text"]["en"]
    assert not {"wrong_values", "raised", "not_implemented"} & set(mistakes)  # outcomes, apart
    causal = next(c for c in summary["checks"] if c["id"] == "attend.causal")
    assert causal["passed"] == 4 and causal["not_passed"] == 2 and causal["percent_not_passed"] == 33
    md = (mixed["out"] / "summary.md").read_text(encoding="utf-8")
    assert "| 1 | 17% | `scale_sqrt_D`" in md
    html = (mixed["out"] / "summary.html").read_text(encoding="utf-8")
    assert 'data-key="scale_sqrt_D"' in html and 'id="histogram"' in html


def test_progress_and_ungradable_lines(mixed):
    err = mixed["proc"].stderr
    for sid, reason in UNGRADABLE.items():
        line = next(l for l in err.splitlines() if f"✗ {sid}：" in l)
        assert "无法评分" in line and UNGRADABLE_ZH[sid] in line
    progress = [l for l in err.splitlines() if l.startswith("[")]
    assert len(progress) == 9  # one plain line per entry when stderr is no tty
    assert all("每分钟" in l and "还需" in l for l in progress)
    assert progress[-1].startswith("[9/9]") and " 还需 0:00" in progress[-1]
    # The check thread's torch had one compute thread before anything set it: the environment
    # was pinned before torch started (process.py), whatever the instructor's shell asked for.
    assert "计算线程 1 个" in err
    # One language a line (ids and paths are data, the internals were asked for by --verbose).
    shown = err.replace(str(mixed["out"]), "OUT")
    for sid in GRADED | set(UNGRADABLE):  # an id is data
        shown = re.sub(rf"\b{sid}\b", "s1", shown)
    assert not words.foreign_lines(shown, "zh"), shown


def test_nothing_in_the_class_folder_is_written_or_run(mixed):
    assert digest_tree(mixed["source"]) == mixed["before"]
    assert not mixed["marker"].exists()


def test_a_rerun_regrades_nothing_and_a_changed_entry_only_the_same_when_cold(mixed, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(mixed["out"], out)
    first = json.loads((mixed["out"] / "batch.json").read_text())["grader"]
    if batch.grader_fingerprint() != first:
        pytest.skip("grader files were edited since the module's batch ran")
    proc = run_batch(mixed["source"], out, "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    assert said("entries", n=9, current=9, todo=0) in proc.stderr
    assert not any(internal in proc.stderr for internal in ("评分方式", "内存峰值", "相似度"))
    assert (out / "gradebook.csv").read_bytes() == (mixed["out"] / "gradebook.csv").read_bytes()
    # A changed entry (a copy of the class, DIR is never touched) is the only one regraded: bob
    # hands in erin's mistake.  Graded by --cold-workers (one torch import per submission), the
    # fork server's slow twin: his row is erin's, which a forked worker graded in the module's
    # batch (a wrong file: every check's score, the total, the status and the note alike).
    source = tmp_path / "class"
    shutil.copytree(mixed["source"], source, symlinks=True)
    shutil.copy(SUBMISSIONS / "wrong" / "mask_missing.py", source / "bob.py")
    proc = run_batch(source, out, "--cold-workers", "--verbose")  # default jobs: one late file
    assert proc.returncode == 0, proc.stderr  # starts one judge, not one per core
    assert said("entries", n=9, current=8, todo=1) in proc.stderr
    assert said("verbose_cold") in proc.stderr
    rows = {r["student"]: r for r in read_gradebook(out / "gradebook.csv")}
    full = {r["student"]: r for r in read_gradebook(mixed["out"] / "gradebook.csv")}
    assert rows["bob"] != full["bob"]  # bob's changed file was graded anew
    assert dict(rows["bob"], student="erin", entry="erin.zip") == full["erin"]
    assert {s: r for s, r in rows.items() if s != "bob"} == \
        {s: r for s, r in full.items() if s != "bob"}
    report = json.loads((out / "students" / "bob" / "report.json").read_text())
    assert report["report"]["metadata"]["worker_start"] == "exec"


def test_kill_minus_9_and_resume_gives_the_same_gradebook(mixed, tmp_path):
    """Killed (SIGKILL to the whole batch: parent and judges) at a random moment after the first
    report, then run again: the gradebook is byte-identical to the uninterrupted run's rows."""
    keep = ["alice.py", "bob.py", "erin.zip", "frank.zip", "henry"]
    source = tmp_path / "class"
    source.mkdir()
    for name in keep:
        src = mixed["source"] / name
        (shutil.copytree(src, source / name, symlinks=True) if src.is_dir()
         else shutil.copy(src, source / name))
    # Forked workers grade one in ~0.3 s: copies of alice keep the batch running long enough
    # (eight entries left after the first report, the kill within 0.8 s of it).
    copies = [f"alice{i}" for i in range(2, 6)]
    for name in copies:
        shutil.copy(mixed["source"] / "alice.py", source / f"{name}.py")
    out = tmp_path / "out"
    proc = subprocess.Popen([PY, "-m", "grader", "batch", str(source), "--out", str(out),
                             "--jobs", "1"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 180
    while not list((out / "students").glob("*/report.json")) and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(random.uniform(0, 0.8))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list((out / "students").glob("*/report.json")))
    assert 1 <= done_before < len(keep) + len(copies), "the kill should land mid-batch"
    assert not (out / "gradebook.csv").exists()
    rerun = run_batch(source, out, "--jobs", "1")
    assert rerun.returncode == 0, rerun.stderr
    if json.loads((out / "batch.json").read_text())["grader"] == \
            json.loads((mixed["out"] / "batch.json").read_text())["grader"]:
        up_to_date = int(rerun.stderr.split(" 份已是最新")[0].split("：")[-1])
        assert up_to_date >= done_before - 1  # at most the one a judge was writing is redone
    assert not list(out.rglob(".tmp-*"))
    full = (mixed["out"] / "gradebook.csv").read_text(encoding="utf-8").splitlines()
    students = {Path(n).stem if not (mixed["source"] / n).is_dir() else n for n in keep}
    expected = [full[0]] + [line for line in full[1:] if line.split(",")[0] in students]
    alice = next(line for line in full[1:] if line.split(",")[0] == "alice")
    expected += [",".join([name, name + ".py"] + alice.split(",")[2:]) for name in copies]
    expected = [expected[0]] + sorted(expected[1:])
    assert (out / "gradebook.csv").read_text(encoding="utf-8").splitlines() == expected


# -- small parts, no grading ------------------------------------------------------------------------
def test_student_ids_from_entry_names():
    ids = entries.assign_ids(["alice.py", "alice.zip", "bob.ipynb", "张三.py", "a b.py", "a_b.py",
                            "carol"])
    assert ids["bob.ipynb"] == "bob" and ids["carol"] == "carol" and ids["张三.py"] == "张三"
    assert ids["alice.py"] != ids["alice.zip"] and "/" not in "".join(ids.values())
    assert len(set(ids.values())) == len(ids)


def test_zip_loading(tmp_path):
    path = tmp_path / "s.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("s/other/attention.py", "X = 'deeper'\n")
        archive.writestr("s/attention.py", "X = 'top'\n")
        archive.writestr(".hidden/attention.py", "X = 'hidden'\n")
        link = zipfile.ZipInfo("attention.py")
        link.external_attr = (0o120777 << 16)  # a symlink member: never followed
        archive.writestr(link, "/work/main/solutions/attention.py")
    with submission.load(str(path)) as sub:
        assert sub.source == "X = 'top'\n" and sub.container == "zip"
    nb = tmp_path / "nb.zip"
    notebook = {"cells": [{"cell_type": "code", "source": ["%pip install x\n", "Y = 1\n"]}]}
    with zipfile.ZipFile(nb, "w") as archive:
        archive.writestr("work/attention.ipynb", json.dumps(notebook))
    with submission.load(str(nb)) as sub:
        assert sub.kind == "notebook" and "Y = 1" in sub.source and "\n%pip" not in sub.source
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("README.md", "hi")
    for bad, reason in ((empty, "no attention.py"), (tmp_path / "nb.zip.part", "no such file")):
        with pytest.raises(submission.SubmissionError, match=reason):
            submission.load(str(bad))


def test_out_inside_the_class_folder_is_refused(tmp_path):
    (tmp_path / "class").mkdir()
    proc = run_batch(tmp_path / "class", tmp_path / "class" / "out", timeout=60)
    assert proc.returncode == 2 and "里面" in proc.stderr and "error" not in proc.stderr
    assert os.listdir(tmp_path / "class") == []


def asleep(source):
    """hostile/infinite_loop_in_attend.py's endless loop asleep instead of spinning: to the judge
    the same hang (no answer within the call's time, the worker killed, a fresh one for the next
    call), without a core burnt for each call's whole time (spinning hangs are graded in
    test_corpus_hostile, test_held_out and the demo class of test_ta_walkthrough)."""
    spin = "    while True:  # spin for ever\n        pass\n"
    assert spin in source and "import math\n" in source
    return source.replace(spin, "    while True:  # hang for ever, asleep\n        time.sleep(1)\n"
                          ).replace("import math\n", "import math\nimport time\n", 1)


def test_one_judge_grades_each_student_as_if_alone(tmp_path):
    """Hostile submissions between honest ones, all on one judge (one pytest session, one
    zygote): every report equals the one the same file gets graded alone: a check session of
    its own, its workers forked from this test's zygote, which never ran a student's code.
    (Forked and cold workers give the same verdicts: test_forkserver's spread, and
    test_a_rerun_regrades_nothing_and_a_changed_entry_only_the_same_when_cold here; cold ones
    here cost 13 torch imports.)"""
    from grader.judge import grading
    from grader.judge.workers import forked
    from grader.sandbox import forkserver, launch

    order = [("a01", "correct/einsum.py"), ("a02", "hostile/exit_at_import.py"),
             ("a03", "wrong/scale_none.py"), ("a04", "hostile/infinite_loop_in_attend.py"),
             ("a05", "hostile/patch_allclose.py"), ("a06", "hostile/os_exit_in_attend.py"),
             ("a07", "wrong/mask_missing.py")]  # (the memory hog: test_sandbox, fork modes)
    source = tmp_path / "class"
    source.mkdir()
    for name, fixture in order:
        text = (SUBMISSIONS / fixture).read_text(encoding="utf-8")
        (source / f"{name}.py").write_text(asleep(text) if "infinite_loop" in fixture else text,
                                           encoding="utf-8")
    out = tmp_path / "out"
    proc = run_batch(source, out, "--jobs", "1", "--call-timeout", "2", "--verbose")
    assert proc.returncode == 0, proc.stderr
    assert said("verbose_forked") in proc.stderr
    limits = sandbox.Limits(call_seconds=2.0)
    server = forkserver.ForkServer(launch.choose_isolation("auto"))
    try:
        alone = {}
        for name, fixture in order:
            sub, student = grading.start(str(source / f"{name}.py"), server.isolation, limits,
                                         forked(server))
            alone[name, fixture] = grading.finish(sub, student)  # no session given: a new one
    finally:
        server.close()
    for name, fixture in order:
        record = json.loads((out / "students" / name / "report.json").read_text())
        assert record["report"]["metadata"]["worker_start"] == "fork"
        assert alone[name, fixture]["metadata"]["worker_start"] == "fork"
        assert outcome(record["report"]["checks"]) == outcome(alone[name, fixture]["checks"]), \
            fixture


def _reference_class(folder, count):
    folder.mkdir()
    for n in range(count):
        shutil.copy(ROOT / "solutions" / "attention.py", folder / f"r{n:02d}.py")
    return folder


def _full_marks(out, count):
    rows = read_gradebook(out / "gradebook.csv")
    assert len(rows) == count
    for row in rows:
        report = json.loads((out / "students" / row["student"] / "report.json").read_text())
        assert report["status"] == "graded" and report["score"] == MAX, row["student"]


def _judge_processes():
    """{pid: parent pid} of the batch judges running now."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"judge_main" not in handle.read():
                    continue
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                found[int(pid)] = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="judges are found in /proc")
def test_a_judge_that_dies_has_its_tasks_graded_by_a_new_one(tmp_path):
    """Kill -9 a judge as soon as it is there: the parent sees its pipe close, retries what it
    held on a judge started for it, and every student is graded in full.  One job: no other
    judge is there to take the tasks, the new one must be started."""
    source, out = _reference_class(tmp_path / "class", 3), tmp_path / "out"
    proc = subprocess.Popen([PY, "-m", "grader", "batch", str(source), "--out", str(out),
                             "--jobs", "1"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    killed, deadline = None, time.monotonic() + 120
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        judges = [pid for pid, parent in _judge_processes().items() if parent == proc.pid]
        if judges:
            killed = judges[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.01)
    _, stderr = proc.communicate(timeout=300)
    assert killed is not None, "no judge was seen"
    assert proc.returncode == 0, stderr
    _full_marks(out, 3)


def test_default_jobs_one_per_usable_core_fewer_where_memory_is_short(monkeypatch, tmp_path):
    from grader.batch import dispatch

    monkeypatch.setattr(dispatch, "usable_cores", lambda: 8)
    for available, jobs in ((3.5, 3), (100, 8), (0.2, 1)):
        monkeypatch.setattr(dispatch, "_available_bytes",
                            lambda a=available: int(a * dispatch.JOB_BYTES))
        assert dispatch.default_jobs() == jobs
    monkeypatch.setattr(dispatch, "_available_bytes", lambda: 8 * 2 ** 30)
    monkeypatch.setattr(dispatch, "accelerator_nodes", lambda: ["/dev/nvidia0", "/dev/nvidiactl"])
    assert dispatch.default_jobs() == 3  # each job's workers start CUDA: 8 GiB hold 3 of them
    monkeypatch.setattr(dispatch, "accelerator_nodes", lambda: [])
    assert dispatch.default_jobs() == 8
    monkeypatch.undo()
    quota = tmp_path / "cpu.max"
    monkeypatch.setattr(dispatch, "CPU_MAX", str(quota))
    quota.write_text("max 100000\n")
    unlimited = dispatch.usable_cores()
    assert unlimited == len(os.sched_getaffinity(0))
    quota.write_text("100000 100000\n")  # a container given one CPU of the host's
    assert dispatch.usable_cores() == 1

