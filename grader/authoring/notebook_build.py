"""The exercise as a Jupyter notebook (course/source/attention/attention.ipynb), generated from
solutions/attention.py, the rubric and the lesson text below; never edited by hand.

One solution cell per function or class (markers kept, nbgrader metadata), after each exercise a
`%check EXERCISE` cell, and at the end one autograder cell per rubric check, worth its points,
`%autograde CHECK_ID` (the kernel side is grader/tools/notebook.py).  The kit's cells are IPython
magics, so the kit's own grader skips them like any magic.  A hidden check's call sits between
nbgrader's hidden-test markers, so `nbgrader generate_assignment` strips it from the student's copy.
"""
import ast
import json
import os

from grader import rubric as rubric_module
from grader.paths import KIT_ROOT, SOLUTION

NOTEBOOK = os.path.join(KIT_ROOT, "course", "source", "attention", "attention.ipynb")
# nbgrader's hidden-test markers: generate_assignment strips what lies between them (and
# grader/instructor/nbfeedback.py makes sure no feedback file shows them).
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"

# The lesson text between the exercises (lesson 12's own words), in Chinese with a line of English.

INTRO = """# 第 12 讲 多头注意力 · 练习笔记本

手写小模型，看懂大模型 · Lesson 12: multi-head attention, the exercise as a notebook.

读“小丁拿着红色的苹果。”，若分别找“谁拿着”“什么颜色”，该读的位置就不一样。上一讲每个查询只算一行
读取比例；多头注意力让多组表示分别计算读取比例，再把结果组合起来。

**怎么做 · How to work.** 在每个练习的代码单元里实现函数（`# TODO` 是提示），运行它，再运行它下面的
检查单元 `%check ...`：它运行这个练习的公开检查，反馈与 `make check` 相同。从上到下运行即可；
检查单元在你的 kernel 之外评分，所以可以反复修改、反复运行。
Fill in each exercise cell, run it, then run the check cell below it: it runs that exercise's public
checks and prints the same feedback as `make check`.

**反馈的语言 · Feedback language.** 检查的反馈默认是中文。要英文反馈，把下一个单元里的 `%lang zh`
改成 `%lang en` 再运行它；只想让某一次检查用英文，写 `%check attend --lang en`。
Feedback is in Chinese by default. For English, change `%lang zh` in the next cell to `%lang en`
and run it; for one check only, write `%check attend --lang en`.

形状记号：B = 样本数，T = 位置数，D = 表示宽度，H = 头数，d = D / H（每头宽度）。
Shapes: B = batch, T = positions, D = model width, H = heads, d = D / H (the width of one head)."""

KIT_CELL = """# 练习工具包（grader/ 就在这个笔记本旁边）：%check 练习名 运行这个练习的公开检查，只写 %check 检查全部练习
# The kit (grader/ sits beside this notebook): %check EXERCISE runs its public checks; %check alone runs them all
# 反馈语言：%lang zh 是中文；改成 %lang en 再运行本单元，反馈就是英文
# Feedback language: %lang zh is Chinese; change it to %lang en and run this cell for English
%load_ext grader.notebook
%lang zh"""

IMPORTS_MD = """运行下面的单元导入 torch（第一次大约需要几秒）。
Run the imports (torch takes a few seconds the first time)."""

