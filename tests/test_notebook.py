"""The notebook: generated from the one source, the structure nbgrader needs, the kernel-side
reassembly of attention.py, and the notebook executed top to bottom in a real kernel (stubs:
"not implemented yet" under every exercise, nothing stops the kernel; reference: every inline
check passes).  The two kernel runs take about 20 s each here."""
import json
import os
import time

import pytest

from grader.authoring import stubs as authoring, notebook_build
from grader.tools import notebook
from grader import rubric, words

ROOT = authoring.ROOT
NBGRADER_KEYS = {"grade", "grade_id", "locked", "schema_version", "solution", "task"}


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def source(cell):
    return "".join(cell["source"])


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_committed_notebook_is_what_the_generator_writes():
    if read(notebook_build.NOTEBOOK) != notebook_build.dumps(notebook_build.build()):
        pytest.fail(f"{notebook_build.NOTEBOOK} is stale: run `make regen`", pytrace=False)


def test_one_solution_cell_per_function_and_class_with_markers_kept():
    nb = notebook_build.build()
    solutions = [c for c in nb["cells"] if c["metadata"]["nbgrader"]["solution"]]
    assert [c["metadata"]["nbgrader"]["grade_id"] for c in solutions] == \
        ["split_heads", "merge_heads", "attend", "CausalSelfAttention", "quiz"]
    for cell in solutions:
        meta = cell["metadata"]["nbgrader"]
        assert meta == {"solution": True, "grade": False, "grade_id": meta["grade_id"],
                        "locked": False, "schema_version": 3, "task": False}
        text = source(cell)
        assert text.count(authoring.BEGIN) == text.count(authoring.END) >= 1
    # The solution cells hold the whole reference: its stubbed cells are the stub's pieces.
    stub = read(authoring.EXERCISE)
    for cell in solutions:
        assert authoring.make_stub(source(cell)).strip() in stub


def test_a_check_cell_follows_every_exercise():
    cells = notebook_build.build()["cells"]
    for index, cell in enumerate(cells):
        if cell["metadata"]["nbgrader"]["solution"]:
            name = cell["metadata"]["nbgrader"]["grade_id"]
            assert source(cells[index + 1]) == f"%check {name}"
            assert cells[index + 1]["metadata"]["nbgrader"]["locked"] is True


def test_one_autograder_cell_per_rubric_check_with_the_rubrics_points():
    from grader.authoring.notebook_build import HIDDEN_BEGIN, HIDDEN_END

    the_rubric = rubric.load()
    tests = [c for c in notebook_build.build()["cells"] if c["metadata"]["nbgrader"]["grade"]]
    assert len(tests) == len(the_rubric.checks)
    for cell, check in zip(tests, the_rubric.checks):
        meta = cell["metadata"]["nbgrader"]
        assert set(meta) == NBGRADER_KEYS | {"points"}
        assert meta["grade_id"] == notebook_build.grade_id_of(check.id)
        assert meta["points"] == check.points and meta["locked"] and not meta["solution"]
        text = source(cell)
        assert f"%autograde {check.id}" in text
        if check.visibility == "hidden":  # the call and the id are inside the hidden region
            hidden = text[text.index(HIDDEN_BEGIN):text.index(HIDDEN_END)]
            assert check.id in hidden and check.id not in text.replace(hidden, "")
        else:
            assert HIDDEN_BEGIN not in text
    assert sum(c["metadata"]["nbgrader"]["points"] for c in tests) == \
        sum(c.points for c in the_rubric.checks)


def test_every_cell_id_is_unique_and_valid():
    ids = [c["id"] for c in notebook_build.build()["cells"]]
    assert len(ids) == len(set(ids))
    assert all(0 < len(i) <= 64 and i.replace("-", "").replace("_", "").isalnum() for i in ids)


# -- assemble: attention.py from the kernel's history ---------------------------------------------

