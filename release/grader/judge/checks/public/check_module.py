"""Public checks of CausalSelfAttention: 4·D² bias-free parameters in either layout, the mask
buffer, shapes, ValueErrors, causality, and attention written by hand."""
import ast

import pytest
import torch

from grader.judge.student import StudentError
from grader.judge.checks.support import (Verdict, causal_mask, close, expect_student_error, fmt, leak_map, randn,
                       shaped, tensor, weights_diagnosis)

B, T, D, H, MAX_LEN = 2, 5, 12, 3, 8
FUSED = {"qkv.weight": [3 * D, D], "out_proj.weight": [D, D]}
SEPARATE = {f"{p}.weight": [D, D] for p in ("q_proj", "k_proj", "v_proj", "out_proj")}


def layout(description):
    """'fused' or 'separate' from the parameter names and shapes, or a Verdict."""
    params = {name: shape for name, shape, _ in description["params"]}
    biases = [n for n in params if n.endswith("bias")]
    if biases:
        raise Verdict("bias", got=", ".join(biases))
    for name, expected in (("fused", FUSED), ("separate", SEPARATE)):
        if all(params.get(p) == s for p, s in expected.items()):
            return name
    raise Verdict("unknown_layout", got=", ".join(f"{n}{s}" for n, s in params.items()) or "none")


@pytest.mark.check("module.param_count")
def test_parameter_count(student):
    description = student.module(D, H, MAX_LEN).describe()
    count = sum(_numel(shape) for _, shape, _ in description["params"])
    if count != 4 * D * D:
        causes = {3 * D * D: "少了输出投影？/ out_proj missing?",
                  4 * D * D + 4 * D: "带了偏置？/ biases?",
                  4 * D * D + MAX_LEN * MAX_LEN: "mask 是参数？/ mask registered as a parameter?",
                  (3 * H + 1) * D * D: "每个头各有一个 D×D 投影？/ a full D×D projection per head?"}
        raise Verdict("param_count", expected=4 * D * D, got=count, cause=causes.get(count, ""),
                      detail=f"D={D}: parameters " + ", ".join(
                          f"{n}{s}" for n, s, _ in description["params"]))
    layout(description)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@pytest.mark.check("module.mask_buffer")
def test_mask_is_a_buffer(student):
    module = student.module(D, H, MAX_LEN)
    description = module.describe()
    buffers = {b[0]: b for b in description["buffers"]}
    params = [p[0] for p in description["params"]]
    if "mask" not in buffers:
        where = "它是参数 / it is a parameter." if "mask" in params else \
            "没有名为 mask 的 buffer / no buffer named mask."
        raise Verdict("mask_not_buffer", got=where)
    _, shape, dtype, _, _ = buffers["mask"]
    if shape != [MAX_LEN, MAX_LEN] or dtype != "bool":
        raise Verdict("wrong_shape", expected=f"bool{[MAX_LEN, MAX_LEN]}", got=f"{dtype}{shape}")
    mask = tensor(module.buffer("mask"))
    if not torch.equal(mask, causal_mask(MAX_LEN)):
        raise Verdict("mask_anti_causal" if torch.equal(mask, causal_mask(MAX_LEN).T) else
                      "wrong_values", where="mask ", expected="tril(ones)", got=fmt(mask[:3, :3]),
                      detail=f"mask[:3, :3] = {fmt(mask[:3, :3])}, expected [[1,0,0],[1,1,0],[1,1,1]]")


@pytest.mark.check("module.mask_buffer")
def test_mask_moves_with_to(student):
    moved = student.module(D, H, MAX_LEN).to_meta()
    devices = {b[0]: b[3] for b in moved["buffers"]}
    if devices.get("mask") != "meta":
        raise Verdict("mask_not_buffer", got=f"after .to('meta') mask is on {devices.get('mask')}")


@pytest.mark.check("module.shapes")
@pytest.mark.parametrize("t", [T, MAX_LEN, 1])
def test_forward_shapes(student, t):
    module = student.module(D, H, MAX_LEN)
    x = randn(B, t, D, seed=80 + t)
    try:
        y = module(x)
    except StudentError as exc:
        if t < MAX_LEN and not exc.not_implemented and _full_length_works(module):
            raise Verdict("mask_not_cropped", message=exc.message) from None
        raise
    shaped(y, [B, t, D], f"forward(x[{B},{t},{D}])")
    out = module(x, return_weights=True)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(y, weights)", got=type(out).__name__)
    shaped(out[0], [B, t, D], "y")
    weights = tensor(out[1])
    if list(weights.shape) == [B, t, t]:
        raise Verdict("weights_averaged", detail=f"weights shape {list(weights.shape)}")
    shaped(weights, [B, H, t, t], "weights")


def _full_length_works(module):
    try:
        module(randn(1, MAX_LEN, D, seed=89))
        return True
    except StudentError:
        return False


@pytest.mark.check("module.errors")
@pytest.mark.parametrize("heads", [5, 0, -2])
def test_bad_heads(student, heads):
    try:
        expect_student_error(lambda: student.module(D, heads, MAX_LEN),
                             f"CausalSelfAttention({D}, {heads})")
    except Verdict as verdict:
        if heads < 0 and verdict.key in ("no_error", "wrong_error"):
            raise Verdict("negative_heads") from None
        raise


@pytest.mark.check("module.errors")
def test_too_long(student):
    module = student.module(D, H, MAX_LEN)
    expect_student_error(lambda: module(randn(1, MAX_LEN + 1, D, seed=90)),
                         f"forward(x[1,{MAX_LEN + 1},{D}]) with max_len={MAX_LEN}")


@pytest.mark.check("module.causal")
def test_module_is_causal(student):
    module = student.module(D, H, MAX_LEN)
    x = randn(B, T, D, seed=91)
    x2 = x.clone()
    x2[:, 3:] += 2.0
    y1 = shaped(module(x), [B, T, D], "forward(x)")
    y2 = shaped(module(x2), [B, T, D], "forward(x')")
    if not close(y1[:, :3], y2[:, :3]):
        out = module(x, return_weights=True)
        weights = out[1] if isinstance(out, tuple) and len(out) == 2 else None
        allowed = causal_mask(T)
        key, heat = "mask_missing", ""
        if type(weights) is torch.Tensor and list(weights.shape) == [B, H, T, T]:
            key = weights_diagnosis(weights, allowed) or key
            heat = leak_map(weights, allowed)
        raise Verdict(key, heatmap=heat, detail=f"x changed from position 3 on: y[0, 2] moved "
                      f"from {fmt(y1[0, 2, :3])}… to {fmt(y2[0, 2, :3])}…")


FORBIDDEN_NAMES = {"scaled_dot_product_attention": "F.scaled_dot_product_attention",
                   "MultiheadAttention": "nn.MultiheadAttention"}


@pytest.mark.check("module.no_library_attention")
def test_attention_by_hand(student):
    try:
        tree = ast.parse(student.source())
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    used = sorted({FORBIDDEN_NAMES[n] for node in ast.walk(tree)
                   for n in _names(node) if n in FORBIDDEN_NAMES})
    module = student.module(D, H, MAX_LEN)
    module(randn(1, T, D, seed=92))
    student.attend(*(randn(1, T, 4, seed=93 + i) for i in range(3)))
    runtime = student.forbidden_uses()
    used += [u for u in (runtime if isinstance(runtime, list) else []) if u not in used]
    if used:
        raise Verdict("forbidden", what=", ".join(str(u) for u in used))


def _names(node):
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.alias):
        yield node.name.split(".")[-1]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
