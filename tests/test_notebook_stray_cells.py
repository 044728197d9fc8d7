"""A notebook's stray cell must not zero its definitions (issue 15): the grader keeps the
definitions (imports, functions, classes, assignments) and leaves every other top-level statement
out, and the report says what it left out."""
import copy
import json
from pathlib import Path

import pytest

from grader.judge import grading, submission
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
    assert left_out == ["line 8: print(f())", "line 9: while True:"]
    namespace = {}
    exec(compile(kept, "<kept>", "exec"), namespace)  # noqa: S102  (ends: the loop is gone)
    assert namespace["f"]() == 4 and namespace["Q1"] == (1, 2)


def test_code_that_does_not_parse_is_kept_as_it_is():
    assert submission.keep_definitions("def f(:\n") == ("def f(:\n", [])


@pytest.mark.parametrize("name", sorted(STRAY))
def test_a_stray_cell_does_not_cost_the_definitions(tmp_path, name):
    data = grading.grade(str(with_stray_cell(tmp_path, name)), isolation="process")
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
