"""The judge-side read of a submission's source for routes to torch's ready-made attention and
into the grading process: the file is parsed, never run, so nothing the student's code does at
run time can change what it finds.

Names are read for what they mean: a function, class, argument or variable the student defines
is theirs, whatever it is called (a hand-written helper named `scaled_dot_product_attention` is
no library route); a reference counts when it resolves to torch (an import from torch, a name
bound to one, an attribute of one) or to nothing the file defines.  Strings are followed too: a
name built from literals (`getattr(sys, "mod" + "ules")`) is read as the name it spells, and a
getattr of a computed name on a module is itself a route.  What it still cannot see (a name
decoded from data at run time) is said in the rubric's text of module.no_library_attention."""
import ast
import functools

# Names that lead to torch's ready-made attention (matched inside names, attributes and strings).
LIBRARY_PARTS = ("scaled_dot_product", "multi_head_attention", "MultiheadAttention",
                 "flex_attention", "TransformerEncoder", "TransformerDecoder")
LIBRARY_NAMES = {"Transformer", "importlib", "__import__", "eval", "exec", "_C", "aten", "library"}
SHOWN = {"_C": "torch._C", "aten": "torch.ops.aten"}
# Names that reach into the grading process itself (the worker's code, frames, the object graph,
# any module by a run-time name, code built at run time): what the worker reports about the
# block could then be forged, so no registry-based point.
TAMPER_NAMES = {"__main__", "gc", "inspect", "ctypes", "worker", "contract", "wire", "zygote",
                "builtins", "__builtins__", "_getframe", "f_back", "f_globals", "f_locals",
                "__globals__", "get_objects", "get_referrers", "meta_path", "settrace",
                "setprofile", "sys.modules", "importlib", "__import__", "eval", "exec",
                "tb_frame", "gi_frame", "cr_frame", "ag_frame", "_current_frames",
                "__subclasses__", "__closure__", "__code__"}
ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "delattr", "hasattr"}
OWNED_ROOTS = {"self", "cls", "super", "type"}  # chains that start at the student's own object


def source_routes(source):
    """(library routes, tampering routes) the source shows, read without running it."""
    library, tamper = _routes(source)
    return list(library), list(tamper)


@functools.lru_cache(maxsize=4)
def _routes(source):
    """source_routes as tuples, kept for the last few sources: three checks of one submission
    read the same text (5 ms a parse and walk)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return (), ()
    constants = _string_constants(tree)
    names = Bindings(tree)
    library, tamper = set(), set()
    for node in ast.walk(tree):
        library |= set(_library_refs(node, constants, names))
        tamper |= set(_tamper_refs(node, constants, names))
    return tuple(sorted(library)), tuple(sorted(tamper))


class Bindings:
    """What each name of the file is bound to: an import (torch's or another module's), or the
    student's own definition (def, class, argument, assignment, loop or with target)."""

    def __init__(self, tree):
        self.imported, self.torch, self.own = set(), set(), set()
        for node in ast.walk(tree):
            self._bind(node)
        for _ in range(3):  # F = torch.nn.functional; G = F: names bound to torch's objects
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and self.is_torch(node.value):
                    self.torch |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.own -= self.torch

    def _bind(self, node):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                self.imported.add(bound)
                if alias.name.split(".")[0] == "torch":
                    self.torch.add(bound)
        elif isinstance(node, ast.ImportFrom):
            from_torch = (node.module or "").split(".")[0] == "torch" and not node.level
            for alias in node.names:
                bound = alias.asname or alias.name
                (self.torch if from_torch else self.own).add(bound)
                self.imported.add(bound)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.own.add(node.name)
        elif isinstance(node, ast.arg):
            self.own.add(node.arg)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            self.own.add(node.id if isinstance(node, ast.Name) else node.attr)

    def root(self, node):
        """The name an expression's chain of attributes, calls and subscripts starts at."""
        while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    def is_torch(self, node):
        return self.root(node) in self.torch

    def is_owned(self, node):
        """The chain starts at the student's own object or module (a folder's helper module, say):
        not at torch, not at a name the file never binds."""
        root = self.root(node)
        return root in OWNED_ROOTS or root in self.own or (root in self.imported
                                                           and root not in self.torch)


