"""torch's import in the kit's own processes, without two of its costs that change nothing it makes.

- **dataclasses compiles each method it writes, in every process.** torch's import writes
  ~1150 of them (`__init__`, `__eq__`, `__repr__`, ...: 568 different texts), and parsing and
  compiling them takes ~60 ms of an ~0.82 s import. The compiled code of each text is kept in the
  venv (CODEGEN). `make setup` writes it once (grader/tools/bytecode.py), as pip writes a
  package's bytecode. A text is its own key, so a text the file lacks (another torch's, one
  never seen) is compiled as before.
- **torch.library asks inspect.getmodule for the module of every caller that registers a fake
  kernel** (a few hundred calls at import, through inspect.getframeinfo too). getmodule maps the
  file of every module loaded since its last answer through os.path.realpath: ~10,000 stat calls,
  ~40 ms. The module a frame runs in is the one its globals name, which is taken directly where
  that module's file is the frame's.

Both are on only while a kit's process imports: worker.prepare, and a judge's start
(collector.py). Then dataclasses and inspect are put back as they were, so the student's code,
and everything after the start, sees them unchanged.

Runs inside the sandbox too (worker.prepare), so it imports nothing of the kit; what it needs
is imported when it is turned on (a judge imports this module at its entry: collector.py).
"""
import os
import sys
import threading

# Beside the venv's Python: bound read-only into the sandbox at the same path (launch.py).
CODEGEN = os.path.join(sys.prefix, f"kit-codegen.{sys.implementation.cache_tag}.marshal")

_lock = threading.Lock()
_active = {}  # while on: inspect's getmodule and dataclasses' exec as set, what ran meanwhile


def header():
    """What the file starts with: marshal's format is the interpreter's own."""
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER + b"kit-codegen 1\n"


def load(path=CODEGEN):
    """{method text: code}, or {} where the file is missing, from another Python, or damaged."""
    import marshal
    import types

    try:
        with open(path, "rb") as handle:
            start = header()
            if handle.read(len(start)) != start:
                return {}
            codes = marshal.loads(handle.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if type(codes) is not dict or not all(type(text) is str and type(code) is types.CodeType
                                          for text, code in codes.items()):
        return {}
    return codes


def save(codes, path=CODEGEN):
    """Write `codes` whole, then move it into place: a reader sees the old file or the new one."""
    import marshal

    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "wb") as handle:
            handle.write(header())
            marshal.dump(codes, handle)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def compiling_once(codes, ran):
    """An `exec` for dataclasses: a text found in `codes` runs its code; any other is compiled
    as exec would (dataclasses.py has no __future__ flags to pass on).  Each text run, with its
    code, is added to `ran`."""
    import builtins

    run = builtins.exec

    def exec(source, globals=None, locals=None, /):
        if type(source) is str:
            code = codes.get(source)
            if code is None:
                code = compile(source, "<string>", "exec", dont_inherit=True)
            ran[source] = code
            source = code
        return run(source, globals, locals)

    return exec


def frames_module(getmodule):
    """inspect.getmodule, answering a frame with the module its globals name where that module's
    file is the frame's (what the mapping of every file would find), and anything else as before."""
    from inspect import isframe

    def module_of(object, _filename=None):
        if isframe(object):
            module = sys.modules.get(object.f_globals.get("__name__"))
            if module is not None and getattr(module, "__file__", None) == object.f_code.co_filename:
                return module
        return getmodule(object, _filename)

    return module_of


def begin(path=CODEGEN):
    """Turn both on (nothing changes where they are on already)."""
    import dataclasses
    import inspect

    with _lock:
        if _active:
            return
        ran = {}
        _active.update(getmodule=inspect.getmodule, exec=compiling_once(load(path), ran), ran=ran)
        dataclasses.exec = _active["exec"]  # a module's global is found before the builtin
        inspect.getmodule = frames_module(inspect.getmodule)


def end():
    """Put dataclasses and inspect back; {text: code} of every method dataclasses wrote meanwhile
    (what grader/tools/bytecode.py keeps), {} where nothing was on."""
    with _lock:
        if not _active:
            return {}
        made = vars(sys.modules["dataclasses"])
        if made.get("exec") is _active["exec"]:
            del made["exec"]
        sys.modules["inspect"].getmodule = _active["getmodule"]
        ran = _active["ran"]
        _active.clear()
        return ran
