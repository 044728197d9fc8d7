"""The judge-side read of a submission's source for routes to torch's ready-made attention and
into the grading process: the file is parsed, never run, so nothing its code does at run time
can change what it finds.

Names are read for what they mean: what the student defines is theirs, whatever it is called (a
helper named `scaled_dot_product_attention`, an argument named `inspect`, `model.eval()` are no
routes); a reference counts when it resolves to torch, to the module it names (`import inspect`,
`os.sys.modules`) or to nothing the file defines (a builtin: `eval`).  A name built from literals
(`getattr(sys, "mod" + "ules")`) is read as the name it spells; prose is no route.  An attribute
read by a name the scan cannot fold, and code built at run time (`compile`, marshal, pickle), are
routes themselves.  What it still cannot see is said in module.no_library_attention's text."""
import ast

# Names that lead to torch's ready-made attention (matched inside names, attributes and strings).
LIBRARY_PARTS = ("scaled_dot_product", "multi_head_attention", "MultiheadAttention",
                 "flex_attention", "TransformerEncoder", "TransformerDecoder")
LIBRARY_NAMES = {"Transformer", "importlib", "__import__", "eval", "exec", "_C", "aten", "library"}
SHOWN = {"_C": "torch._C", "aten": "torch.ops.aten"}
# Builtins that run code or import by a run-time name: they count as the builtin (a bare name
# the file does not bind, an attribute of the builtins module), never as another object's
# method of that name (`model.eval()`, `torch.compile`).
BUILTIN_CALLS = {"eval", "exec", "compile", "__import__"}
# Modules that reach into the grading process (the worker's own, frames, the object graph, any
# module by a run-time name) or build code at run time: a name counts where it stands for the
# module, not where it is the student's own variable, argument or attribute.
TAMPER_MODULES = {"__main__", "gc", "inspect", "ctypes", "_ctypes", "importlib", "builtins",
                  "worker", "contract", "wire", "zygote", "marshal", "pickle", "_pickle", "dill",
                  "cloudpickle", "codecs"}
# What reaches into the grading process wherever it is named: what the worker reports about the
# block could then be forged, so no registry-based point.
TAMPER_NAMES = {"__builtins__", "_getframe", "f_back", "f_globals", "f_locals", "__globals__",
                "get_objects", "get_referrers", "meta_path", "settrace", "setprofile",
                "sys.modules", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "_current_frames",
                "__subclasses__", "__closure__", "__code__", "FunctionType", "LambdaType",
                "CodeType"} | TAMPER_MODULES | BUILTIN_CALLS
ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "delattr", "hasattr"}
# getattr's other spellings: the attribute's name is an argument, or not visible at all when the
# getter itself is handed on.
NAME_GETTERS = {"getattr", "__getattribute__", "attrgetter", "methodcaller"}
# A module's own file: torch's source read to be compiled again outside the refusing kernels.
SOURCE_FILES = {"__file__", "__path__", "__spec__", "__loader__", "__cached__"}
OWNED_ROOTS = {"self", "cls", "super", "type"}  # chains that start at the student's own object


def source_routes(source):
    """(library routes, tampering routes) the source shows, read without running it."""
    try:
        nodes = list(ast.walk(ast.parse(source)))
    except (SyntaxError, ValueError):
        return [], []
    _annotate(nodes)
    constants = _string_constants(nodes)
    names = Bindings(nodes)
    library, tamper = set(), set()
    for node in nodes:
        library.update(_library_refs(node, constants, names))
        tamper.update(_tamper_refs(node, constants, names))
    return sorted(library), sorted(tamper)


