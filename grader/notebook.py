"""The exercise as a Jupyter notebook: generated from the one source, checked from inside a kernel.

  python -m grader.notebook                 write course/source/attention/attention.ipynb
  python -m grader.notebook judge PATH      grade PATH, print the report data as JSON (used by
                                            the kernel helpers and by grader.nbgrade)

Generation.  The notebook is built from `solutions/attention.py` (the reference with its solution
markers), the rubric and the short lesson text below; it is never edited by hand.  One solution
cell per function or class (markers kept, nbgrader metadata), after each exercise a cell
`%check attend` that runs that exercise's public checks inline (grader.notebook.check), and at
the end one autograder cell per rubric check, worth the rubric's points, `%autograde CHECK_ID`
(grader.notebook.autograde_cell).  The kit's cells are IPython magics (`%load_ext grader.notebook`
registers them), so the kit's own grader skips them like any magic: `make grade` on a notebook
sees only the student's code.
The cells of hidden checks keep their call between nbgrader's hidden-test markers, so
`nbgrader generate_assignment` strips it from the student's copy.

Inside a kernel.  The student's functions live in the kernel, but the kit never judges them
there: `check` and `autograde_cell` rebuild attention.py from the cells the kernel executed
(`assemble`: the last definition of each function, class and top-level name, plus the imports;
bare statements, output and the kit's own lines are dropped) and grade that file in a fresh
process (`python -m grader.notebook judge`), whose worker is sandboxed as in `make check`.  So
the feedback is the kit's feedback, word for word, and a kernel whose torch was monkeypatched
changes nothing.  The kernel itself can still be tricked (its helpers can be replaced); that is
why `make autograde` regrades every submitted notebook outside the kernel (grader/nbgrade.py).
"""
import ast
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

KIT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(KIT_ROOT, "course", "source", "attention", "attention.ipynb")
LANG = os.environ.get("ATTN_KIT_LANG", "zh")
# Set by the course's nbgrader_config.py: the kernel is being autograded by nbgrader.
AUTOGRADE_ENV = "ATTN_KIT_AUTOGRADE"
MAGIC_LINE = re.compile(r"^\s*[%!]")
# The kit's own lines in a notebook: its magics (which the CLI grader skips like any magic) and
# direct calls of its helpers.
KIT_LINE = re.compile(r"^\s*(%(check|autograde|load_ext\s+grader|reload_ext\s+grader)\b|"
                      r"from\s+grader[\s.]|import\s+grader\b|kit\s*\.|autograde_cell\s*\()")

# ------------------------------------------------------------------------------------------------
# The lesson text between the exercises (seed 000, 第 12 讲), in Chinese with a line of English.

INTRO = """# 第 12 讲 多头注意力 · 练习笔记本

手写小模型，看懂大模型 · Lesson 12: multi-head attention, the exercise as a notebook.

读“小丁拿着红色的苹果。”，若分别找“谁拿着”“什么颜色”，该读的位置就不一样。上一讲每个查询只算一行
读取比例；多头注意力让多组表示分别计算读取比例，再把结果组合起来。

**怎么做 · How to work.** 在每个练习的代码单元里实现函数（`# TODO` 是提示），运行它，再运行它下面的
检查单元 `%check ...`：它运行这个练习的公开检查，反馈与 `make check` 相同。从上到下运行即可；
检查单元在你的 kernel 之外评分，所以可以反复修改、反复运行。
Fill in each exercise cell, run it, then run the check cell below it: it runs that exercise's public
checks and prints the same feedback as `make check`.

形状记号 · shapes: B = 样本 batch，T = 位置 positions，D = 表示宽度 model width，H = 头数 heads，
d = D / H（每头宽度 head width）。"""

KIT_CELL = """# 练习工具包（grader/ 就在这个笔记本旁边）：%check 运行一个练习的公开检查
# the kit (grader/ sits beside this notebook): %check runs the public checks of one exercise
%load_ext grader.notebook"""

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

把答案写成下面的变量（形状用整数元组，数值用列表）。
Write your answers into the variables below (a shape as a tuple of ints, values as lists).""",
}

AUTOGRADE_MD = """## 自动评分 · Autograding

