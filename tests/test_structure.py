"""The house rules, kept by tests instead of docstrings: what may import what, and docs/building.md's tree
is the tree on disk."""
import ast
import os
import re
import sys

import pytest

from grader import paths
from grader.authoring import release

GRADER = paths.GRADER
# Lowest first.  A module may import grader modules of its own layer or a lower one, never higher.
LAYERS = ["runtime", "base", "sandbox", "render", "judge", "options", "tools", "batch", "authoring",
          "instructor", "cli"]
BASE = {"grader", "grader.paths", "grader.rubric", "grader.statefile", "grader.process",
        "grader.inert", "grader.safefs", "grader.words"}
SHIMS = {"grader.notebook", "grader.classroom"}  # old names students' files use: tools level
# Only these may import the secret part (the reference, the wrong variants).
MAY_IMPORT_SECRET = ("grader.judge.secret", "grader.judge.checks.hidden", "grader.batch",
                     "grader.instructor")


def module_name(path):
    rel = os.path.relpath(path, paths.KIT_ROOT)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def grader_modules():
    found = {}
    for root, dirs, names in os.walk(GRADER):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                found[module_name(path)] = path
    return found


MODULES = grader_modules()


def imports_of(path):
    """Every module a file imports, at any depth (function-level imports too), as absolute names."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    package = module_name(path)
    if not path.endswith("__init__.py"):
        package = package.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names
                         if f"{module}.{alias.name}" in MODULES)
    return found


def grader_imports(path):
    return {name for name in imports_of(path) if name in MODULES and name != "grader"}


def layer(module):
    if module in BASE:
        return "base"
    if module in SHIMS:
        return "tools"
    if module == "grader.__main__":
        return "cli"
    if module.startswith("grader.sandbox.runtime"):
        return "runtime"
    return module.split(".")[1]


def test_every_module_has_a_layer():
    assert {layer(m) for m in MODULES} <= set(LAYERS)


# The folder copied into every sandbox (launch.make_runtime_dir copies its .py files only).
RUNTIME = os.path.join(GRADER, "sandbox", "runtime")
RUNTIME_FILES = sorted(n for n in os.listdir(RUNTIME) if n.endswith(".py"))


def test_the_runtime_imports_only_itself_the_standard_library_and_torch():
    siblings = {n[:-3] for n in RUNTIME_FILES}
    for name in RUNTIME_FILES:
        for imported in imports_of(os.path.join(RUNTIME, name)):
            top = imported.split(".")[0]
            assert top in sys.stdlib_module_names or top == "torch" or top in siblings, \
                f"sandbox/runtime/{name} imports {imported}"


# What an attention block is made of.  The runtime is copied into every sandbox, where the
# student's code can read it: it may name these in words, never compute them (issue 69: a kit
# file there held a near-answer block, which a submission printed into its own feedback).
ATTENTION_CALLS = {"softmax", "log_softmax", "masked_fill", "masked_fill_", "tril", "triu",
                   "scaled_dot_product_attention", "MultiheadAttention", "einsum", "bmm",
                   "matmul", "baddbmm", "sqrt", "rsqrt"}


def test_the_runtime_computes_nothing_attention_shaped():
    found = []
    for name in RUNTIME_FILES:
        with open(os.path.join(RUNTIME, name), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            called = getattr(called, "attr", None) or getattr(called, "id", None)
            if called in ATTENTION_CALLS or isinstance(getattr(node, "op", None), ast.MatMult):
                found.append(f"sandbox/runtime/{name}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert not found, "\n".join(found)


def test_no_module_imports_a_higher_layer():
    wrong = []
    for module, path in MODULES.items():
        for imported in grader_imports(path):
            if LAYERS.index(layer(imported)) > LAYERS.index(layer(module)):
                wrong.append(f"{module} ({layer(module)}) imports {imported} ({layer(imported)})")
    assert not wrong, "\n".join(wrong)


def test_only_hidden_checks_the_batch_and_instructors_import_the_secret_part():
    wrong = [f"{module} imports {imported}"
             for module, path in MODULES.items() for imported in grader_imports(path)
             if imported.startswith("grader.judge.secret")
             and not module.startswith(MAY_IMPORT_SECRET)]
    assert not wrong, "\n".join(wrong)


# The command line offers `batch` and `merge` where the batch package is there (guarded by an
# ImportError in grader/__main__.py); the student bundle has no batch package and no such commands.
OPTIONAL_IN_RELEASE = {("grader.__main__", "batch")}


def test_nothing_released_imports_what_is_not_released():
    shipped = {module_name(os.path.join(GRADER, rel)) for rel in release.released_grader_files()
               if rel.endswith(".py")}
    assert "grader.judge.secret.reference" not in shipped
    assert not any(m.startswith("grader.judge.checks.hidden") for m in shipped)
    wrong = [f"{module} imports {imported}" for module in sorted(shipped)
             for imported in grader_imports(MODULES[module]) if imported not in shipped
             and (module, imported.split(".")[1]) not in OPTIONAL_IN_RELEASE]
    assert not wrong, "\n".join(wrong)


def strongly_connected(graph):
    """Tarjan: the cycles of the import graph (components of more than one module, or a loop)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle():
    graph = {m: grader_imports(p) - {m} for m, p in MODULES.items()}
    assert strongly_connected(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def readme_tree():
    """The paths named in the "How the kit is built" tree of docs/building.md."""
    with open(os.path.join(paths.KIT_ROOT, "docs", "building.md"), encoding="utf-8") as handle:
        text = handle.read()
    block = re.search(r"## How the kit is built.*?```text\n(.*?)```", text, re.S)
    assert block, "docs/building.md: a '## How the kit is built' section with a ```text tree"
    named, stack = set(), []
    for line in block.group(1).splitlines():
        match = re.match(r"^( *)(\S+)", line)
        if not match:
            continue
        depth = len(match.group(1)) // 2
        stack[depth:] = []
        entries = [e for e in re.split(r",\s*", line.split("  #")[0].strip()) if e]
        for entry in entries:
            named.add("/".join(stack + [entry.rstrip("/")]))
        if entries and entries[-1].endswith("/"):
            stack.append(entries[-1].rstrip("/"))
    return named


def test_the_readme_tree_is_the_tree_on_disk():
    named = readme_tree()
    # Every module but the check files, which the tree names by their folder (public/, hidden/).
    on_disk = {os.path.relpath(p, paths.KIT_ROOT).replace(os.sep, "/") for p in MODULES.values()
               if not p.endswith("__init__.py") and os.path.basename(os.path.dirname(p))
               not in ("public", "hidden")}
    on_disk |= {os.path.relpath(os.path.dirname(p), paths.KIT_ROOT).replace(os.sep, "/")
                for p in MODULES.values()}
    assert sorted(n for n in named if not os.path.exists(os.path.join(paths.KIT_ROOT, n))) == []
    assert sorted(on_disk - named) == []


@pytest.mark.parametrize("old, entry", [("grader.notebook", "load_ipython_extension"),
                                        ("grader.classroom", "main")])
def test_the_names_students_files_use_still_work(old, entry):
    module = __import__(old, fromlist=[entry])
    assert hasattr(module, entry)


def named_grader_paths():
    """Every `grader/...` path named in the kit's code, comments, docstrings, tests and docs."""
    pattern = re.compile(r"(?<![\w/.])grader/[\w./-]*\w/?")
    roots = [os.path.join(paths.KIT_ROOT, d) for d in ("grader", "docs", "tests")]
    files = [os.path.join(paths.KIT_ROOT, "README.md"), os.path.join(paths.KIT_ROOT, "Makefile")]
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "submissions")]
            files += [os.path.join(folder, n) for n in names
                      if n.endswith((".py", ".md", ".toml", ".txt", ".yml"))]
    for path in files:
        with open(path, encoding="utf-8") as handle:
            for match in pattern.finditer(handle.read()):
                yield os.path.relpath(path, paths.KIT_ROOT), match.group(0)


def test_every_grader_path_named_in_comments_and_docs_exists():
    missing = sorted({(where, named) for where, named in named_grader_paths()
                      if not os.path.exists(os.path.join(paths.KIT_ROOT, named))})
    assert not missing, missing


def test_no_function_in_the_grader_is_over_50_lines():
    long = []
    for name, path in MODULES.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        long += [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
                 for node in ast.walk(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.end_lineno - node.lineno + 1 > 50]
    assert not long, long