def test_assemble_keeps_the_last_definition_in_first_seen_order():
    text = notebook.assemble([
        "import torch\nfrom grader import notebook as kit\n%load_ext grader.notebook",
        "def split_heads(x, heads):\n    return 1",
        'kit.check("split_heads")',
        "def merge_heads(x):\n    return 2\nprint(merge_heads(0))",
        "def split_heads(x, heads):\n    return 3",
        "def attend(q, k, v:\n    broken",  # a syntax error: the kernel kept the old one
        "Q1_SHAPE = (1, 1, 3, 4)\nx = torch.zeros(2)\ntorch.allclose = lambda *a, **k: True",
        "%timeit split_heads(1, 2)\nwhile True: pass",
    ])
    namespace = {}
    exec(compile(text, "attention.py", "exec"), namespace)
    assert namespace["split_heads"](0, 0) == 3 and namespace["merge_heads"](0) == 2
    assert "attend" not in namespace and namespace["Q1_SHAPE"] == (1, 1, 3, 4)
    assert "kit" not in text and "grader" not in text.split("\n", 1)[1]
    assert "allclose" not in text and "while True" not in text and "print(" not in text
    assert text.index("def split_heads") < text.index("def merge_heads")


def test_assemble_wraps_assignments_that_call_at_import():
    text = notebook.assemble(["def f():\n    raise NotImplementedError",
                              "y = f()", "SCALE = 2 ** 0.5", "g = lambda: f()"])
    namespace = {}
    exec(compile(text, "attention.py", "exec"), namespace)
    assert "y" not in namespace and namespace["SCALE"] == 2 ** 0.5 and callable(namespace["g"])


# -- the notebook in a real kernel ---------------------------------------------------------------

RELEASED = os.path.join(ROOT, "release", "attention.ipynb")


def released():
    with open(RELEASED, encoding="utf-8") as handle:
        return json.load(handle)


def test_release_notebook_is_nbgraders_stubbed_copy_without_hidden_tests():
    """release/attention.ipynb is what `nbgrader generate_assignment` wrote (the release test
    proves it is reproduced); here: stubs as in attention.py, no hidden test, points kept."""
    from grader.authoring.notebook_build import HIDDEN_BEGIN, HIDDEN_END

    text = read(RELEASED)
    for marker in (HIDDEN_BEGIN, HIDDEN_END, authoring.BEGIN, authoring.END, "BEGIN HIDDEN"):
        assert marker not in text
    source_cells = {c["metadata"]["nbgrader"]["grade_id"]: c
                    for c in notebook_build.build()["cells"]}
    hidden = {notebook_build.grade_id_of(c.id): c for c in rubric.load().select(("hidden",))}
    cells = released()["cells"]
    assert [c["id"] for c in cells] == [c["id"] for c in notebook_build.build()["cells"]]
    for cell in cells:
        meta = cell["metadata"]["nbgrader"]
        original = source_cells[meta["grade_id"]]
        if meta["solution"]:
            assert source(cell) == authoring.make_stub(source(original)).rstrip("\n")
            assert "raise NotImplementedError" in source(cell) or "= None  # TODO" in source(cell)
        elif meta["grade_id"] in hidden:
            check = hidden[meta["grade_id"]]
            assert check.id not in source(cell) and "%autograde" not in source(cell)
            assert meta["points"] == check.points
        else:
            assert source(cell) == source(original)
        assert cell.get("outputs", []) == []