以下每个单元对应评分表（`grader/rubric.toml`）中的一项检查，分值也来自评分表。公开检查现在就能运行，
结果与上面的检查单元相同；隐藏检查的单元是空的，老师评分时才会运行。评分在你的 kernel 之外、
在沙箱里进行。
Each cell below is one check of the rubric, worth its points.  Public ones run now; hidden ones are
empty here and run when your teacher grades, outside your kernel, in the sandbox."""

# ------------------------------------------------------------------------------------------------
# Generation


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


def handed_in(release, pieces, extra=None, after=None):
    """The released notebook as a student hands it in: the cells named in `pieces` ({grade id:
    source}, e.g. from split_source of a .py) filled in, and maybe one `extra` cell after `after`."""
    nb = copy.deepcopy(release)
    cells = []
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in pieces:
            cell["source"] = _lines(pieces[grade_id])
        cells.append(cell)
        if extra and grade_id == after:
            cells.append({"cell_type": "code", "execution_count": None, "id": "student-cell",
                          "metadata": {}, "outputs": [], "source": _lines(extra)})
    nb["cells"] = cells
    return nb


def _block_end(lines, end):
    """A def's last line, counting the indented comments after its last statement (an end marker)."""
    while end < len(lines) and (not lines[end].strip() or lines[end][:1].isspace()):
        end += 1
    return end


def build(solution_path=None, rubric=None):
    """The source notebook (solutions inside their markers) as a dict."""
    from . import rubric as rubric_module
    from .nbgrade import HIDDEN_BEGIN, HIDDEN_END

    if solution_path is None:
        from .authoring import SOLUTION as solution_path
    rubric = rubric or rubric_module.load()
    with open(solution_path, encoding="utf-8") as handle:
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
        title = check.title["zh"]
        call = f"%autograde {check.id}"
        if check.visibility == "public":
            text = f"# {check.id}：{title}（{points} 分 points）\n{call}"
        else:
            text = (f"# 隐藏检查，老师评分时运行（{points} 分）· a hidden check, run when your "
                    f"teacher grades ({points} points)\n{HIDDEN_BEGIN}\n# {check.id}：{title}\n"
                    f"{call}\n{HIDDEN_END}")
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


def dumps(notebook):
    return json.dumps(notebook, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def write(path=NOTEBOOK):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(dumps(build()))
    return path


# ------------------------------------------------------------------------------------------------
# Inside a kernel: rebuild attention.py from what the kernel ran


def _strip_magics(source):
    return "\n".join("# " + line if MAGIC_LINE.match(line) else line
                     for line in source.splitlines())


def _is_kit_import(node):
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "grader"
    return any(alias.name.split(".")[0] == "grader" for alias in node.names)


def _calls_at_import(node):
    """Does evaluating this expression call something?  (A lambda's body runs later.)"""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Call):
            return True
        stack.extend(child for child in ast.iter_child_nodes(current)
                     if not isinstance(child, ast.Lambda))
    return False


def _target_names(node):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = []
    for target in targets:
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        for element in elements:
            if not isinstance(element, ast.Name):
                return None  # attribute or subscript targets (torch.allclose = ...) are dropped
            names.append(element.id)
    return tuple(names)


def assemble(sources):
    """attention.py from executed cell sources, oldest first.

    Kept: imports (not the kit's), and for every function, class and plain top-level name the
    last definition the kernel ran, in the order the names first appeared.  An assignment that
    calls something at import is wrapped in try/except, as the kernel had survived it.  Dropped:
    bare statements (calls, prints, loops, the kit's magics), attribute assignments, cells that do
    not parse (the kernel kept the previous definition then, and so does this).
    """
    imports, order, latest = [], [], {}
    for source in sources:
        source = _strip_magics(source or "")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        lines = source.splitlines()
        for node in tree.body:
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            text = "\n".join(lines[start - 1:node.end_lineno])
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if not _is_kit_import(node) and text not in imports:
                    imports.append(text)
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                key = (node.name,)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                key = _target_names(node)
                if key is None:
                    continue
                if _calls_at_import(node.value):
                    body = "\n".join("    " + line for line in text.splitlines())
                    text = f"try:\n{body}\nexcept Exception:\n    pass"
            else:
                continue
            if key not in latest:
                order.append(key)
            latest[key] = text
    parts = ["# 由笔记本中已运行的单元拼成 · assembled from the notebook's executed cells"]
    parts += imports + [latest[key] for key in order]
    return "\n\n".join(parts) + "\n"


