"""The module checks' own parts, without grading a whole submission: the worker's library switch,
the contract's layout finder and registries, the judge-side source scan, the module variants."""
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.sandbox.runtime import contract
from grader.judge.secret import variants  # noqa: E402
from grader.judge.checks.scan import source_routes  # noqa: E402
from grader.judge.secret.reference import ref  # noqa: E402

ROUTES = {
    "F.scaled_dot_product_attention": "torch.nn.functional.scaled_dot_product_attention(q, q, q)",
    "torch._C._nn": "torch._C._nn.scaled_dot_product_attention(q, q, q)",
    "torch.ops.aten": "torch.ops.aten.scaled_dot_product_attention(q, q, q)",
    "aten math kernel": "torch.ops.aten._scaled_dot_product_attention_math(q, q, q)",
    "aten cpu flash kernel": "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)",
    "nn.MultiheadAttention": "torch.nn.MultiheadAttention(4, 2)",
    "multi_head_attention_forward": "torch.nn.functional.multi_head_attention_forward()",
    "flex_attention": "from torch.nn.attention.flex_attention import flex_attention",
    "flex_attention module": "import torch.nn.attention.flex_attention as m; m.flex_attention(q, q, q)",
}


# One fresh interpreter, prepared as a worker (the switch changes torch for the whole process, as
# in the worker), for both tests below: every route's outcome, softmax, and the refusal's name.
PREPARED_WORKER = "\n".join([
    "import sys; sys.path.insert(0, 'grader/sandbox/runtime')",
    "import worker; torch = worker.prepare()",
    "q = torch.randn(1, 2, 3, 4)",
    "for name, code in %r.items():" % ROUTES,
    "    try:",
    "        exec(code)",
    "        print('WORKS', name)",
    "    except Exception as exc:",
    "        print(type(exc).__name__, name)",
    "print('softmax', float(torch.softmax(torch.zeros(2), -1)[0]))",
    "class LibraryAttentionDisabled(RuntimeError): pass",
    "try:",
    "    torch.nn.functional.scaled_dot_product_attention(q, q, q)",
    "except Exception as exc:",
    "    print('refused', worker.describe_exception(exc, 'attention.py')['mro'][0])",
    "mine = worker.describe_exception(LibraryAttentionDisabled('mine'), 'attention.py')",
    "print('mine', mine['mro'][0])",
])


@pytest.fixture(scope="module")
def prepared_worker():
    """The lines PREPARED_WORKER printed, in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PREPARED_WORKER], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_every_library_route_raises_inside_a_prepared_worker(prepared_worker):
    lines = prepared_worker[:len(ROUTES) + 1]
    assert sorted(lines[:-1]) == sorted(f"LibraryAttentionDisabled {n}" for n in ROUTES)
    assert lines[-1] == "softmax 0.5"  # the ops attention is written with still work


class Wrapped(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.inner = nn.Linear(d_in, d_out, bias=False)


class ListBlock(nn.Module):
    """Projections in a ModuleList with aliases, one of them shared under a second name; the
    mask a parameter hidden by overriding the class's own registry methods."""

    def __init__(self, d):
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(d, d, bias=False) for _ in range(4)])
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = self.linears
        self.again = self.out_proj
        self.mask = nn.Parameter(torch.ones(3, 3, dtype=torch.bool).tril(), requires_grad=False)

    def named_parameters(self, *args, **kwargs):
        return iter([])

    def named_buffers(self, *args, **kwargs):
        return iter([("mask", self.mask)])


def test_layout_through_the_contracts_names_and_torchs_own_registries():
    block = ListBlock(4)
    description = contract.describe(block, 4)
    assert description["layout"] == "separate"
    assert sum(math.prod(s) for _, s in description["params"]) == 4 * 16 + 9  # shared once
    assert description["mask"]["registered"] == "parameter"  # the overrides are not believed
    fused = nn.Module()
    fused.qkv, fused.out_proj = Wrapped(4, 12), nn.Linear(4, 4, bias=False)
    weights = [torch.randn(4, 4) for _ in range(4)]
    assert contract.inject(fused, 4, *weights) == "fused"
    assert torch.equal(fused.qkv.inner.weight, torch.cat(weights[:3]))
    read = contract.read(fused, 4)
    assert all(torch.equal(read[p], w) for p, w in zip("qkvo", weights))
    assert contract.describe(nn.Linear(4, 4), 4)["layout"] is None


def test_scramble_changes_parameters_and_leaves_buffers():
    block = ref.CausalSelfAttention(12, 3, 8)
    before = block.qkv.weight.clone()
    assert contract.scramble(block, seed=1) == 2
    assert not torch.equal(block.qkv.weight, before)
    assert torch.equal(block.mask, torch.ones(8, 8, dtype=torch.bool).tril())


