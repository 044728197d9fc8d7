"""`make submit` (grader/tools/submit.py) and its packages in the grader (grader/judge/manifest.py, batch).

Real runs, each importing the work in a real worker: one good package (a non-ASCII id, packaged
from a folder full of junk) and its round trip through `batch` with three doctored copies (edited
after packaging, junk added, made with an older kit); a syntax error and an import failure (nothing
packaged); the untouched stub (refused without a terminal, asked and declined, packaged with
--yes); two students side by side; the commit in a git checkout.  About 40 s on 2 busy cores.
"""
import contextlib
import csv
import datetime
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.authoring import stubs as authoring
from grader.batch import entries
from grader.batch import gradebook
from grader.render import package
from grader.render.student_markdown import student_markdown
from grader.judge import manifest, submission
from grader import rubric
from grader.tools import submit  # noqa: E402
from grader.__main__ import parse  # noqa: E402

import zygotes  # noqa: E402

PY = sys.executable
SOLUTION = ROOT / "solutions" / "attention.py"
STUB = ROOT / "release" / "attention.py"
NOTEBOOK_STUB = ROOT / "release" / "attention.ipynb"
WRONG = ROOT / "tests" / "submissions" / "wrong" / "mask_missing.py"
RUBRIC = rubric.load()
MAX = sum(c.points for c in RUBRIC.checks)
PUBLIC = [c.id for c in RUBRIC.checks if c.visibility == "public"]
PUBLIC_MAX = sum(c.points for c in RUBRIC.checks if c.visibility == "public")


def start_submit(work, *args):
    """The real command, stdin not a terminal (as in CI or a script), started."""
    return subprocess.Popen([PY, "-m", "grader", "submit", str(work), "--lang", "en", *args],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finished(proc):
    stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def zygote():
    """This module's fork server (zygotes.server, closed by conftest when the module ends)."""
    from grader.sandbox import launch

    return zygotes.server(launch.choose_isolation("auto"))


@contextlib.contextmanager
def forked_workers():
    """submit.main's worker forked from this module's zygote instead of started cold (a torch
    import each): what these tests prove is submit's, not how a worker starts (the command line
    runs, the good package and, beside it, the stub with --yes, start theirs cold)."""
    from grader.judge.student import Student
    from grader.judge.workers import forked

    server = zygote()
    made = submit.Student
    submit.Student = lambda *args, **kwargs: Student(*args, workers=forked(server), **kwargs)
    try:
        yield
    finally:
        submit.Student = made


def submit_here(work, *args):
    """submit.main in this process, stdin not a terminal, its worker forked: what start_submit
    gives, without a second interpreter, the judge's imports and a cold worker."""
    out, stdin = io.StringIO(), sys.stdin
    sys.stdin = io.StringIO()  # no terminal
    try:
        with contextlib.redirect_stdout(out), forked_workers():
            code = submit.main(parse(["submit", str(work), "--lang", "en", *args]), out=out)
    finally:
        sys.stdin = stdin
    return subprocess.CompletedProcess(["submit", str(work), *args], code, out.getvalue(), "")


def members(path):
    with zipfile.ZipFile(path) as archive:
        return sorted(archive.namelist())


def read_manifest(path):
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(manifest.NAME).decode("utf-8"))


def rezip(source, target, change=None, add=(), manifest_update=None):
    """A copy of package `source` as `target`: files changed, files added, manifest edited."""
    with zipfile.ZipFile(source) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    files.update(change or {})
    if manifest_update:
        data = json.loads(files[manifest.NAME])
        data.update(manifest_update)
        files[manifest.NAME] = manifest.dumps(data).encode("utf-8")
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in list(files.items()) + list(add):
            archive.writestr(name, data)
    return target


def sha(data):
    return hashlib.sha256(data).hexdigest()