def kernel_sources():
    """The cells this kernel executed, oldest first, as typed."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("grader.notebook.check runs inside a Jupyter/IPython kernel")
    return list(shell.history_manager.input_hist_raw[1:])


_cache = {}


def judge(source, hidden, call_seconds=None, budget_seconds=None, timeout=None):
    """Grade `source` (attention.py text) in a fresh process; the report data, or an error dict."""
    key = (hashlib.sha256(source.encode()).hexdigest(), hidden, call_seconds, budget_seconds)
    if key in _cache:
        return _cache[key]
    import shutil

    folder = tempfile.mkdtemp(prefix="attn-nb-")
    try:
        path = os.path.join(folder, "attention.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source)
        data = run_judge(path, hidden, call_seconds, budget_seconds, timeout, cwd=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _cache[key] = data
    return data


def judge_command(path, hidden, call_seconds=None, budget_seconds=None):
    command = [sys.executable, "-m", "grader.notebook", "judge", path]
    if hidden:
        command.append("--hidden")
    if call_seconds:
        command += ["--call-timeout", str(call_seconds)]
    if budget_seconds:
        command += ["--budget", str(budget_seconds)]
    return command


def judge_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = KIT_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop(AUTOGRADE_ENV, None)
    return env


def run_judge(path, hidden, call_seconds=None, budget_seconds=None, timeout=None, cwd=None,
              nice=0):
    """Run the judge process on `path`; never raises for what the submission does.  `nice` lowers
    its priority (and its worker's), e.g. to let a kernel's own judge go first."""
    process = subprocess.Popen(judge_command(path, hidden, call_seconds, budget_seconds),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, cwd=cwd or KIT_ROOT, env=judge_env(),
                               start_new_session=True,
                               preexec_fn=(lambda: os.nice(nice)) if nice else None)
    try:
        out, err = process.communicate(timeout=timeout)
    except BaseException:  # a timeout, or the kernel interrupted while we waited
        _kill_group(process)
        raise
    try:
        return json.loads(out.decode("utf-8"))
    except ValueError:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return {"error": f"the judge process failed (exit {process.returncode}): {tail[0][:300]}"}


def _kill_group(process):
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    process.wait()


def _exercise_report(data, exercise):
    checks = [c for c in data["checks"] if c["exercise"] == exercise]
    return dict(data, checks=checks, score=round(sum(c["score"] for c in checks), 4),
                max_score=sum(c["max_score"] for c in checks))


def check(exercise, lang=None):
    """Run the public checks of one exercise on the kernel's current code; print the feedback."""
    from . import report, rubric as rubric_module

    lang = lang or LANG
    rubric = rubric_module.load()
    if exercise not in rubric.exercises():
        print(f"没有这个练习 · no such exercise: {exercise!r} ({', '.join(rubric.exercises())})")
        return
    if os.environ.get(AUTOGRADE_ENV):
        print("（自动评分中：公开检查的结果见文末的评分单元 · autograding: see the graded cells at the end）")
        return
    data = judge(assemble(kernel_sources()), hidden=False)
    if "error" in data:
        print(f"检查没能运行 · the checks could not run: {data['error']}")
        return
    hidden = len([c for c in rubric.select(("hidden",)) if c.exercise == exercise])
    print(report.to_text(rubric, _exercise_report(data, exercise), lang, hidden), end="")


class _Quiet:
    """Nothing of the kit's may reach the cell's stderr: nbgrader scores stderr output as failure."""

    def __enter__(self):
        import warnings

        self.catcher = warnings.catch_warnings()
        self.catcher.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self.catcher.__exit__(*exc)


def autograde_cell(check_id, lang=None):
    """One autograder cell: the kit's verdict for `check_id` on the kernel's current code.

    Passed: one line on stdout, full credit.  Partly passed: the feedback on stdout and the score
    as the cell's value (nbgrader's partial credit).  Failed: the feedback on stdout and one line
    on stderr, which nbgrader scores as 0.  Never a traceback, never the check's source.
    """
    from . import report, rubric as rubric_module

    lang = lang or LANG
    rubric = rubric_module.load()
    check_ = rubric.by_id.get(check_id)
    if check_ is None:
        sys.stderr.write(f"✗ unknown check {check_id!r}\n")
        return None
    hidden_here = os.path.isdir(os.path.join(KIT_ROOT, "grader", "checks", "hidden"))
    if check_.visibility == "hidden" and not hidden_here:
        print(f"{check_id}: 隐藏检查只在老师评分时运行 · a hidden check, run when your teacher grades")
        return None
    autograding = bool(os.environ.get(AUTOGRADE_ENV))
    with _Quiet():
        try:
            data = judge(assemble(kernel_sources()), hidden=hidden_here,
                         call_seconds=5.0 if autograding else None,
                         budget_seconds=6.0 if autograding else None)
        except KeyboardInterrupt:
            _cache_failure()
            sys.stderr.write(f"✗ {check_id}: 0/{report._num(check_.points)} "
                             "（评分被中断 · grading was interrupted: timeout）\n")
            return None
    if "error" in data:
        sys.stderr.write(f"✗ {check_id}: 0/{report._num(check_.points)} ({data['error']})\n")
        return None
    result = next((c for c in data["checks"] if c["id"] == check_id), None)
    if result is None:
        sys.stderr.write(f"✗ {check_id}: 0/{report._num(check_.points)} (the check did not run)\n")
        return None
    print(render_check(rubric, result, lang))
    if result["status"] == "passed":
        return None
    if result["score"] > 0:
        return result["score"]
    sys.stderr.write(f"✗ {check_id}: 0/{report._num(check_.points)}\n")
    return None


def _cache_failure():
    """After an interrupted grading, the next cells should not wait again for the same code."""
    try:
        source = assemble(kernel_sources())
    except Exception:
        return
    digest = hashlib.sha256(source.encode()).hexdigest()
    for hidden in (True, False):
        _cache[(digest, hidden, 5.0, 6.0)] = {"error": "grading this code was interrupted (timeout)"}


def render_check(rubric, result, lang):
    """One check as `make check` shows it: mark, id, title, points, status, then the feedback."""
    from . import report

    check_ = rubric.by_id[result["id"]]
    status = report.STATUS_ZH[result["status"]] if lang == "zh" else result["status"]
    lines = [f"{report.STATUS_MARK[result['status']]} {result['id']}  {check_.title[lang]}  "
             f"[{report._num(result['score'])}/{report._num(result['max_score'])}] {status}"]
    text = report.feedback(rubric, result, lang)
    lines += ["    " + line for line in text.splitlines()] if text else []
    return "\n".join(lines)


def load_ipython_extension(ipython):
    """`%load_ext grader.notebook`: the magics `%check EXERCISE` and `%autograde CHECK_ID`."""
    ipython.register_magic_function(lambda line: check(line.strip()), "line", "check")
    ipython.register_magic_function(lambda line: autograde_cell(line.strip()), "line", "autograde")


# ------------------------------------------------------------------------------------------------
# The judge process


def _judge_main(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m grader.notebook judge")
    parser.add_argument("path")
    parser.add_argument("--hidden", action="store_true", help="public and hidden checks")
    parser.add_argument("--call-timeout", type=float)
    parser.add_argument("--budget", type=float)
    parser.add_argument("--isolation", choices=("auto", "bubblewrap", "process"), default="auto")
    args = parser.parse_args(argv)
    from . import grading, sandbox
    from .submission import SubmissionError

    limits = sandbox.Limits()
    if args.call_timeout:
        limits.call_seconds = args.call_timeout
    if args.budget:
        limits.submission_seconds = args.budget
    visibilities = ("public", "hidden") if args.hidden else ("public",)
    try:
        data = grading.grade(args.path, visibilities, isolation=args.isolation, limits=limits)
    except SubmissionError as exc:
        data = {"error": str(exc)}
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str))
    return 0


def main(argv):
    if argv and argv[0] == "judge":
        return _judge_main(argv[1:])
    if argv and argv[0] not in ("write",):
        print(__doc__)
        return 2
    print(write())
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # like `python -m grader`: skip torch's interpreter teardown