LESSON = {
    "split_heads": """## 练习 1 · `split_heads`：两套比例，数组该怎样摆？

把形状缩到能完整画出来：1 个样本、3 个位置、每位置 4 个特征，用 0 到 11 当坐标标签：

```
X[0] = [[0,  1,  2,  3],
        [4,  5,  6,  7],
        [8,  9, 10, 11]]      # [B, T, D] = [1, 3, 4]
```

分成 2 个头，每头宽度 d = D/H = 2。每个位置的前两项给头 0，后两项给头 1：头 0 是
`[[0, 1], [4, 5], [8, 9]]`，头 1 是 `[[2, 3], [6, 7], [10, 11]]`。注意每个头仍然拥有**全部三个位置**：
拆的是特征轴，不是位置轴。

代码分两步：先把最后一轴分成“头、头内坐标”得到 `[B, T, H, d]`，再 `transpose(1, 2)` 把头轴移到
位置轴前面，得到 `[B, H, T, d]`。只看形状不够：还要核对头 0 的位置 1 真的拿到 `[4, 5]`。
Split the feature axis into heads (reshape to [B,T,H,d]), then swap T and H.""",
    "merge_heads": """## 练习 2 · `merge_heads`：两个头分别读完，结果怎样交给后面？

假设某位置两个头的结果分别是 `[a, b]`、`[c, d]`，拼接得到 `[a, b, c, d]`。它不是相加成
`[a+c, b+d]`，也不是把位置 0 与位置 1 拼在一起。`merge_heads` 逆转分头时的重排：先交换回
`[B, T, H, d]`，再拼成 `[B, T, H·d]`。交换轴之后内存不再连续，用 `reshape`（或先 `.contiguous()`）。
Concatenate the heads of each position; transpose back first, then reshape.""",
    "attend": """## 练习 3 · `attend`：每个头各算一张分数表

每个头都有自己的 Q_h、K_h、V_h，各算一张 `[T, T]` 的分数表，加同样的因果约束，再归一化、汇总：

头 h 的输出 = Softmax(Q_h @ K_hᵀ / √d + 因果屏蔽) @ V_h

- 缩放用**每头宽度** d（`q.shape[-1]`），不是总宽度 D：本例每头点积只有 2 项，除以 √2；正式模型
  D=64、H=2、d=32，除以 √32。
- 因果屏蔽：位置 t 只能读 0..t（含对角线的下三角）。未来的分数先置为 `-inf` 再 softmax，
  才会分到零比例，每行的和仍为 1。
- Softmax 沿最后一轴（被读取的位置）计算；矩阵乘法只用最后两个轴，样本轴与头轴各自独立，
  一次批量计算应与逐头循环得到相同的结果。
Scale by √d of one head, mask the future with -inf before the softmax over the last axis.""",
    "CausalSelfAttention": """## 练习 4 · `CausalSelfAttention`：投影、分头、注意力、合头、输出投影

拆出两块还不会自动产生两套读法：先用可训练的投影得到 Q、K、V（`[B, T, D]`），再分别拆成
`[B, H, T, d]`。本讲用一个无偏置的 `qkv = Linear(D, 3D)`（输出依次是 `[q | k | v]`）和一个无偏置的
`out_proj = Linear(D, D)`：拼接本身没有参数，输出投影让每个坐标能组合不同头的结果。

头越多，参数一定越多吗？总宽度 D 固定、各头均分时，四张 `[D, D]` 矩阵合计 4·D² 个参数，与头数无关。
因果掩码是一个 `[max_len, max_len]` 的 bool 下三角 **buffer**（不是参数），前向时截取 `[:T, :T]`；
T 超过 max_len 时报错。
Project, split, attend, merge, project out; 4·D² parameters; the mask is a buffer.""",
    "quiz": """## 两道检查题 · the two check questions

1. 保持 X 的 0 到 11 不变，只分成 1 个头。形状是什么？头 0 的位置 1 包含哪些数？回到正式配置
   64 维、2 个头，每头宽度和四个投影（无偏置）的参数总数各是多少？
2. 换成两个位置：`X[0] = [[0,1,2,3],[4,5,6,7]]`，仍分成 2 个头。省掉 `transpose(1, 2)` 后，形状仍是
   `[1,2,2,2]`，能否据此认为拆头正确？分别写出正确与错误结果中“头 0、位置 1”的两个数。

把答案写成下面的变量，每个变量上面的注释写着它的格式。
Write your answers into the variables below; the comments above each say its form.""",
}

AUTOGRADE_MD = """## 自动评分 · Autograding

以下每个单元对应评分表（`grader/rubric.toml`）中的一项检查，分值也来自评分表。公开检查现在就能运行，
结果与上面的检查单元相同；隐藏检查的单元是空的，老师评分时才会运行。评分在你的 kernel 之外、
在沙箱里进行。
Each cell below is one check of the rubric, worth its points.  Public ones run now; hidden ones are
empty here and run when your teacher grades, outside your kernel, in the sandbox."""

