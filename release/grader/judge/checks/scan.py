"""The judge-side read of a submission's source for routes to torch's ready-made attention and
into the grading process: the file is parsed, never run.  What it cannot see (a name computed
at run time from data) is said in the rubric's text of module.no_library_attention."""
import ast
import functools

# Names that lead to torch's ready-made attention (matched inside names, attributes and strings).
LIBRARY_PARTS = ("scaled_dot_product", "multi_head_attention", "MultiheadAttention",
                 "flex_attention", "TransformerEncoder", "TransformerDecoder")
LIBRARY_NAMES = {"Transformer", "importlib", "__import__", "eval", "exec", "_C", "aten", "library"}
# Names that reach into the grading process itself (the worker's code, frames, the object graph):
# what the worker reports about the block could then be forged, so no registry-based point.
TAMPER_NAMES = {"__main__", "gc", "inspect", "ctypes", "worker", "contract", "wire", "zygote",
                "builtins", "__builtins__", "_getframe", "f_back", "f_globals", "f_locals",
                "__globals__", "get_objects", "get_referrers", "meta_path", "settrace",
                "setprofile", "sys.modules"}


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
    library, tamper = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "modules" \
                and isinstance(node.value, ast.Name) and node.value.id == "sys":
            tamper.add("sys.modules")
        for text in _texts(node, constants):
            library |= {part for part in LIBRARY_PARTS if part in text}
            if text in LIBRARY_NAMES:
                library.add({"_C": "torch._C", "aten": "torch.ops.aten"}.get(text, text))
            if text in TAMPER_NAMES and not isinstance(node, ast.Constant):
                tamper.add(text)
    return tuple(sorted(library)), tuple(sorted(tamper))


def _texts(node, constants):
    """The names a node spells: identifiers, attributes, imports, and string expressions that
    fold to a constant (a docstring is not a route)."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.alias):
        yield from node.name.split(".")
        yield node.asname or ""
    elif isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript, ast.Constant)):
        if not getattr(node, "is_docstring", False):
            text = fold(node, constants)
            if text is not None:
                yield text


def _string_constants(tree):
    """name -> folded string, for names assigned a string expression (e.g. a = "scaled_" + ...);
    docstrings marked so they are not read as routes."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            body[0].value.is_docstring = True
    constants = {}
    for _ in range(3):  # names built from names built from literals
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                text = fold(node.value, constants)
                if text is not None:
                    constants[node.targets[0].id] = text
    return constants


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
