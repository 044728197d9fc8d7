"""torch's import in the kit's processes (grader/sandbox/runtime/quickimport.py): dataclasses' methods
read compiled from the file `make setup` writes, a frame's module named directly, and both put back
before anything else runs."""
import dataclasses
import inspect
import json
import os
import subprocess
import sys

import pytest

from grader import collector, paths
from grader.sandbox.runtime import quickimport
from grader.tools import bytecode

PY = sys.executable
RUNTIME = paths.RUNTIME


@pytest.fixture
def turned_on():
    """begin()/end() around a test, put back even where it fails."""
    yield
    quickimport.end()


def make_classes():
    """Dataclasses of every kind of method dataclasses writes (init, repr, eq, order, frozen
    set/delete, hash), made afresh at each call."""
    @dataclasses.dataclass(frozen=True, order=True)
    class Point:
        x: int
        y: int = 2
        tags: tuple = dataclasses.field(default_factory=tuple)

    @dataclasses.dataclass(unsafe_hash=True)
    class Named:
        name: str
        size: int = 0

    return Point, Named


def behaviour(Point, Named):
    p, q = Point(1), Point(1, 3, ("a",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5
    with pytest.raises(TypeError):
        Point()
    return [repr(p), repr(q), p == Point(1), p < q, hash(p) == hash(Point(1)),
            repr(Named("n")), Named("n", 1) == Named("n", 1), hash(Named("n")) == hash(Named("n"))]


def test_classes_made_from_kept_methods_behave_as_ever(tmp_path, turned_on):
    plain = behaviour(*make_classes())
    path = str(tmp_path / "codegen.marshal")
    quickimport.begin(path)  # nothing kept yet: every method compiled, and listed
    first = behaviour(*make_classes())
    ran = quickimport.end()
    assert first == plain
    assert len(ran) >= 6 and all(" def " in text for text in ran)
    quickimport.save(ran, path)

    kept = quickimport.load(path)
    assert kept == ran
    quickimport.begin(path)
    again = behaviour(*make_classes())
    second = quickimport.end()
    assert again == plain
    assert second.keys() == kept.keys()  # every method found in the file (which one runs:
    # test_the_kept_code_is_what_runs)


def test_the_kept_code_is_what_runs(tmp_path, turned_on):
    """A text found in the file runs the file's code (here one that says so), not a new one."""
    path = str(tmp_path / "codegen.marshal")
    quickimport.begin(path)
    make_classes()
    ran = quickimport.end()
    reprs = [text for text in ran if "def __repr__(" in text]
    assert reprs
    for text in reprs:  # the first return is the method's own; __create_fn__'s comes last
        marked = text.replace("return ", "return 'from the file' or ", 1)
        ran[text] = compile(marked, "<string>", "exec", dont_inherit=True)
    quickimport.save(ran, path)
    quickimport.begin(path)
    Point, Named = make_classes()
    quickimport.end()
    assert repr(Point(1)) == repr(Named("n")) == "from the file"
    assert "from the file" not in (repr(make_classes()[0](1)), repr(make_classes()[1]("n")))


def test_end_puts_dataclasses_and_inspect_back(tmp_path, turned_on):
    original = inspect.getmodule
    quickimport.begin(str(tmp_path / "none.marshal"))
    assert "exec" in vars(dataclasses) and inspect.getmodule is not original
    quickimport.begin(str(tmp_path / "none.marshal"))  # on already: nothing changes
    quickimport.end()
    assert "exec" not in vars(dataclasses) and inspect.getmodule is original
    assert quickimport.end() == {}  # nothing on


def test_a_frame_is_named_by_its_module_as_inspect_would(turned_on):
    here = sys._getframe()
    answer = quickimport.frames_module(inspect.getmodule)
    assert answer(here) is inspect.getmodule(here) is sys.modules[__name__]
    stdlib = []
    json.loads("[1]", object_hook=None, parse_int=lambda s: stdlib.append(sys._getframe(1)) or 1)
    assert answer(stdlib[0]) is inspect.getmodule(stdlib[0])
    assert answer(json) is json and answer(make_classes) is sys.modules[__name__]


def test_a_frame_whose_file_is_not_its_modules_is_left_to_inspect(turned_on):
    """Code compiled under another file name but run in this module's globals: inspect's own
    mapping of files decides, as before."""
    seen = []
    calls = {"original": 0}

    def original(obj, _filename=None):
        calls["original"] += 1
        return None

    exec(compile("seen.append(sys._getframe())", "/elsewhere/made.py", "exec"),
         {"seen": seen, "sys": sys, "__name__": __name__})
    assert quickimport.frames_module(original)(seen[0]) is None
    assert calls["original"] == 1


@pytest.mark.parametrize("content", [b"", b"not a header at all", None, "other", "values"])
def test_a_missing_or_foreign_file_reads_as_nothing_kept(tmp_path, content):
    import marshal

    path = tmp_path / "codegen.marshal"
    if content == "other":  # another Python's bytecode magic
        path.write_bytes(b"\x00\x00\r\n" + quickimport.header()[4:] + marshal.dumps({}))
    elif content == "values":  # not code
        path.write_bytes(quickimport.header() + marshal.dumps({"def f(): pass": "no code"}))
    elif content is not None:
        path.write_bytes(quickimport.header() + content if content else content)
    assert quickimport.load(str(path)) == {}


def test_a_damaged_file_reads_as_nothing_kept(tmp_path):
    path = tmp_path / "codegen.marshal"
    quickimport.save({"x = 1": compile("x = 1", "<string>", "exec")}, str(path))
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])
    assert quickimport.load(str(path)) == {}