class Bindings:
    """What each name of the file is bound to: an import (`modules`: the dotted path it stands
    for, aliases too; `torch`: torch's objects), or the student's own definition (`defined`).
    `own` is what the library scan leaves to the student: the definitions, the attributes they
    set, and names imported from their own helper modules."""

    def __init__(self, nodes):
        self.imported, self.torch, self.own, self.defined = set(), set(), set(), set()
        self.modules, self.aliases = {}, set()
        for node in nodes:
            self._bind(node)
        assignments = [node for node in nodes if isinstance(node, ast.Assign)]
        for _ in range(3):  # F = torch.nn.functional; G = F; s = sys: bound to torch or a module
            for node in assignments:
                self.aliases |= self._alias(node)
        self.own -= self.torch
        self.defined -= set(self.modules)  # imported and also defined: read as the import

    def _bind(self, node):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                self.imported.add(bound)
                self.modules[bound] = alias.name if alias.asname else bound
                if alias.name.split(".")[0] == "torch":
                    self.torch.add(bound)
        elif isinstance(node, ast.ImportFrom):
            from_torch = (node.module or "").split(".")[0] == "torch" and not node.level
            for alias in node.names:
                bound = alias.asname or alias.name
                (self.torch if from_torch else self.own).add(bound)
                self.imported.add(bound)
                if not node.level:
                    self.modules[bound] = f"{node.module}.{alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._define(node.name)
        elif isinstance(node, ast.arg):
            self._define(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._define(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            self._define(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            self.own.add(node.attr)

    def _define(self, name):
        self.own.add(name)
        self.defined.add(name)

    def _alias(self, node):
        """The names an assignment binds to torch's objects or to an imported path."""
        targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
        if self.is_torch(node.value):
            self.torch |= targets
        path = dotted(node.value)
        root, _, rest = (path or "").partition(".")
        if root not in self.modules or root in targets:
            return set()
        for target in targets:
            self.modules[target] = self.modules[root] + ("." + rest if rest else "")
        self.imported |= targets
        return targets

    def root(self, node):
        """The name an expression's chain of attributes, calls and subscripts starts at."""
        while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    def is_torch(self, node):
        return self.root(node) in self.torch

    def is_owned(self, node):
        """The chain starts at the student's own object or module, not at torch or a free name."""
        root = self.root(node)
        return root in OWNED_ROOTS or root in self.own or (root in self.imported
                                                           and root not in self.torch)

    def is_students(self, node):
        """The chain starts at an object the student made: self, an argument, a variable."""
        root = self.root(node)
        return root in OWNED_ROOTS or root in self.defined


def is_module(node, module, constants, names):
    """The expression stands for `module` as far as the file shows: a name imported or aliased
    as it, a free name of that spelling, another object's attribute of that name (os.sys), or an
    import of it by a name folded to it or not foldable."""
    if isinstance(node, ast.Name):
        if node.id in names.modules:
            return names.modules[node.id] == module
        builtins = (node.id, module) == ("__builtins__", "builtins")
        return node.id not in names.defined and (node.id == module or builtins)
    if isinstance(node, ast.Attribute):
        return node.attr == module and not names.is_students(node.value)
    if isinstance(node, ast.Call) and node.args:
        function = _called_name(node.func)
        if function in ("__import__", "import_module"):
            text = fold(node.args[0], constants)
            return text is None or text == module
        if function == "getattr" and len(node.args) > 1:
            return fold(node.args[1], constants) == module
    return False


def _library_refs(node, constants, names):
    """Library routes at one node: torch's attention by name, attribute, import or string."""
    if isinstance(node, ast.Name) and node.id not in names.own:
        yield from _library_words(node.id)
    elif isinstance(node, ast.Attribute) and (names.is_torch(node) or not names.is_owned(node)):
        if node.attr not in BUILTIN_CALLS or is_module(node.value, "builtins", constants, names):
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
            words = list(_library_words(text))
            yield from words if words and _name_or_code(text) else ()


def _library_words(text):
    yield from (part for part in LIBRARY_PARTS if part in text)
    if text in LIBRARY_NAMES:
        yield SHOWN.get(text, text)


def _name_or_code(text):
    """A string leads somewhere only as a name (an identifier or a dotted path, for getattr or
    import_module) or as code handed to a compiler; prose (an error message, a comment) cannot."""
    if all(part.isidentifier() for part in text.split(".")):
        return True
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _tamper_refs(node, constants, names):
    """Routes into the grading process at one node: names, attributes, imports and the strings
    that spell them; attributes read by a computed name; a module's __dict__."""
    if isinstance(node, ast.Name):
        # A bare name means what it spells unless the student binds it (an import of it counts;
        # a dunder such as __builtins__ always does).
        if node.id in TAMPER_NAMES and (node.id.startswith("__") or node.id in names.modules
                                        or node.id not in names.defined):
            yield node.id
        yield from _name_getter(node, node.id, constants, names)
    elif isinstance(node, ast.Attribute):
        yield from _tamper_attribute(node, constants, names)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        yield from _tamper_imports(node)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        yield from _computed_attribute(node, constants, names)
    text = _folded(node, constants)
    if text in TAMPER_NAMES or text in NAME_GETTERS - {"getattr"}:
        yield text
    elif text == "modules":
        yield "sys.modules"


def _tamper_attribute(node, constants, names):
    attr, value = node.attr, node.value
    if attr == "modules":
        if is_module(value, "sys", constants, names):
            yield "sys.modules"
    elif attr == "__dict__":
        root = names.root(node)
        if root in names.imported:
            yield f"{root}.__dict__"
    elif attr in BUILTIN_CALLS:
        if is_module(value, "builtins", constants, names):
            yield attr
    elif attr in TAMPER_MODULES:
        if not names.is_students(value):
            yield attr
    elif attr in TAMPER_NAMES:
        yield attr
    elif attr in SOURCE_FILES and names.is_torch(value):
        yield f"{ast.unparse(value)}.{attr}"
    yield from _name_getter(node, attr, constants, names)


def _tamper_imports(node):
    """import gc, from inspect import currentframe, from sys import modules (a relative import
    is the student's own folder)."""
    if isinstance(node, ast.Import):
        paths = [alias.name for alias in node.names]
    elif node.level:
        return
    else:
        paths = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
    for path in paths:
        yield from (part for part in path.split(".") if part in TAMPER_NAMES)
        if path in TAMPER_NAMES:
            yield path


def _computed_attribute(node, constants, names):
    """getattr(sys, name) / vars(sys) with a name the scan cannot fold: any attribute of a
    module, chosen at run time.  The target must stand for an import (sys, an alias F or
    s = sys): what the student imports from their own helper modules is theirs."""
    function, module = node.func.id, dotted(node.args[0])
    root = (module or "").split(".")[0]
    if function in names.defined or root not in names.modules \
            or (root in names.own and root not in names.aliases):
        return
    if function == "vars":
        yield f"vars({module})"
    elif function in ATTRIBUTE_FUNCTIONS and len(node.args) > 1 \
            and fold(node.args[1], constants) is None:
        yield f"{function}({module}, …)"


def _name_getter(node, name, constants, names):
    """getattr handed on as a value, or __getattribute__ / attrgetter / methodcaller with a name
    the scan cannot fold: any attribute of any object, chosen at run time (getattr's own calls
    are _computed_attribute's)."""
    if name not in NAME_GETTERS or (isinstance(node, ast.Name) and node.id in names.defined) \
            or (name in ("attrgetter", "methodcaller") and isinstance(node, ast.Attribute)
                and names.is_students(node.value)):
        return
    call = getattr(node, "call", None)
    if call is None:
        yield f"{name}(…)"
    elif name == "__getattribute__":
        # super() without arguments is the student's own object (the two-argument form reaches any)
        own = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call) \
            and not node.value.args and _called_name(node.value.func) == "super"
        yield from ("__getattribute__(…)",) if not own and _unfolded(call.args[-1:], constants) \
            else ()
    elif name in ("attrgetter", "methodcaller"):
        chosen = call.args if name == "attrgetter" else call.args[:1]
        yield from (f"{name}(…)",) if _unfolded(chosen, constants) else ()


def _unfolded(args, constants):
    return not args or any(fold(a, constants) is None for a in args)


def _called_name(func):
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def dotted(node):
    """a.b.c for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _folded(node, constants):
    """The string a string expression folds to (never a docstring), else None."""
    if isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript, ast.Constant)) \
            and not getattr(node, "is_docstring", False):
        return fold(node, constants)
    return None


def _annotate(nodes):
    """Mark the strings that are no routes (a string standing alone as a statement; the
    "__main__" of `if __name__ == "__main__"`), and give each called expression its call
    (`node.call`), for the getters whose arguments matter."""
    for node in nodes:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            node.value.is_docstring = True
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) \
                and node.left.id == "__name__":
            for constant in node.comparators:
                constant.is_docstring = True
        elif isinstance(node, ast.Call):
            node.func.call = node


def _string_constants(nodes):
    """name -> folded string, for names assigned a string expression (a = "scaled_" + ...) or
    given one as a default argument (def f(name="mod" "ules"))."""
    pairs = []
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            pairs.append((node.targets[0].id, node.value))
        elif isinstance(node, ast.arguments):
            positional = node.posonlyargs + node.args
            firsts = len(positional) - len(node.defaults)  # defaults belong to the last ones
            pairs += [(a.arg, d) for a, d in zip(positional[firsts:], node.defaults)]
            # (a keyword-only argument without a default has None there)
            pairs += [(a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d]
    constants = {}
    for _ in range(3):  # names built from names built from literals
        for name, value in pairs:
            text = fold(value, constants)
            if text is not None:
                constants[name] = text
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


# -- asking which device the judge runs the code on ------------------------------------------------
# A tensor's own answers about its device, read in a test (if, while, a conditional expression,
# a comparison, and, or, not): what the code does then depends on where the judge runs it.
DEVICE_FLAGS = {"is_meta", "is_cuda", "is_cpu"}


def device_probes(source):
    """Where the source asks which device it is run on: `is_meta` anywhere, the string "meta",
    and a device's type, str() of a device or a tensor's is_cuda / is_cpu read in a test (a
    correct attention needs none: it uses device=x.device).  The __main__ block, where a demo
    picks its device, is not read."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    skipped = {id(n) for block in ast.walk(tree) if _main_block(block) for n in ast.walk(block)}
    nodes = [n for n in ast.walk(tree) if id(n) not in skipped]
    _annotate(nodes)
    constants = _string_constants(nodes)
    tests = {id(n) for node in nodes for n in _tested(node)}
    found = []
    for node in nodes:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr == "is_meta":
            found.append((line, ast.unparse(node)))
        elif id(node) in tests and (_device_type(node) or isinstance(node, ast.Attribute)
                                    and node.attr in DEVICE_FLAGS):
            found.append((line, ast.unparse(node)))
        elif _folded(node, constants) == "meta":
            found.append((line, '"meta"'))
    return [f"{text} (attention.py:{line})" for line, text in sorted(set(found))][:4]


def _main_block(node):
    """`if __name__ == "__main__":`"""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(test, ast.Compare) \
        and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def _tested(node):
    """The expressions a node tests (their every sub-expression)."""
    if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
        yield from ast.walk(node.test)
    elif isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp)
                                                        and isinstance(node.op, ast.Not)):
        yield from ast.walk(node)
    elif isinstance(node, ast.Match):
        yield from ast.walk(node.subject)


def _device_type(node):
    """x.device.type, or str(x.device)."""
    if isinstance(node, ast.Attribute) and node.attr == "type" \
            and isinstance(node.value, ast.Attribute) and node.value.attr == "device":
        return True
    return isinstance(node, ast.Call) and _called_name(node.func) == "str" and node.args \
        and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "device"

