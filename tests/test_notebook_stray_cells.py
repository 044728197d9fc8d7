"""A notebook's stray cell must not zero its definitions (issue 15): the grader keeps the
definitions (imports, functions, classes, assignments) and leaves every other top-level statement
out, and the report says what it left out."""
import copy
import json
from pathlib import Path

import pytest

from grader.judge import submission

from grader.judge import grading
from grader.judge.workers import forked
from grader.sandbox import forkserver
from grader.tools import notebook
from grader.render import report
from grader import rubric

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "tests" / "submissions" / "correct" / "notebook.ipynb"
STRAY = {
    "endless_loop": "while True:\n    pass\n",
    "training_loop": "for step in range(10 ** 9):\n    _ = sum(range(1000))\n",
    "exit": "import sys\nsys.exit(3)\n",
    "raise": "raise RuntimeError('an experiment that failed')\n",
}


def with_stray_cell(tmp_path, name):
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    stray = copy.deepcopy(next(c for c in notebook["cells"] if c["cell_type"] == "code"))
    stray["source"] = STRAY[name]
    notebook["cells"].append(stray)  # after every definition: a leftover experiment
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


def test_definitions_stay_and_other_statements_are_left_out():
    source = ("import math\nX = 3\nQ1 = (1, 2)\ndef f():\n    return X\nclass C:\n    pass\n"
              "print(f())\nwhile True:\n    pass\nX += 1\n")
    kept, left_out = submission.keep_definitions(source)
    assert left_out == ["line 8: print(f())", "line 9: while True:", "line 11: X += 1"]
    namespace = {}
    exec(compile(kept, "<kept>", "exec"), namespace)  # noqa: S102  (ends: the loop is gone)
    assert namespace["f"]() == 3 and namespace["Q1"] == (1, 2)


def test_the_file_and_the_kernel_keep_the_same_statements():
    """One reader (judge/cells.py): a saved notebook and a kernel that ran the same cells give
    the same definitions, whatever the cells hold."""
    cells = ["import math\nimport grader.notebook\nX = 3\ndef f():\n    return X\n",
             "class C:\n    def __init__(self):\n        raise ValueError\nprint(f())\nX += 1\n",
             "def g(:\n",
             "m = C()\nimport torch\ntorch.allclose = lambda *a, **k: True\nn = (\n  f())\n",
             "Q1 = (1, 2)"]
    kept, left_out = submission.keep_definitions(cells)
    assert left_out == ["line 2: import grader.notebook", "line 10: print(f())",
                        "line 11: X += 1", "line 13: def g(:",
                        "line 17: torch.allclose = lambda *a, **k: True"]
    from_file, from_kernel = {}, {}
    exec(compile(kept, "<kept>", "exec"), from_file)  # noqa: S102
    exec(compile(notebook.assemble(cells), "<assembled>", "exec"), from_kernel)  # noqa: S102
    names = {k for k in from_file if not k.startswith("__")}
    assert names == {k for k in from_kernel if not k.startswith("__")} == \
        {"math", "torch", "X", "f", "C", "n", "Q1"}  # m = C() raised, in both
    assert from_file["n"] == from_kernel["n"] == 3
    assert from_file["torch"].allclose is not None and "lambda" not in kept.split("# (left out)")[0]


def test_a_cell_that_does_not_parse_is_left_out_as_the_kernel_skips_it():
    kept, left_out = submission.keep_definitions(["def f(:\n", "def g():\n    return 1\n"])
    assert left_out == ["line 1: def f(:"]
    namespace = {}
    exec(compile(kept, "<kept>", "exec"), namespace)  # noqa: S102
    assert namespace["g"]() == 1 and "f" not in namespace


@pytest.fixture(scope="module")
def server():
    """One fork server for the stray cells: each is graded on a forked worker, not a cold one
    (what is judged is the notebook's reading, not the worker's start)."""
    fs = forkserver.ForkServer("process")
    yield fs
    fs.close()


@pytest.mark.parametrize("name", sorted(STRAY))
def test_a_stray_cell_does_not_cost_the_definitions(tmp_path, name, server):
    sub, student = grading.start(str(with_stray_cell(tmp_path, name)), "process", None,
                                 forked(server))
    data = grading.finish(sub, student)
    assert data["metadata"]["worker_start"] == "fork"
    assert data["score"] == data["max_score"]
    assert data["metadata"]["left_out"] and data["metadata"]["left_out"][-1].startswith("line ")
    for lang in ("zh", "en"):
        text = report.to_text(rubric.load(), data, lang)
        assert report.TEXT[lang]["left_out"] in text
        assert data["metadata"]["left_out"][-1] in text


def test_a_python_file_is_run_as_it_is(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text((ROOT / "solutions" / "attention.py").read_text(encoding="utf-8")
                    + "\nprint('hello')\n", encoding="utf-8")
    with submission.load(str(path)) as sub:
        assert sub.left_out == () and sub.source.endswith("print('hello')\n")