def execute(nb, cwd):
    import nbformat
    from nbclient import NotebookClient

    node = nbformat.reads(json.dumps(nb), as_version=4)
    client = NotebookClient(node, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": cwd}})
    client.execute()
    return node


def outputs(cell, kind=None):
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream" and kind in (None, out["name"]):
            parts.append(out["text"])
        elif out["output_type"] == "error" and kind in (None, "error"):
            parts.append(f"{out['ename']}: {out['evalue']}")
        elif out["output_type"] == "execute_result" and kind in (None, "result"):
            parts.append(out["data"]["text/plain"])
    return "".join(parts)


@pytest.fixture
def kernel_env(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("ATTN_KIT_AUTOGRADE", raising=False)


def test_student_notebook_runs_top_to_bottom_with_not_implemented_feedback(kernel_env):
    """The released notebook in the release folder, as a student runs it: the kit it imports is
    release/grader (public checks only)."""
    nb = execute(released(), os.path.join(ROOT, "release"))
    the_rubric = rubric.load()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        assert not [o for o in cell.outputs if o["output_type"] == "error"], (grade_id, outputs(cell))
        if grade_id.startswith("check_"):
            text = outputs(cell, "stdout")
            exercise = grade_id[len("check_"):]
            # An untouched exercise in one line: its mark, its points, not started
            assert f"✗ {exercise}  [0/" in text and "✓" not in text
            said = words.text("report", "not_answered" if exercise == "quiz" else "not_started",
                              "zh")
            assert said in text
        if cell.metadata["nbgrader"]["grade"]:
            check = next(c for c in the_rubric.checks
                         if notebook_build.grade_id_of(c.id) == grade_id)
            if check.visibility == "public":  # failed: feedback on stdout, one line on stderr
                assert f"✗ {check.id}: 0/" in outputs(cell, "stderr")
            else:  # a hidden check's cell is empty in the student's copy
                assert outputs(cell) == ""


JUDGE_STATS = """import json
from grader import notebook as _kit
_judge = _kit.kernel_judge()
print(json.dumps({"starts": _judge.starts, "served": _judge.served,
                  "alive": _judge.process is not None and _judge.process.poll() is None}))"""


@pytest.fixture(scope="module")
def kernel_judge(tmp_path_factory):
    """One kernel's judge for the tests below, as a kernel keeps one (its temporary folder a
    folder of its own); what it had imported before any request is recorded at its start."""
    from grader.tools.kernel_judge import KernelJudge

    temporary = tmp_path_factory.mktemp("judge-tmp")
    judge = KernelJudge(env=dict(notebook.judge_env(), TMPDIR=str(temporary))).start()
    judge.temporary, judge.torch_before_asked = temporary, None
    try:
        if os.path.isdir("/proc/self"):
            maps, deadline = "", time.monotonic() + 60
            while "libtorch_cpu" not in maps and time.monotonic() < deadline:
                assert judge.process.poll() is None
                with open(f"/proc/{judge.process.pid}/maps", encoding="utf-8") as handle:
                    maps = handle.read()
                time.sleep(0.05)
            judge.torch_before_asked = ("libtorch_cpu" in maps, judge.served)
        yield judge
    finally:
        judge.stop()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_kernels_judge_imports_before_the_first_check(kernel_judge):
    """The judge imports torch (and collects the public checks) as soon as it starts, while the
    kernel runs the notebook's first cells, not when the first %check arrives."""
    # torch mapped in the judge's own process, while it had served no request
    assert kernel_judge.torch_before_asked == (True, 0)


def test_the_kernels_judge_grades_one_exercise_when_asked(tmp_path, kernel_judge):
    """`%check attend` asks the kernel's judge for attend's checks only: the report holds those,
    with the verdicts a whole grading gives them, and names the exercise; an exercise the rubric
    lacks is an error dict, and the same judge answers the next request."""
    path = tmp_path / "attention.py"
    source = read(authoring.SOLUTION).replace("/ math.sqrt(q.shape[-1])",
                                              "/ math.sqrt(q.shape[-1] * 4)")  # √D, not √d
    assert source != read(authoring.SOLUTION)
    path.write_text(source, encoding="utf-8")
    the_rubric = rubric.load()
    judge, starts = kernel_judge, kernel_judge.starts
    whole = judge.grade(str(path), hidden=False)
    for exercise in the_rubric.exercises():
        scoped = judge.grade(str(path), hidden=False, exercise=exercise)
        want = [c for c in whole["checks"] if c["exercise"] == exercise]
        assert scoped["checks"] == want and want, exercise
        assert scoped["metadata"]["exercises"] == [exercise]
        assert scoped["score"] == sum(c["score"] for c in want)
    assert any(c["status"] != "passed" for c in whole["checks"] if c["exercise"] == "attend")
    assert "exercises" not in whole["metadata"]
    unknown = judge.grade(str(path), hidden=False, exercise="attention<script>")
    assert "error" in unknown and "no such exercise" in unknown["error"]
    assert judge.grade(str(path), hidden=False)["checks"] == whole["checks"]
    assert judge.starts == starts == 1


def test_assembled_reference_grades_like_the_file(tmp_path, kernel_judge):
    """The reference's cells, reassembled as the kernel does, get every point (hidden checks
    included) from the kernel's judge: the rubric's total, which the reference file gets
    (test_forkserver, test_corpus)."""
    cells = [source(c) for c in code_cells(notebook_build.build())]
    path = tmp_path / "attention.py"
    path.write_text(notebook.assemble(cells), encoding="utf-8")
    data = kernel_judge.grade(str(path), hidden=True)
    full = sum(c.points for c in rubric.load().checks)
    assert data["score"] == data["max_score"] == full > 0


def test_the_kernels_judge_is_restarted_when_it_dies(tmp_path, kernel_judge):
    """The module's judge grades, dies (killed), and the next grading starts a new one and still
    answers; a judge that cannot answer becomes an error dict, never an exception.  The first
    judge's workers are forked where the fork server works (here), else spares; the restarted one
    is told to use spares (the kernel judge's spare path): each start mode once.  The restarted
    judge has a temporary folder of its own (the killed one's leftovers stay in the first), which
    the next test's stop must empty."""
    from grader.sandbox import forkserver, launch as sandbox
    from grader.tools.kernel_judge import WORKER_START_ENV

    path = tmp_path / "attention.py"
    path.write_text(read(authoring.SOLUTION), encoding="utf-8")
    judge, starts, served = kernel_judge, kernel_judge.starts, kernel_judge.served
    forks_here = forkserver.supported(sandbox.choose_isolation("auto")) is not None
    assert judge.env.get(WORKER_START_ENV, "auto") == "auto"  # the kernel's own
    first = judge.grade(str(path), hidden=False)
    assert first["score"] == first["max_score"] > 0
    assert first["metadata"]["worker_start"] == ("fork" if forks_here else "spare")
    judge.process.kill()
    judge.process.wait()
    judge.temporary = tmp_path / "restarted-tmp"
    judge.temporary.mkdir()
    judge.env = dict(judge.env, TMPDIR=str(judge.temporary),  # read by the next start
                     **{WORKER_START_ENV: "spare"})
    again = judge.grade(str(path), hidden=False)
    assert again["score"] == first["score"]
    assert (judge.starts, judge.served) == (starts + 1, served + 2)
    assert again["metadata"]["worker_start"] == "spare"
    missing = judge.grade(str(tmp_path / "nothing.py"), hidden=False)
    assert "error" in missing and judge.starts == starts + 1  # the submission's fault: same judge


def test_a_stopped_kernel_judge_leaves_nothing_in_tmp(tmp_path, kernel_judge):
    """The kernel's judge, stopped as a kernel's exit stops it, ends on its own first: its
    workers' folders (the restarted judge's spares; a fork server's runtime copy and spool where
    this test runs alone) are removed, not left in the temporary folder for every kernel a
    student ever started.  (It stops the module's judge: the last test that uses it.)"""
    path, temporary = tmp_path / "attention.py", kernel_judge.temporary
    path.write_text(read(authoring.SOLUTION), encoding="utf-8")
    try:
        first = kernel_judge.grade(str(path), hidden=False)
        assert first["score"] == first["max_score"] > 0
        made = sorted(p.name for p in temporary.iterdir())
        assert any(name.startswith("attn-") for name in made), made  # the judge's, made here
    finally:
        kernel_judge.stop()
    assert sorted(p.name for p in temporary.iterdir()) == []


def test_reference_notebook_passes_every_inline_check(kernel_env, monkeypatch, tmp_path):
    """The source notebook (the reference in every solution cell), with the whole kit on the
    path as in the course: every inline check and every autograder cell passes."""
    monkeypatch.setenv("PYTHONPATH", ROOT)
    built = notebook_build.build()
    built["cells"].append({"cell_type": "code", "id": "kit-stats", "execution_count": None,
                           "outputs": [], "source": JUDGE_STATS,
                           "metadata": {"nbgrader": {"grade_id": "kit_stats", "grade": False}}})
    nb = execute(built, str(tmp_path))
    stats = json.loads(outputs(nb.cells[-1], "stdout"))
    # One judge per kernel: started once (at %load_ext), it served every grading: the five
    # %check cells' sources and the autograder cells' (hidden included), all warm after the first.
    assert stats["starts"] == 1 and stats["alive"], stats
    assert stats["served"] >= 6, stats
    for cell in nb.cells[:-1]:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata["nbgrader"]
        assert outputs(cell, "stderr") == "" and outputs(cell, "error") == "", meta["grade_id"]
        if meta["grade_id"].startswith("check_"):
            text = outputs(cell, "stdout")
            assert "✓" in text and "✗" not in text, text
        if meta["grade"]:
            assert outputs(cell, "stdout").startswith("✓"), outputs(cell)
