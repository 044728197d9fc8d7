"""A notebook's stray cell must not zero its definitions (issue 15): the grader keeps the
definitions (imports, functions, classes, assignments) and leaves every other top-level statement
out, and the report says what it left out."""
import copy
import json
from pathlib import Path

from grader.judge import submission
from grader.judge import grading
from grader.judge.workers import forked
from grader.tools import notebook
from grader.render import report
from grader import rubric
import zygotes

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "tests" / "submissions" / "correct" / "notebook.ipynb"
STRAY = {
    "endless_loop": "while True:\n    pass\n",
    "training_loop": "for step in range(10 ** 9):\n    _ = sum(range(1000))\n",
    "exit": "import sys\nsys.exit(3)\n",
    "raise": "raise RuntimeError('an experiment that failed')\n",
}


def with_stray_cells(tmp_path, names):
    """The correct notebook with a stray cell of each of `names` after every definition."""
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    for name in names:
        stray = copy.deepcopy(next(c for c in notebook["cells"] if c["cell_type"] == "code"))
        stray["source"] = STRAY[name]
        notebook["cells"].append(stray)  # after every definition: a leftover experiment
    path = tmp_path / "strays.ipynb"
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


def test_a_stray_cell_does_not_cost_the_definitions(tmp_path):
    """Every kind of stray cell at once (each would cost the whole grading were it run: an endless
    loop or a long training times out, an exit ends the worker, a raise fails the import): full
    marks, each left out and said.  On a worker forked from the module's fork server (what is
    judged is the notebook's reading, not the worker's start)."""
    names = sorted(STRAY)
    sub, student = grading.start(str(with_stray_cells(tmp_path, names)), "process", None,
                                 forked(zygotes.server("process")))
    data = grading.finish(sub, student)
    assert data["metadata"]["worker_start"] == "fork"
    assert data["score"] == data["max_score"]
    left_out = data["metadata"]["left_out"]
    assert left_out and all(line.startswith("line ") for line in left_out)
    statements = [next(line for line in STRAY[name].splitlines() if not line.startswith("import "))
                  for name in names]  # an import is a definition: kept
    strays = [line.split(": ", 1)[1] for line in left_out[-len(names):]]
    assert strays == statements, left_out  # the last cells' statements, one each, in order
    for lang in ("zh", "en"):
        text = report.to_text(rubric.load(), data, lang)
        assert report.TEXT[lang]["left_out"] in text
        assert all(line in text for line in left_out), lang


def test_a_python_file_is_run_as_it_is(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text((ROOT / "solutions" / "attention.py").read_text(encoding="utf-8")
                    + "\nprint('hello')\n", encoding="utf-8")
    with submission.load(str(path)) as sub:
        assert sub.left_out == () and sub.source.endswith("print('hello')\n")