def test_setup_keeps_the_methods_once_and_says_where_it_cannot(tmp_path, capsys):
    path = str(tmp_path / "codegen.marshal")
    methods = {"y = 2": compile("y = 2", "<string>", "exec")}
    assert bytecode.keep_methods(methods, path)
    written = os.stat(path).st_mtime_ns
    assert bytecode.keep_methods(methods, path)
    assert os.stat(path).st_mtime_ns == written  # the same methods: not written again
    assert not bytecode.keep_methods(methods, str(tmp_path / "no such folder" / "codegen"))
    assert "each start compiles them" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["codegen.marshal"]  # no partial file left behind


def run_python(code, env=None, timeout=120):
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=paths.KIT_ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_torchs_methods_are_found_again_by_another_process(tmp_path):
    """What one process keeps, a later one finds whole (another hash seed, as a judge and a
    worker differ): not one of torch's methods compiled again."""
    path = str(tmp_path / "codegen.marshal")
    record = (f"import sys, json; sys.path.insert(0, {RUNTIME!r}); import quickimport\n"
              f"quickimport.begin({path!r}); import torch; ran = quickimport.end()\n"
              f"quickimport.save(ran, {path!r}); print(json.dumps(len(ran)))\n")
    kept = run_python(record, env=dict(os.environ, PYTHONHASHSEED="1"))
    assert kept > 300
    again = (f"import sys, json; sys.path.insert(0, {RUNTIME!r}); import quickimport\n"
             f"kept = quickimport.load({path!r})\n"
             f"quickimport.begin({path!r}); import torch; ran = quickimport.end()\n"
             "print(json.dumps([len(ran), sum(t not in kept for t in ran)]))\n")
    assert run_python(again, env=dict(os.environ, PYTHONHASHSEED="2")) == [kept, 0]


def test_a_worker_hands_the_student_dataclasses_and_inspect_as_they_are():
    """worker.prepare turns it on for torch's import and meta's kernels, and off before the
    student's file: their dataclasses compile their own methods, their getmodule is inspect's."""
    seen = run_python(
        "import dataclasses, inspect, json, sys\n"
        f"sys.path.insert(0, {RUNTIME!r})\n"
        "original = inspect.getmodule\n"
        "import quickimport, worker\n"
        "began = []\n"
        "real_begin = quickimport.begin\n"
        "quickimport.begin = lambda *a: (began.append(1), real_begin(*a))\n"
        "worker.prepare()\n"
        "print(json.dumps([began, 'exec' in vars(dataclasses), inspect.getmodule is original,\n"
        "                  quickimport.end()]))\n")
    assert seen == [[1], False, True, {}]


def test_a_judge_imports_with_it_on_only_while_held():
    seen = run_python(
        "import dataclasses, json\n"
        "from grader import collector\n"
        "collector.importing()\n"
        "unheld = 'exec' in vars(dataclasses)\n"
        "collector.hold(); collector.importing()\n"
        "held = 'exec' in vars(dataclasses)\n"
        "collector.release()\n"
        "print(json.dumps([unheld, held, 'exec' in vars(dataclasses)]))\n")
    assert seen == [False, True, False]


def test_the_check_command_grades_with_it_put_back():
    """`python -m grader check`: on from the worker's start until the checks are collected,
    then off for the gradings, with the report as ever."""
    seen = run_python(
        "import dataclasses, inspect, json, sys\n"
        "from grader import __main__ as cli\n"
        "from grader.judge import runner\n"
        "states, run_items, original = [], runner.KitPlugin._run_items, inspect.getmodule\n"
        "def recording(self, session, student, only=None):\n"
        "    states.append(['exec' in vars(dataclasses), inspect.getmodule is original])\n"
        "    return run_items(self, session, student, only)\n"
        "runner.KitPlugin._run_items = recording\n"
        f"code = cli.main(['check', {paths.SOLUTION!r}, '--isolation', 'process', '--format',"
        " 'json'])\n"
        "sys.stdout.flush()\n"
        "print()\n"
        "print(json.dumps({'code': code, 'states': states}))\n")
    assert seen == {"code": 0, "states": [[False, True]]}