def _lines(text):
    """A notebook cell's source as Jupyter writes it: lines keeping their newline."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _meta(grade_id, solution=False, grade=False, locked=True, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _cell(kind, text, meta, cell_id):
    cell = {"cell_type": kind, "id": cell_id, "metadata": meta, "source": _lines(text)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def grade_id_of(check_id):
    return "test_" + check_id.replace(".", "_")


def split_source(source):
    """The reference cut into notebook pieces: header, imports, one piece per def/class, quiz."""
    tree = ast.parse(source)
    lines = source.splitlines()
    body = list(tree.body)
    header = ast.get_docstring(tree) or ""
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]
    defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    import_text = "\n".join(lines[imports[0].lineno - 1:imports[-1].end_lineno]).strip()
    ends = [_block_end(lines, n.end_lineno) for n in defs]
    pieces = [(n.name, "\n".join(lines[n.lineno - 1:end]).rstrip()) for n, end in zip(defs, ends)]
    quiz = "\n".join(lines[ends[-1]:]).strip()
    return header, import_text, pieces + [("quiz", quiz)]


def _block_end(lines, end):
    """A def's last line, counting the indented comments after its last statement (an end marker)."""
    while end < len(lines) and (not lines[end].strip() or lines[end][:1].isspace()):
        end += 1
    return end


def build():
    """The source notebook (solutions inside their markers) as a dict."""
    rubric = rubric_module.load()
    with open(SOLUTION, encoding="utf-8") as handle:
        header, imports, pieces = split_source(handle.read())
    names = [name for name, _ in pieces]
    if names != rubric.exercises():
        raise ValueError(f"the exercises of the source {names} differ from the rubric's "
                         f"{rubric.exercises()}")
    cells = [
        _cell("markdown", INTRO, _meta("intro"), "intro"),
        _cell("code", KIT_CELL, _meta("kit"), "kit"),
        _cell("markdown", IMPORTS_MD, _meta("imports_md"), "imports-md"),
        _cell("code", imports, _meta("imports"), "imports"),
    ]
    for name, text in pieces:
        cells.append(_cell("markdown", LESSON[name], _meta(f"lesson_{name}"), f"lesson-{name}"))
        cells.append(_cell("code", text, _meta(name, solution=True, locked=False), name))
        cells.append(_cell("code", f"%check {name}", _meta(f"check_{name}"), f"check-{name}"))
    cells.append(_cell("markdown", AUTOGRADE_MD, _meta("autograde_md"), "autograde-md"))
    ids = set()
    for check in rubric.checks:
        grade_id = grade_id_of(check.id)
        if grade_id in ids:
            raise ValueError(f"two checks map to the grade id {grade_id}")
        ids.add(grade_id)
        points = int(check.points) if check.points == int(check.points) else check.points
        text = autograde_cell_text(check, points)
        cells.append(_cell("code", text, _meta(grade_id, grade=True, points=points),
                           grade_id.replace("_", "-")))
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                           "name": "python3"},
            "language_info": {"name": "python"},
            "title": header.splitlines()[0] if header else "attention",
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def autograde_cell_text(check, points):
    """An autograder cell: what it checks and its points, one line in each language."""
    plural = "point" if points == 1 else "points"
    call = f"%autograde {check.id}"
    if check.visibility == "public":
        return (f"# {check.id}：{check.title['zh']}（{points} 分）\n"
                f"# {check.id}: {check.title['en']} ({points} {plural})\n{call}")
    return (f"# 隐藏检查，老师评分时运行（{points} 分）\n"
            f"# A hidden check, run when your teacher grades ({points} {plural})\n"
            f"{HIDDEN_BEGIN}\n# {check.id}：{check.title['zh']}\n{call}\n{HIDDEN_END}")


def dumps(notebook):
    return json.dumps(notebook, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def write(path=NOTEBOOK):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(dumps(build()))
    return path


# -- reading cells back (a submitted or autograded notebook may hold anything) -------------------
def cell_text(cell):
    """A cell's source as one string, whether stored as a list of lines or as a string."""
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def cell_grade_id(cell):
    """The cell's nbgrader grade id (as nbgrader finds cells), or None."""
    meta = cell.get("metadata") or {}
    nbgrader_meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbgrader_meta.get("grade_id") if isinstance(nbgrader_meta, dict) else None