# -- one good package: 张三, from a folder full of other things --------------------------------------
@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zhang")
    work = folder / "attention.py"
    shutil.copy(SOLUTION, work)
    (folder / ".venv" / "lib").mkdir(parents=True)
    (folder / ".venv" / "lib" / "site.py").write_text("x = 1\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "attention.cpython-311.pyc").write_bytes(b"\0" * 64)
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "scratch.py").write_text("print('scratch')\n")
    shutil.copy(WRONG, folder / "lisi_attention.py")  # another student's file lying around
    before = work.read_bytes()
    # Beside it, at the same time, another student's command: bob hands in the stub with --yes,
    # with a file of someone else's in his folder (test_two_students_package_side_by_side).
    bob = tmp_path_factory.mktemp("bob")
    shutil.copy(STUB, bob / "attention.py")
    shutil.copy(SOLUTION, bob / "alice-copy.py")  # something of the other student's, never packed
    began = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    running = [start_submit(work, "--student", "张三"),
               start_submit(bob / "attention.py", "--student", "bob", "--yes")]
    proc, beside = [finished(p) for p in running]
    ended = datetime.datetime.now(datetime.timezone.utc)
    return {"folder": folder, "work": work, "before": before, "proc": proc,
            "zip": folder / "张三.zip", "began": began, "ended": ended,
            "bob": {"folder": bob, "proc": beside}}


