"""The worker keeps what the verdict relies on out of the student's reach (grader/sandbox/runtime):

- torch's attention is refused on every dispatch key that has a kernel for it (vmap's batching
  rules, meta, nested tensors, a redispatch to one key), while hand-written attention still runs
  on meta and under vmap;
- the contract reads torch's registries through descriptors taken before any student code, and
  says `tampered` for a block whose classes stand between the registries and a reader, never for
  a block written the ordinary way (every file of tests/submissions/correct/);
- no reader table, handle table or runtime module but `wire` is left where the student's file can
  reach it by a module attribute or an import, and patching that `wire` changes no reply (the
  worker speaks through an instance of its own), in a real worker, cold and forked.
"""
import glob
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import zygotes  # noqa: E402
from grader.judge import grading  # noqa: E402
from loading import load_file  # noqa: E402
from grader.judge.workers import forked  # noqa: E402
from grader.sandbox import forkserver  # noqa: E402
from grader.sandbox.runtime import contract  # noqa: E402

IMITATIONS = ROOT / "tests" / "submissions" / "imitation"

ROUTES = {
    "vmap over sdpa": "torch.vmap(lambda a: torch._C._nn.scaled_dot_product_attention(a, a, a))(q)",
    "vmap over vmap": "torch.vmap(torch.vmap(lambda a: torch._C._nn.scaled_dot_product_attention("
                      "a, a, a)))(q)",
    "vmap over the math kernel": "torch.func.vmap(lambda a: torch.ops.aten."
                                 "_scaled_dot_product_attention_math(a, a, a)[0])(q)",
    "grad of sdpa": "torch.func.grad(lambda a: torch._C._nn.scaled_dot_product_attention("
                    "a, a, a).sum())(q)",
    "flash kernel on meta": "m = q.to('meta'); torch.ops.aten."
                            "_scaled_dot_product_flash_attention_for_cpu(m, m, m)",
    "sdpa on meta": "m = q.to('meta'); torch._C._nn.scaled_dot_product_attention(m, m, m)",
    "redispatch to CPU": "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default."
                         "redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CPU), q, q, q)",
    "below autograd": "g = torch._C._AutoDispatchBelowAutograd(); g.__enter__(); "
                      "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)",
    "inference mode": "g = torch.inference_mode(); g.__enter__(); "
                      "torch._C._nn.scaled_dot_product_attention(q, q, q)",
    "native mha": "w = torch.randn(12, 4); torch._native_multi_head_attention(q[0], q[0], q[0], 4, "
                  "2, w, w[:, 0], w[:4], w[:4, 0])",
    "native mha, nested": "n = torch.nested.nested_tensor([q[0, 0], q[0, 1]]); w = torch.randn(12, 4); "
                          "torch._native_multi_head_attention(n, n, n, 4, 2, w, w[:, 0], w[:4], "
                          "w[:4, 0])",
    "onnx reference attention": "import torch.onnx.ops as o; o.attention(q, q, q, "
                                "softmax_precision=1)",
}
HAND_WRITTEN = """
def attend(q, k, v):
    s = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ v
m = q.to("meta")
print("meta", list(attend(m, m, m).shape))
print("vmap", list(torch.vmap(lambda a: attend(a, a, a))(q).shape))
"""