@pytest.mark.parametrize("source,expected", [
    ("import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)",
     ["scaled_dot_product"]),
    ("import torch\ny = torch.nn.functional.scaled_dot_product_attention(q, k, v)",
     ["scaled_dot_product"]),
    ("m = torch.nn.MultiheadAttention(8, 2)", ["MultiheadAttention"]),
    ("f = getattr(F, 'scaled_dot_' + 'product_attention')", ["scaled_dot_product"]),
    ("name = ''.join(['scaled_dot', '_product_attention'])\nf = getattr(F, name)",
     ["scaled_dot_product"]),
    ("a = 'scaled_dot'\nb = f'{a}_product_attention'\nf = getattr(F, b)", ["scaled_dot_product"]),
    ("f = getattr(F, 'noitnetta_tcudorp_tod_delacs'[::-1])", ["scaled_dot_product"]),
    ("f = getattr(torch.ops.aten, op)", ["torch.ops.aten"]),
    ("f = torch._C._nn.thing", ["torch._C"]),
    ("import importlib\nm = importlib.import_module(x)", ["importlib"]),
    ("f = eval(text)", ["eval"]),
    ("from importlib import import_module", ["importlib"]),
    ("from torch.nn.functional import scaled_dot_product_attention as attn", ["scaled_dot_product"]),
    ("import torch\nG = torch.nn.functional\nH = G\ny = H.scaled_dot_product_attention(q, k, v)",
     ["scaled_dot_product"]),
    # the student's own helper of that name calling torch's is still torch's
    ("import torch.nn.functional as F\ndef scaled_dot_product_attention(q, k, v):\n"
     "    return F.scaled_dot_product_attention(q, k, v)", ["scaled_dot_product"]),
    ("import torch.nn.functional as F\ndef scaled_dot_product_attention(q, k, v):\n    return q\n"
     "f = getattr(F, 'scaled_dot_product_attention')", ["scaled_dot_product"]),
])
def test_the_scan_sees_library_routes(source, expected):
    library, _ = source_routes(source)
    assert library == expected


@pytest.mark.parametrize("source,expected", [
    ("import sys\nw = sys.modules['worker']", ["sys.modules", "worker"]),
    # names built from strings at run time are read as the names they spell
    ("import sys\nm = getattr(sys, 'mod' + 'ules')", ["sys.modules"]),
    ("import sys\nm = vars(sys)['mod' 'ules']", ["sys.modules", "vars(sys)"]),
    ("import sys\nm = sys.__dict__[name]", ["sys.__dict__"]),
    ("import sys\nm = getattr(sys, ''.join(map(chr, codes)))", ["getattr(sys, …)"]),
    ("def grab(part='mod', rest='ules'):\n    import sys\n    return getattr(sys, part + rest)",
     ["sys.modules"]),
    ("@(lambda cls: (getattr(__import__('s' + 'ys'), 'modules'), cls)[1])\nclass A: pass",
     ["__import__", "sys.modules"]),
    ("import importlib\nm = importlib.import_module('sy' + 's').modules", ["importlib",
                                                                          "sys.modules"]),
    ("e = err.__traceback__.tb_frame", ["tb_frame"]),
    ("import gc\nobjs = gc.get_objects()", ["gc", "get_objects"]),
    ("import __main__", ["__main__"]),
    ("g = f.__globals__", ["__globals__"]),
])
def test_the_scan_sees_reaching_into_the_grader(source, expected):
    _, tamper = source_routes(source)
    assert tamper == expected


@pytest.mark.parametrize("source", [
    "def scaled_dot_product_attention(q, k, v, mask=None):\n    return q\n"
    "y = scaled_dot_product_attention(q, k, v)",
    "def scaled_dot_product(q, k, v):\n    return q\nclass A:\n"
    "    def scaled_dot_product_attention(self, q, k, v):\n        return scaled_dot_product(q, k, v)\n"
    "    def forward(self, x):\n        return self.scaled_dot_product_attention(x, x, x)",
    "class Block:\n    def __init__(self, attend):\n        self.scaled_dot_product = attend\n"
    "    def forward(self, x):\n        return self.scaled_dot_product(x, x, x)",
    "from helpers import scaled_dot_product\nimport helpers\ny = helpers.scaled_dot_product(q, k, v)",
    "for scaled_dot_product_attention in (f, g):\n    scaled_dot_product_attention(q, k, v)",
    "library = {}\nlibrary['a'] = 1",
])
def test_the_scan_leaves_the_students_own_names_to_them(source):
    assert source_routes(source) == ([], [])


