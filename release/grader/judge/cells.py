"""One reader of a notebook's code, for the file grader and the kernel alike.

A notebook reaches the grader two ways: as a saved .ipynb (judge/submission.py) and as the cells
a live kernel executed (tools/notebook.py, for `%check`).  Both keep the same statements, by the
same rule, so that the two grades cannot drift apart:

- kept: imports (not the kit's own), functions, classes, and assignments to plain names; an
  assignment that calls something at import is guarded, as the kernel survived it if it raised;
- left out: every other top-level statement (calls, prints, loops, `x += 1`, assignments to
  attributes or items such as `torch.allclose = ...`), the kit's own imports, and a cell that
  does not parse (the kernel kept the previous definitions then).

Runs in the student's bundle too (no torch, no pytest).
"""
import ast

KEPT = ("import", "definition", "assignment")


def calls_at_import(node):
    """Does evaluating this expression call something?  (A lambda's body runs later.)"""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Call):
            return True
        stack.extend(child for child in ast.iter_child_nodes(current)
                     if not isinstance(child, ast.Lambda))
    return False


def target_names(node):
    """The plain names an assignment binds, or None when a target is an attribute or an item."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = []
    for target in targets:
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        for element in elements:
            if not isinstance(element, ast.Name):
                return None
            names.append(element.id)
    return tuple(names)


def classify(node):
    """"import", "kit", "definition", "assignment" or "statement" (left out)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [alias.name for alias in node.names]
        return "kit" if any(m.split(".")[0] == "grader" for m in modules) else "import"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return "definition"
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
            and target_names(node) is not None:
        return "assignment"
    return "statement"


def guarded(node):
    """Is this kept statement run under try/except (an assignment that calls at import)?"""
    return classify(node) == "assignment" and calls_at_import(node.value)


def first_line(node):
    """The statement's first line number, its decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def parse(source):
    """The cell's top-level statements, or None when it does not parse."""
    try:
        return ast.parse(source).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