def test_every_kernel_of_torchs_attention_is_refused_in_a_prepared_worker():
    script = "\n".join([
        "import sys, warnings; warnings.simplefilter('ignore'); "
        "sys.path.insert(0, 'grader/sandbox/runtime')",
        "import worker; torch = worker.prepare()",
        "q = torch.randn(2, 3, 5, 4)",
        "for name, code in %r.items():" % ROUTES,
        "    try:",
        "        exec(code)",
        "        print('WORKS', name)",
        "    except Exception as exc:",
        "        print(type(exc).__name__, name)",
        "    torch._C._set_grad_enabled(True)",
        HAND_WRITTEN,
    ])
    done = subprocess.run([sys.executable, "-I", "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert sorted(lines[:-2]) == sorted(f"LibraryAttentionDisabled {n}" for n in ROUTES)
    assert lines[-2:] == ["meta [2, 3, 5, 4]", "vmap [2, 3, 5, 4]"]  # the hand-written kind runs


def _block(path, d_model=12, heads=3, max_len=8):
    return load_file(path, "sealed").CausalSelfAttention(d_model, heads, max_len)


@pytest.mark.parametrize("path", sorted(Path(p) for p in glob.glob(str(ROOT / "tests" / "submissions"
                                                                        / "correct" / "*.py"))),
                         ids=lambda p: p.stem)
def test_no_block_written_the_ordinary_way_is_called_tampered(path):
    description = contract.describe(_block(path), 12)
    assert description["tampered"] == []
    assert description["mask"]["registered"] == "buffer"


@pytest.mark.parametrize("name,seen", [
    ("tamper_dict_descriptor", "_Presentable.__dict__"),
    ("tamper_dict_descriptor_swapped", "CausalSelfAttention.__dict__"),
    ("tamper_shadow_registries", "CausalSelfAttention._parameters"),
])
def test_a_class_between_the_registries_and_their_reader_is_tampering(name, seen):
    block = _block(IMITATIONS / f"{name}.py")
    description = contract.describe(block, 12)
    assert seen in description["tampered"]
    if name != "tamper_shadow_registries":  # the true __dict__ is read: the mask is a parameter
        assert description["mask"]["registered"] == "parameter"


def test_a_registry_that_is_no_plain_dict_or_no_module_is_tampering():
    block = _block(ROOT / "solutions" / "attention.py")

    class Quiet(dict):
        pass

    vars(block)["_parameters"] = Quiet(vars(block)["_parameters"])
    vars(block)["_modules"]["odd"] = object()
    assert contract.tampering(block) == ["self._parameters is a Quiet", "self.odd is no nn.Module"]


# A student's file that looks for what the worker relies on, the way a tamper would: reader tables
# among the main module's globals (and one module deeper), the runtime's modules in sys.modules or
# by import; and it patches the `wire` it finds to forge every reply.  The judge reads what it
# found back as a constant, and asks for a description that a patched wire would have forged.
PROBE = '''
import importlib
import sys

def _tables(namespace, depth=0):
    for name, value in list(vars(namespace).items()):
        if isinstance(value, dict) and value and (callable(value.get("describe")) or any(
                isinstance(v, dict) and callable(v.get("describe")) for v in list(value.values()))):
            yield name
        elif depth == 0 and type(value) is type(sys) and value is not sys:
            yield from (f"{name}.{inner}" for inner in _tables(value, depth + 1))

def _importable(name):
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False

RUNTIME = ("wire", "syscalls", "contract", "placement", "copytask", "limits", "worker")
FOUND = {
    "tables": sorted(_tables(sys.modules["__main__"])),
    "in_sys_modules": sorted(n for n in RUNTIME if n in sys.modules),
    "importable": sorted(n for n in RUNTIME if _importable(n)),
    "main_names": sorted(n for n in ("CONTRACT", "Server", "wire", "_PREPARED")
                         if getattr(sys.modules["__main__"], n, None)),
}

def _forge(public):
    real_dumps, real_encode = public._DUMPS, public.encode

    def dumps(tree):
        return real_dumps(tree).replace('"buffer"', '"forged"')

    def encode(obj):
        return real_encode({"forged": True})

    public._DUMPS, public.encode = dumps, encode

if "wire" in sys.modules:
    _forge(sys.modules["wire"])
'''


def _found(tmp_path, start):
    folder = tmp_path / start
    folder.mkdir()
    source = (ROOT / "solutions" / "attention.py").read_text(encoding="utf-8") + PROBE
    (folder / "attention.py").write_text(source, encoding="utf-8")
    server = None if start == "cold" else zygotes.server("process")  # a cold worker, or forked
    if server is not None:
        server.wait_ready()
    sub, student = grading.start(str(folder), "process", None,
                                 forked(server) if server is not None else None)
    try:
        found = student.constants(["FOUND"])["FOUND"]
        block = student.module(12, 3, 8)
        described = block.contract("describe", d_model=12)  # the readers still answer
    finally:
        student.close()
        sub.cleanup()
    return found, described


@pytest.mark.parametrize("start", ["cold", "fork"])
def test_nothing_the_verdict_relies_on_is_reachable_by_a_module_attribute(tmp_path, start):
    if start != "cold" and not forkserver.supported("process"):
        pytest.skip("no fork server here")
    found, described = _found(tmp_path, start)
    assert found == {"tables": [], "in_sys_modules": ["wire"], "importable": ["wire"],
                     "main_names": []}
    assert described["tampered"] == [] and described["mask"]["registered"] == "buffer"