# Names that look like routes and are not: each once cost a correct submission its scanned points.
@pytest.mark.parametrize("source", [
    # .modules of an object that is not sys
    "import torch\nfrom torch import nn\na = nn.modules.Linear(4, 4)\n"
    "b = torch.nn.modules.linear.Linear(4, 4)",
    "for m in self.modules():\n    m.eval()",
    # eval and exec as other objects' methods
    "model = Block()\nmodel.eval()",
    "import torch\nfrom torch import nn\nnn.Module.eval(block)\ntorch.compile(block)",
    # the student's own argument, variable or function named after a module
    "def forward(self, x, inspect=False):\n    if inspect:\n        print(x.shape)\n    return x",
    "inspect = True\ngc = 0\ndef worker(contract):\n    return contract\nworker(inspect or gc)",
    "def compile(text):\n    return text\nsource = compile('x')",
    # prose that mentions torch's attention: an error message, a comment written as a string
    "def scaled_dot_product_attention(q, k, v):\n    raise ValueError("
    "'scaled_dot_product_attention: q and k must have the same width')",
    "import torch.nn.functional as F\ndef attend(q, k, v):\n    s = q @ k\n"
    '    """F.scaled_dot_product_attention would do this, but it is forbidden."""\n    return s @ v',
    "message = 'uses no F.scaled_dot_product_attention here, promise'",
    # a name bound to the student's own helper module's function
    "import helpers\nscaled_dot_product_attention = helpers.attention\n"
    "y = scaled_dot_product_attention(q, k, v)",
    # __getattribute__ handed on to the student's own class's parent
    "class A:\n    def __getattribute__(self, name):\n        return super().__getattribute__(name)",
])
def test_the_scan_leaves_false_friends_alone(source):
    assert source_routes(source) == ([], [])


@pytest.mark.parametrize("source,expected", [
    # sys.modules under other spellings
    ("import os\nm = os.sys.modules", ["sys.modules"]),
    ("import torch\nm = torch.sys.modules", ["sys.modules"]),
    ("import sys\ns = sys\nm = s.modules", ["sys.modules"]),
    ("from sys import modules", ["sys.modules"]),
    # eval and exec as the builtin
    ("import builtins\nf = builtins.eval", ["builtins", "eval"]),
    ("f = __builtins__.exec", ["__builtins__", "exec"]),
    ("code = compile(text, 'x', 'eval')", ["compile", "eval"]),
    # a module's name standing for the module
    ("import inspect\ndef f(inspect=inspect):\n    return inspect.currentframe()", ["inspect"]),
    ("from inspect import currentframe", ["inspect"]),
    ("frame = inspect.currentframe()", ["inspect"]),
    ("import torch\nhelper = torch._dynamo.utils.gc", ["gc"]),
    # a name computed at run time, through getattr's other spellings
    ("f = lambda obj, name: obj.__getattribute__(name)", ["__getattribute__(…)"]),
    ("import sys\nf = object.__getattribute__(sys, name)", ["__getattribute__(…)"]),
    # the bare name, called (the scan once failed on it, an error of the kit on three checks)
    ("import sys\nf = __getattribute__(sys, name)", ["__getattribute__(…)"]),
    ("import operator\nf = operator.attrgetter(name)(sys)", ["attrgetter(…)"]),
    ("from operator import methodcaller\nf = methodcaller(name)(sys)", ["methodcaller(…)"]),
    ("fetch = getattr\nm = fetch(sys, name)", ["getattr(…)"]),
    ("import torch\nf = getattr(torch.nn.functional, bytes(codes).decode())",
     ["getattr(torch.nn.functional, …)"]),
    ("import torch\nF = torch.nn.functional\nf = getattr(F, name)", ["getattr(F, …)"]),
    # code built at run time, and torch's own source read to build it
    ("import types\nf = types.FunctionType(code, {})", ["FunctionType"]),
    ("import marshal\ncode = marshal.loads(data)", ["marshal"]),
    ("import pickle\nf = pickle.loads(data)", ["pickle"]),
    ("import codecs\nname = codecs.decode(text, 'rot13')", ["codecs"]),
    ("import torch\nsource = open(torch.nn.functional.__file__).read()",
     ["torch.nn.functional.__file__"]),
])
def test_the_scan_sees_routes_spelled_another_way(source, expected):
    _, tamper = source_routes(source)
    assert tamper == expected