def test_a_good_package_holds_the_work_and_the_manifest_only(packaged):
    proc = packaged["proc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    target = packaged["zip"]
    assert target.is_file()
    assert members(target) == ["attention.py", "manifest.json"]  # no .venv, cache, notes, others
    with zipfile.ZipFile(target) as archive:
        assert archive.read("attention.py") == packaged["before"]
    data = read_manifest(target)
    assert data["student"] == "张三" and data["kind"] == manifest.KIND
    assert data["kit_version"] == RUBRIC.version and data["rubric_hash"] == RUBRIC.hash
    assert data["files"] == {"attention.py": {"sha256": sha(packaged["before"]),
                                              "bytes": len(packaged["before"])}}
    created = datetime.datetime.strptime(data["created"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    assert packaged["began"] <= created <= packaged["ended"]  # stamped while submit ran
    checks = data["public_checks"]
    assert checks["score"] == checks["max_score"] == PUBLIC_MAX
    assert checks["passed"] == checks["total"] == len(PUBLIC) and checks["not_passed"] == []
    assert checks["hidden_not_run"] == len(RUBRIC.checks) - len(PUBLIC)
    # What the student is told: the summary, where the zip is and what to upload.
    assert f"public checks: {PUBLIC_MAX:g}/{PUBLIC_MAX:g} points" in proc.stdout
    assert f"packaged: {target}" in proc.stdout
    assert "Upload this one file: 张三.zip" in proc.stdout
    # The work is untouched; the id is remembered beside it, not inside it.
    assert packaged["work"].read_bytes() == packaged["before"]
    state = json.loads((packaged["folder"] / ".attention-submit.json").read_text("utf-8"))
    assert state["student"] == "张三"
    assert sorted(p.name for p in packaged["folder"].iterdir()) == sorted(
        [".venv", "__pycache__", "notes.txt", "scratch.py", "lisi_attention.py", "attention.py",
         ".attention-submit.json", "张三.zip"])  # no temporary file left behind


@pytest.fixture(scope="module")
def graded(packaged, tmp_path_factory):
    """The package and three doctored copies, graded by `batch` as they are."""
    assert packaged["proc"].returncode == 0, packaged["proc"].stdout
    base = tmp_path_factory.mktemp("class")
    source = base / "submissions"
    source.mkdir()
    good = packaged["zip"]
    shutil.copy(good, source / "张三.zip")
    shutil.copy(good, source / "submission-0042.zip")  # another entry claiming to be 张三
    rezip(good, source / "wang.wu.zip", change={"attention.py": WRONG.read_bytes()},
          manifest_update={"student": "wang.wu"})
    rezip(good, source / "zhao.liu.zip", manifest_update={"student": "zhao.liu"},
          add=[("notes.txt", b"later"), (".venv/lib/site.py", b"import os\n"),
               ("__pycache__/attention.cpython-311.pyc", b"\0"),
               ("lisi/attention.py", STUB.read_bytes())])
    rezip(good, source / "sun.qi.zip",
          manifest_update={"student": "sun.qi", "kit_version": "12.0", "rubric_hash": "0" * 16})
    shutil.copy(SOLUTION, source / "plain.py")  # not a package: no note
    out = base / "out"
    proc = subprocess.run([PY, "-m", "grader", "batch", str(source), "--out", str(out),
                           "--jobs", "1", "--lang", "en"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    with open(out / "gradebook.csv", encoding="utf-8", newline="") as handle:
        rows = {r["student"]: r for r in csv.DictReader(handle)}

    def record(sid):
        return json.loads((out / "students" / sid / "report.json").read_text("utf-8"))

    return {"source": source, "out": out, "rows": rows, "record": record, "proc": proc}


def test_round_trip_through_batch_keeps_the_entry_name_as_the_id(graded):
    rows = graded["rows"]
    assert set(rows) == {"张三", "submission-0042", "wang.wu", "zhao.liu", "sun.qi", "plain"}
    good = rows["张三"]
    assert good["entry"] == "张三.zip"
    assert good["status"] == "graded" and float(good["total"]) == MAX and good["note"] == ""
    record = graded["record"]("张三")
    package = record["package"]
    assert record["report"]["metadata"]["package"] == package
    assert package["intact"] and package["student"] == "张三" and package["current_rubric"]
    assert package["kit_version"] == RUBRIC.version
    assert package["public_checks"]["score"] == PUBLIC_MAX
    assert (graded["out"] / "students" / "张三" / "feedback.html").exists()
    assert "files match the manifest" in \
        (graded["out"] / "students" / "张三" / "feedback.md").read_text("utf-8")
    assert rows["plain"]["note"] == "" and graded["record"]("plain")["package"] is None


def test_a_manifest_naming_another_student_is_a_flag_never_a_rename(graded):
    rows = graded["rows"]
    claim = rows["submission-0042"]  # its manifest says 张三: it keeps its own row
    assert claim["entry"] == "submission-0042.zip" and claim["status"] == "graded"
    assert "its manifest names student '张三', not 'submission-0042'" in claim["note"]
    assert rows["张三"]["entry"] == "张三.zip" and rows["张三"]["note"] == ""
    record = graded["record"]("submission-0042")
    assert record["package"]["identity"] == {"manifest": "张三", "entry": "submission-0042"}
    md = (graded["out"] / "students" / "submission-0042" / "feedback.md").read_text("utf-8")
    assert "its manifest names student" in md


def test_a_file_edited_after_packaging_is_graded_and_flagged(graded):
    row = graded["rows"]["wang.wu"]
    assert row["status"] == "graded"
    assert 0 < float(row["total"]) < MAX and float(row["attend.causal"]) == 0  # graded as it is
    assert "attention.py changed after packaging" in row["note"]
    package = graded["record"]("wang.wu")["package"]
    assert package["changed"] == ["attention.py"] and not package["intact"]
    assert package["public_checks"]["score"] == PUBLIC_MAX  # what the manifest claimed: not used
    md = (graded["out"] / "students" / "wang.wu" / "feedback.md").read_text("utf-8")
    assert "changed after packaging" in md


def test_junk_added_to_a_package_is_left_out_and_flagged(graded):
    row = graded["rows"]["zhao.liu"]
    assert row["status"] == "graded" and float(row["total"]) == MAX  # the stub in lisi/ unread
    assert "4 file(s) not in the manifest, left out" in row["note"]
    package = graded["record"]("zhao.liu")["package"]
    assert package["extra"] == sorted([".venv/lib/site.py", "__pycache__/attention.cpython-311.pyc",
                                       "lisi/attention.py", "notes.txt"])
    assert package["changed"] == [] and package["missing"] == []


def test_a_package_from_an_older_kit_is_graded_with_todays_rubric_and_says_so(graded):
    row = graded["rows"]["sun.qi"]
    assert row["status"] == "graded" and float(row["total"]) == MAX
    assert "made with kit 12.0" in row["note"] and f"today's kit {RUBRIC.version}" in row["note"]
    record = graded["record"]("sun.qi")
    assert record["package"]["kit_version"] == "12.0" and not record["package"]["current_rubric"]
    assert record["report"]["metadata"]["rubric_hash"] == RUBRIC.hash


def test_grade_takes_a_package_as_it_is_and_says_what_it_found(graded, monkeypatch):
    # `check` is `grade` with the public checks only (the same code path, a third of the time),
    # its command run here (grader.__main__.grade_command: the door itself is door_matrix's), its
    # judge's worker forked from this module's zygote (what is proven is the package check's).
    from grader.__main__ import grade_command
    from grader.judge import service
    from grader.judge.workers import forked

    made = service.Judge

    def forking_judge(limits, isolation):
        judge = made(limits, isolation)
        judge.workers = forked(zygote())
        judge.workers.close = lambda: None  # the module's fork server: conftest closes it
        return judge

    monkeypatch.setattr(service, "Judge", forking_judge)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = grade_command(parse(["check", str(graded["source"] / "wang.wu.zip"), "--lang",
                                    "en"]))
    assert code == 0, printed.getvalue()
    tail = printed.getvalue().splitlines()[-2:]  # after the report: what the package check found
    assert tail[0].startswith("package: wang.wu · ") and "files differ from the manifest" in tail[0]
    assert tail[1].startswith("⚠ package: attention.py changed after packaging")


# -- nothing packaged -----------------------------------------------------------------------------
@pytest.mark.parametrize("source, line, shown", [
    ("import torch\n\n\ndef split_heads(x, heads:\n    return x\n", 4, "def split_heads(x, heads:"),
    ("import torch\nHEADS = 2\nraise RuntimeError('configured wrongly')\n", 3,
     "raise RuntimeError('configured wrongly')"),
    # The indentation is the cause: it is shown as written, never stripped.
    ("def split_heads(x, heads):\n    y = x\n  return y\n", 3, "  return y"),
], ids=["syntax-error", "exception-at-import", "indentation-error"])
def test_a_file_that_does_not_import_is_not_packaged(tmp_path, source, line, shown):
    work = tmp_path / "attention.py"
    work.write_text(source, encoding="utf-8")
    stale = tmp_path / "alice.zip"  # an earlier, good package of this student
    stale.write_bytes(b"PK old")
    proc = submit_here(work, "--student", "alice")
    assert proc.returncode == submit.NOT_PACKAGED, proc.stdout
    assert "cannot be imported: nothing packaged" in proc.stdout
    assert f"    attention.py:{line}:\n    | {shown}\n" in proc.stdout
    assert "public checks" not in proc.stdout  # stopped before the checks
    # Nothing packaged, and no older zip left beside it to be uploaded by mistake.
    assert not list(tmp_path.glob("*.zip")) and not list(tmp_path.glob(".tmp-*"))
    assert "The earlier alice.zip was removed" in proc.stdout


def test_the_untouched_stub_is_refused_without_a_terminal(tmp_path):
    work = tmp_path / "attention.py"
    shutil.copy(STUB, work)
    proc = submit_here(work, "--student", "alice")
    assert proc.returncode == submit.NOT_PACKAGED
    assert "still the untouched stub" in proc.stdout and "CONFIRM=1" in proc.stdout
    assert not list(tmp_path.glob("*.zip"))


def test_no_student_id_without_a_terminal_is_an_error(tmp_path):
    work = tmp_path / "attention.py"
    shutil.copy(SOLUTION, work)
    proc = submit_here(work)
    assert proc.returncode == submit.NOT_PACKAGED and "STUDENT=" in proc.stdout
    assert not list(tmp_path.glob("*.zip"))


def test_the_id_is_asked_once_and_the_stub_needs_a_yes(tmp_path):
    """In-process with a fake terminal: asked for the id, declines the stub; next time the id is
    remembered and only the stub question comes."""
    work = tmp_path / "attention.py"
    shutil.copy(STUB, work)
    asked = []

    def terminal(answers):
        def ask(prompt):
            asked.append(prompt)
            return answers.pop(0)
        return ask

    out = io.StringIO()
    with forked_workers():
        code = submit.main(parse(["submit", str(work), "--lang", "en"]),
                           ask=terminal(["王五", "n"]), out=out)
    assert code == submit.NOT_PACKAGED and "not packaged" in out.getvalue()
    assert [p.split(" ")[0] for p in asked] == ["your", "Submit"]
    assert json.loads((tmp_path / ".attention-submit.json").read_text("utf-8"))["student"] == "王五"
    assert not list(tmp_path.glob("*.zip"))
    asked.clear()
    out = io.StringIO()
    with forked_workers():
        code = submit.main(parse(["submit", str(work), "--lang", "en"]), ask=terminal(["no"]),
                           out=out)
    assert code == submit.NOT_PACKAGED and len(asked) == 1 and asked[0].startswith("Submit it anyway?")
    assert "student: 王五" in out.getvalue()
    assert work.read_bytes() == STUB.read_bytes()


# -- two students side by side ---------------------------------------------------------------------
def test_two_students_package_side_by_side(packaged):
    """张三's good package (test_a_good_package_holds_the_work_and_the_manifest_only: his zip,
    manifest and remembered id) and bob's stub with --yes were made by two commands at once."""
    bob, sid = packaged["bob"]["folder"], "bob"
    stdout, stderr = packaged["bob"]["proc"].stdout, packaged["bob"]["proc"].stderr
    assert packaged["bob"]["proc"].returncode == 0, stdout + stderr
    assert packaged["proc"].returncode == 0, packaged["proc"].stdout + packaged["proc"].stderr
    assert sorted(p.name for p in packaged["folder"].glob("*.zip")) == ["张三.zip"]
    assert sorted(p.name for p in bob.glob("*.zip")) == ["bob.zip"]
    target = bob / f"{sid}.zip"
    assert members(target) == ["attention.py", "manifest.json"]
    data = read_manifest(target)
    assert data["student"] == sid
    assert data["files"]["attention.py"]["sha256"] == sha(STUB.read_bytes())
    state = json.loads((bob / ".attention-submit.json").read_text("utf-8"))
    assert state["student"] == sid
    assert read_manifest(packaged["zip"])["public_checks"]["score"] == PUBLIC_MAX
    checks = read_manifest(target)["public_checks"]
    assert checks["score"] == 0 and checks["not_passed"] == PUBLIC  # listed, not blocking
    assert "still the untouched stub" in stdout and "✗ attend.causal" in stdout


# -- GitHub Classroom: a git checkout ------------------------------------------------------------
def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def make_repo(path, bare_remote=None):
    """A student's checkout; with `bare_remote`, a GitHub Classroom one: its origin is on
    github.com (pushes go to the local bare repository) and it carries the Classroom workflow."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Student")
    git(path, "config", "user.email", "student@example.com")
    shutil.copy(STUB, path / "attention.py")
    (path / "README.md").write_text("lesson 12\n")
    git(path, "add", "attention.py", "README.md")
    if bare_remote:
        workflow = path / ".github" / "workflows" / "classroom.yml"
        workflow.parent.mkdir(parents=True)
        workflow.write_text("name: public checks\n")
        git(path, "add", ".github")
    git(path, "commit", "-qm", "starter code")
    if bare_remote:
        subprocess.run(["git", "init", "-q", "--bare", str(bare_remote)], check=True)
        git(path, "remote", "add", "origin", "https://github.com/lesson12-class/attention-zhang.git")
        git(path, "remote", "set-url", "--push", "origin", str(bare_remote))
        git(path, "push", "-q", "origin", "main")
    return path


def test_a_local_git_checkout_without_a_remote_hands_in_the_zip(tmp_path):
    repo = make_repo(tmp_path / "repo")
    shutil.copy(SOLUTION, repo / "attention.py")
    proc = submit_here(repo / "attention.py", "--student", "zhang")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "committed to git" in proc.stdout  # kept in the student's own history
    assert "Upload this one file: zhang.zip" in proc.stdout and "git push" not in proc.stdout
    assert not submit.classroom_checkout(str(repo))


def test_in_a_git_checkout_the_work_is_committed_and_never_pushed(tmp_path):
    remote = tmp_path / "remote.git"
    repo = make_repo(tmp_path / "repo", bare_remote=remote)
    pushed = git(remote, "rev-parse", "main")
    shutil.copy(SOLUTION, repo / "attention.py")
    (repo / "README.md").write_text("lesson 12, my notes\n")  # changed, not staged
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")  # staged by the student: must stay out of the commit
    proc = submit_here(repo / "attention.py", "--student", "张三")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "committed to git" in proc.stdout and "Run git push" in proc.stdout
    assert "Upload" not in proc.stdout  # one way to hand in: the push
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith(
        f"Submit attention.py: 张三, public checks {PUBLIC_MAX:g}/{PUBLIC_MAX:g}")
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["attention.py"]
    assert git(repo, "show", "HEAD:attention.py") == SOLUTION.read_text("utf-8")
    status = git(repo, "status", "--porcelain").splitlines()
    assert "A  staged.txt" in status and " M README.md" in status
    assert (repo / "张三.zip").is_file()
    assert not [f for f in git(repo, "ls-files").split() if f.endswith(".zip")]  # not committed
    assert git(remote, "rev-parse", "main") == pushed  # nothing was pushed


def test_git_commit_only_when_something_changed_and_says_why_it_failed(tmp_path):
    repo = make_repo(tmp_path / "repo")
    work = str(repo / "attention.py")
    assert submit.git_commit(work, "Submit") == ("unchanged", "")
    shutil.copy(SOLUTION, work)
    outcome, detail = submit.git_commit(work, "Submit attention.py: x")
    assert outcome == "committed" and detail == git(repo, "rev-parse", "--short", "HEAD").strip()
    assert submit.git_commit(work, "again") == ("unchanged", "")
    with open(work, "a", encoding="utf-8") as handle:
        handle.write("# more\n")
    git(repo, "config", "user.useConfigOnly", "true")
    git(repo, "config", "--unset", "user.email")
    env_home = tmp_path / "home"
    env_home.mkdir()
    old = {k: os.environ.get(k) for k in ("HOME", "GIT_CONFIG_GLOBAL", "EMAIL")}
    os.environ.update(HOME=str(env_home), GIT_CONFIG_GLOBAL=str(env_home / "none"))
    os.environ.pop("EMAIL", None)
    try:
        outcome, detail = submit.git_commit(work, "Submit")
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert outcome == "failed" and "email" in detail.lower()
    outside = tmp_path / "plain"
    outside.mkdir()
    shutil.copy(SOLUTION, outside / "attention.py")
    assert submit.git_commit(str(outside / "attention.py"), "x") == ("no-git", "")


# -- small parts, no worker ------------------------------------------------------------------------
def test_stub_detection():
    stub = authoring.make_stub(SOLUTION.read_text("utf-8"))
    assert submit.stub_state(stub)["untouched"]
    assert submit.stub_state(STUB.read_text("utf-8"))["untouched"]
    notebook = submission.notebook_source(NOTEBOOK_STUB.read_text("utf-8"))
    state = submit.stub_state(notebook)
    assert state["untouched"] and len(state["not_implemented"]) == len(submit.PIECES)
    assert not submit.stub_state(SOLUTION.read_text("utf-8"))["untouched"]
    commented = stub.replace("import torch", "# my notes\nimport torch  # torch\n\n", 1)
    assert submit.stub_state(commented)["untouched"]  # comments are no work
    answered = stub.replace("Q2_SHAPE_IS_ENOUGH = None", "Q2_SHAPE_IS_ENOUGH = False")
    assert not submit.stub_state(answered)["untouched"]
    started = stub.replace('raise NotImplementedError("merge_heads 尚未实现 / not implemented yet")',
                           "return x.transpose(1, 2).flatten(2)")
    state = submit.stub_state(started)
    assert not state["untouched"] and "merge_heads" not in state["not_implemented"]
    assert submit.stub_state("def f(:\n") is None


def test_safe_ids_and_file_names():
    assert manifest.safe_id("张三") == "张三"
    assert manifest.safe_id(" Li Lei ") == "Li_Lei"
    assert manifest.safe_id("../../etc/passwd") == "_.._etc_passwd"
    assert manifest.safe_id("...") == "_"
    long = manifest.safe_id("张" * 200)
    assert len(long.encode("utf-8")) <= manifest.MAX_ID_BYTES and set(long) == {"张"}
    assert submit.state_path("/x/release/attention.py") == "/x/release/.attention-submit.json"


def _package(tmp_path, name="p.zip", student="alice", work=b"x = 1\n", **update):
    data = manifest.build(student, "2026-01-01T00:00:00Z", "attention.py", work, RUBRIC,
                          {"score": 0})
    data.update(update)
    target = tmp_path / name
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("attention.py", work)
        archive.writestr(manifest.NAME, manifest.dumps(data))
    return target


def test_the_grader_reads_the_manifest_without_grading(tmp_path):
    good = _package(tmp_path, student="张三")
    sub = submission.load(str(good))
    sub.cleanup()
    assert sub.package["intact"] and sub.package["student"] == "张三"
    assert package.package_notes(sub.package) == []
    # The manifest names the work: an added attention.py at the top does not replace it.
    notebook = json.dumps({"cells": [{"cell_type": "code", "source": "N = 1\n"}]}).encode()
    data = manifest.build("nb", "2026-01-01T00:00:00Z", "attention.ipynb", notebook, RUBRIC, {})
    nb = tmp_path / "nb.zip"
    with zipfile.ZipFile(nb, "w") as archive:
        archive.writestr("attention.ipynb", notebook)
        archive.writestr("attention.py", "N = 2\n")
        archive.writestr(manifest.NAME, manifest.dumps(data))
    sub = submission.load(str(nb))
    sub.cleanup()
    assert sub.kind == "notebook" and "N = 1" in sub.source
    assert sub.package["extra"] == ["attention.py"] and sub.package["changed"] == []
    # A package re-zipped inside a folder is still a package.
    nested = tmp_path / "nested.zip"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(nested, "w") as archive:
        for name in src.namelist():
            archive.writestr("zhang/" + name, src.read(name))
    sub = submission.load(str(nested))
    sub.cleanup()
    assert sub.package["intact"] and sub.package["student"] == "张三"
    # A garbled manifest: graded as a plain zip, and said so.
    garbled = tmp_path / "garbled.zip"
    with zipfile.ZipFile(garbled, "w") as archive:
        archive.writestr("attention.py", "x = 1\n")
        archive.writestr(manifest.NAME, "{not json")
    sub = submission.load(str(garbled))
    sub.cleanup()
    assert sub.source == "x = 1\n" and not sub.package["manifest"]
    assert "graded as a plain zip" in package.package_notes(sub.package)[0]
    # The work named by the manifest missing: the usual pick, flagged.
    missing = _package(tmp_path, "missing.zip")
    data = read_manifest(missing)
    with zipfile.ZipFile(missing, "w") as archive:
        archive.writestr("sub/attention.py", "y = 2\n")
        archive.writestr(manifest.NAME, manifest.dumps(data))
    sub = submission.load(str(missing))
    sub.cleanup()
    assert sub.source == "y = 2\n" and sub.package["missing"] == ["attention.py"]
    assert "missing" in package.package_notes(sub.package)[0]


def test_batch_ids_are_the_entries_names_and_never_collide(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    _package(folder, "upload-1.zip", student="张三")
    _package(folder, "upload-2.zip", student="张三", work=b"x = 2\n")  # handed in twice
    _package(folder, "upload-3.zip", student="Li Lei")
    (folder / "alice.py").write_text("x = 1\n")
    (folder / "plain.zip").write_bytes(b"PK\x03\x04 not a zip")
    ids = {e.name: e.student for e in entries.list_entries(str(folder))}
    assert ids == {"upload-1.zip": "upload-1", "upload-2.zip": "upload-2",
                   "upload-3.zip": "upload-3", "alice.py": "alice", "plain.zip": "plain"}


def test_gradebook_note_and_markdown_carry_the_flags():
    package = {"manifest": True, "student": "s", "created": "t", "kit_version": "12.0",
               "rubric_hash": "abc", "changed": ["attention.py"], "missing": [], "extra": ["a"],
               "intact": False, "current_rubric": False,
               "graded_with": {"kit_version": RUBRIC.version, "rubric_hash": RUBRIC.hash}}
    report = {"score": 0, "max_score": MAX, "checks": [], "metadata": {}}
    record = {"student": "s", "entry": "s.zip", "status": "graded", "score": 0, "max_score": MAX,
              "error": None, "report": report, "package": package}
    rows = list(csv.DictReader(io.StringIO(gradebook.gradebook_csv(RUBRIC, [record]))))
    note = rows[0]["note"]
    assert "changed after packaging" in note and "left out: a" in note and "kit 12.0" in note
    md = student_markdown(RUBRIC, record, "en")
    assert "⚠ files differ from the manifest" in md and "graded with today's kit" in md


def test_make_submit_targets():
    for makefile, default in ((ROOT / "Makefile", "exercises/attention.py"),
                              (ROOT / "release" / "Makefile", "attention.py")):
        # --no-print-directory: under `make test` this make is nested and would print
        # "Leaving directory" after the command.
        proc = subprocess.run(["make", "-n", "--no-print-directory", "-f", str(makefile), "submit",
                               "STUDENT=张三", "CONFIRM=1", f"PY={PY}"], cwd=makefile.parent,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        line = next(line for line in proc.stdout.splitlines() if "-m grader submit" in line)
        assert f"-m grader submit {default}" in line
        assert "--student '张三'" in line and "--yes" in line
    readme = (ROOT / "release" / "README.md").read_text("utf-8")
    assert "make submit" in readme and "the push is your submission" in readme


def test_make_submit_without_an_id_says_it_once_in_one_language(tmp_path):
    """The student bundle's Makefile: the kit's own message, in Chinese only, and no make error
    line after it (exit 3 ends make cleanly); a crash would still be make's error."""
    sys.path.insert(0, str(ROOT / "tests"))
    import words as one_language

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    shutil.copy(ROOT / "grader" / "authoring" / "release_templates" / "Makefile", bundle)
    shutil.copy(SOLUTION, bundle / "attention.py")
    (bundle / ".venv").mkdir()
    (bundle / ".venv" / ".installed").touch()
    (bundle / "requirements.txt").touch()
    os.utime(bundle / ".venv" / ".installed")  # newer than requirements.txt: no set-up
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(["make", "--no-print-directory", "submit", f"PY={PY}"], cwd=bundle,
                          capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "make submit STUDENT=" in said and "Error" not in said and "make:" not in said, said
    assert not one_language.foreign_lines(said, "zh"), said
    assert not list(bundle.glob("*.zip"))
    crash = subprocess.run(["make", "--no-print-directory", "submit", f"PY={PY}",
                            "LANG_ARG=fr"], cwd=bundle, capture_output=True, text=True,
                           timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert crash.returncode != 0 and "Error 2" in crash.stderr  # argparse's refusal is make's