def _library_refs(node, constants, names):
    """Library routes at one node: torch's attention by name, attribute, import or string."""
    if isinstance(node, ast.Name) and node.id not in names.own:
        yield from _library_words(node.id)
    elif isinstance(node, ast.Attribute) and (names.is_torch(node) or not names.is_owned(node)):
        yield from _library_words(node.attr)
    elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
        for alias in node.names:
            yield from _library_words(alias.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):  # importlib, and the like
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        yield from (SHOWN.get(p, p) for m in modules for p in m.split(".") if p in LIBRARY_NAMES)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ATTRIBUTE_FUNCTIONS and len(node.args) > 1 \
            and names.is_torch(node.args[0]):
        text = fold(node.args[1], constants)  # getattr(F, name): torch's, whatever the file defines
        yield from _library_words(text) if text is not None else ()
    else:
        text = _folded(node, constants)
        if text is not None and text not in names.own:
            yield from _library_words(text)


def _library_words(text):
    yield from (part for part in LIBRARY_PARTS if part in text)
    if text in LIBRARY_NAMES:
        yield SHOWN.get(text, text)


def _tamper_refs(node, constants, names):
    """Routes into the grading process at one node (names, attributes, imports and the strings
    that spell them; getattr of a computed name on a module; a module's __dict__)."""
    if isinstance(node, ast.Attribute):
        root = names.root(node)
        if node.attr == "modules" and root in names.imported and root not in names.own:
            yield "sys.modules"
        if node.attr == "__dict__" and root in names.imported:
            yield f"{root}.__dict__"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        yield from _computed_attribute(node, constants, names)
    for text in _spelled(node, constants):
        if text in TAMPER_NAMES:
            yield text
        elif text == "modules" and isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr,
                                                     ast.Call, ast.Subscript)):
            yield "sys.modules"


def _computed_attribute(node, constants, names):
    """getattr(sys, name) / vars(sys) with a name the scan cannot fold: any attribute of a
    module, the worker's included, chosen at run time."""
    function, target = node.func.id, node.args[0]
    module = names.root(target) if isinstance(target, ast.Name) else None
    if module not in names.imported or module in names.own:
        return
    if function == "vars":
        yield f"vars({module})"
    elif function in ATTRIBUTE_FUNCTIONS and len(node.args) > 1 \
            and fold(node.args[1], constants) is None:
        yield f"{function}({module}, …)"


def _spelled(node, constants):
    """The names a node spells: identifiers, attributes, imports, and string expressions that
    fold to a constant (a docstring is not a route)."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.alias):
        yield from node.name.split(".")
        yield node.asname or ""
    else:
        text = _folded(node, constants)
        if text is not None:
            yield text


def _folded(node, constants):
    """The string a string expression folds to (never a docstring), else None."""
    if isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript, ast.Constant)) \
            and not getattr(node, "is_docstring", False):
        return fold(node, constants)
    return None


def _string_constants(tree):
    """name -> folded string, for names assigned a string expression (e.g. a = "scaled_" + ...);
    docstrings and the "__main__" of `if __name__ == "__main__"` marked: they are no routes."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            body[0].value.is_docstring = True
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) \
                and node.left.id == "__name__":
            for constant in node.comparators:
                constant.is_docstring = True
    constants = {}
    for _ in range(3):  # names built from names built from literals
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                text = fold(node.value, constants)
                if text is not None:
                    constants[node.targets[0].id] = text
            elif isinstance(node, ast.arguments):  # default arguments: def f(name="mod" "ules")
                _fold_defaults(node, constants)
    return constants


def _fold_defaults(arguments, constants):
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    for arg, default in pairs:
        text = fold(default, constants)
        if text is not None:
            constants[arg.arg] = text


def fold(node, constants):
    """The string an expression of literals evaluates to, or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold(node.left, constants), fold(node.right, constants)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v.value if isinstance(v, ast.FormattedValue) else v, constants)
                 for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        text = fold(node.value, constants)
        step = node.slice.step
        if text is not None and node.slice.lower is None and node.slice.upper is None:
            return text[::-1] if isinstance(step, ast.UnaryOp) else text
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        base, arg = fold(node.func.value, constants), node.args[0]
        if node.func.attr == "join" and base is not None and isinstance(arg, (ast.List, ast.Tuple)):
            parts = [fold(e, constants) for e in arg.elts]
            return base.join(parts) if all(p is not None for p in parts) else None
    return None