@pytest.mark.parametrize("source,expected", [
    ("import torch\nf = getattr(torch.nn.functional, 'scaled_dot_' 'product_attention')",
     ["scaled_dot_product"]),
    # code in a string (a compiler's input), not prose
    ("import torch\ncu = torch.jit.CompilationUnit('def f(q, k, v):\\n"
     "    return torch.nn.functional.scaled_dot_product_attention(q, k, v)')",
     ["scaled_dot_product"]),
    ("import torch\nf = torch._C._nn.scaled_dot_product_attention", ["scaled_dot_product",
                                                                   "torch._C"]),
])
def test_the_scan_still_sees_library_names_and_code_in_strings(source, expected):
    library, _ = source_routes(source)
    assert library == expected


def test_only_the_workers_own_refusal_is_reported_as_the_refusal(prepared_worker):
    # The judge matches torch's refusal by the name the worker gives the class it raises itself
    # (contract.…, in describe_exception): a student's class of the same short name stays theirs.
    # In the prepared worker's interpreter (PREPARED_WORKER), after the routes.
    assert prepared_worker[len(ROUTES) + 1:] == ["refused contract.LibraryAttentionDisabled",
                                                 "mine LibraryAttentionDisabled"]


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "submissions" / "correct").rglob("*.py"))
                         + [ROOT / "solutions" / "attention.py"], ids=lambda p: p.name)
def test_the_scan_passes_honest_code(path):
    text = path.read_text(encoding="utf-8") + '\n\nif __name__ == "__main__":\n    """uses no scaled_dot_product_attention"""\n'
    assert source_routes(text) == ([], [])


def test_each_module_variant_is_one_knob_on_the_reference():
    w = [torch.randn(12, 12) / math.sqrt(12) for _ in range(4)]
    x = torch.randn(2, 5, 12)
    expected, expected_weights = variants.block("reference", *w, 3, 8)(x, return_weights=True)
    named = variants.module_candidates(x, *w, 3, 8)
    assert {n for n, _ in named} == set(variants.MODULE_VARIANTS)
    for name, (y, weights) in named:  # every knob changes the output or the weights it returns
        assert not (torch.allclose(y, expected, atol=1e-5)  # (NaN counts as changed)
                    and torch.allclose(weights, expected_weights, atol=1e-5)), name
    biased = variants.module_candidates(x, *w, 3, 8, biases={p: torch.ones(12) for p in "qkvo"})
    assert biased[0][0] == "bias"


CHECK_FILES = [ROOT / "grader" / "judge" / "checks" / part for part in (
    "public/check_module.py", "public/check_quiz.py", "hidden/check_module_reference.py",
    "hidden/check_quiz_answers.py")]


def _verdicts(path):
    """(key or None, keyword names) of every Verdict(...) call in a check file."""
    import ast

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Verdict":
            first = node.args[0] if node.args else None
            key = first.value if isinstance(first, ast.Constant) else None
            yield key, {k.arg for k in node.keywords}


@pytest.mark.parametrize("path", CHECK_FILES, ids=lambda p: p.name)
def test_the_module_checks_speak_only_through_the_rubric(path):
    from grader import rubric

    messages = rubric.load().messages
    for key, keywords in _verdicts(path):
        assert "detail" not in keywords, f"{path.name}: English detail= prose"
        if key is not None:
            assert key in messages, f"{path.name}: {key} is not a rubric message"
    quiz_keys = {"quiz_wrong_" + c.id.split(".", 1)[1] for c in rubric.load().checks
                 if c.exercise == "quiz" and c.visibility == "hidden"}
    assert quiz_keys <= set(messages)  # check_quiz_answers builds its key from the check id


def test_the_quiz_check_holds_no_answers():
    text = (ROOT / "grader" / "judge" / "checks" / "hidden" / "check_quiz_answers.py").read_text(encoding="utf-8")
    for name in ("Q1_SHAPE", "Q1_FORMAL_PARAMS", "Q2_CORRECT"):
        assert repr(getattr(ref, name)) not in text
    assert "16384" not in text and "(1, 1, 3, 4)" not in text


def test_a_mismatch_names_the_first_named_mistake_that_matches():
    """support.expect_close names the first known mistake that gives the student's numbers, and
    asks for them only when the values differ."""
    from grader.judge.checks.support import Verdict, expect_close

    expected, got = torch.zeros(2, 3), torch.ones(2, 3)
    named = [("scale_by_width", torch.full((2, 3), 2.0)), ("qkv_order", torch.ones(2, 3)),
             ("mask_missing", torch.ones(2, 3))]
    with pytest.raises(Verdict) as caught:
        expect_close(got, expected, "y", lambda: named)
    assert caught.value.key == "qkv_order"
    with pytest.raises(Verdict) as caught:  # none matches: the key is kept
        expect_close(got, expected, "y", lambda: [("qkv_order", expected)])
    assert caught.value.key == "wrong_values"
    expect_close(expected, expected, "y", lambda: pytest.fail("asked for a right answer"))
