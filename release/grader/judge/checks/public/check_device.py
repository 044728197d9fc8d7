"""Public checks that the code runs where the student's model will run: `attend` and the block on
a device other than the CPU, the block in float64 and in bfloat16.

The devices: `meta` on every machine (torch runs each operation for shapes and dtypes only, and
refuses a tensor of another device, as a GPU would), and CUDA where the worker has one; where
CUDA ran, its verdict decides.  Only a device mismatch is a device mistake: code that cannot run
on `meta` for another reason (`.item()`) is not judged there, and the check says so and costs
nothing.  Only a dtype the student's code forced is a dtype mistake.  No point without attention:
the CPU run must first show weights that follow q·kᵀ (what is wrong there is the other cards').
"""
import ast
import re

import pytest
import torch

from grader.judge.checks.scan import device_probes
from grader.judge.student import StudentError
from grader.judge.checks.public.check_attend import attend_judged, attention_gate, fresh_qkv
from grader.judge.checks.public.check_module import (B, D, H, MAX_LEN, T, fresh_weights,
                                                     inject_args, layout, y_and_weights)
from grader.judge.checks.support import (Verdict, causal_mask, for_the_runner, fresh_randn, note,
                                         same, same_answer, shaped, weights_factor)

# What torch says when tensors of two devices meet (meta; CUDA).
DEVICE_MISMATCH = re.compile(r"not on the expected device|same device|at least two devices|"
                             r"different from other tensors|on cpu, different from")
# A meta tensor's values copied out: by .cpu() / .to("cpu"), or written into a tensor made on
# the CPU (`out[..., h] = ...`), which on CUDA fails too, where the CPU tensor meets a CUDA one;
# but also .tolist() or .numpy(), which run on CUDA: only the first two are device mistakes.
COPIED_OUT = re.compile(r"copy out of meta")
TO_CPU = re.compile(r"\.cpu\(|[\"']cpu[\"']|\]\s*(=[^=]|\+=|-=|\*=)|\.copy_\(")
# What it says when tensors of two float dtypes meet in one operation.
DTYPE_MISMATCH = re.compile(r"dtype|scalar type|(Float|Double|BFloat16|Half)\b.*\b(Float|Double|"
                            r"BFloat16|Half)\b|(float|double|bfloat16|half) != ", re.I)


def copied_to_cpu(exc):
    """The student's line copies a device tensor into a CPU one (see TO_CPU)."""
    return bool(COPIED_OUT.search(exc.message)) and bool(TO_CPU.search(exc.code))


class NotJudged(Exception):
    """The code could not run here for a reason that is not the student's mistake."""

    def __init__(self, key, **fields):
        self.key, self.fields = key, fields
        super().__init__(key)


def unprobed(student):
    """A Verdict where the code asks which device it runs on (scan.device_probes): its point
    would rest on where the judge runs it, not on what the student's own GPU does."""
    probes = device_probes(student.source())
    if probes:
        raise Verdict("device_probing", what=", ".join(probes))


def decide(outcomes, record_note):
    """One verdict from {device: None (ran right) | Verdict | NotJudged}: CUDA decides where it
    ran and could judge, else meta; a NotJudged is said and costs nothing.  Where both found a
    device mistake, meta's words are told: the same words whichever machine grades, and only
    meta names the line that copied a tensor out (on CUDA the copy runs and fails later)."""
    judged = {d: o for d, o in outcomes.items() if not isinstance(o, NotJudged)}
    deciding = judged["cuda"] if "cuda" in judged else judged.get("meta")
    if isinstance(deciding, Verdict):
        raise judged["meta"] if isinstance(judged.get("meta"), Verdict) else deciding
    if judged:
        return
    for outcome in outcomes.values():
        note(record_note, outcome.key, **outcome.fields)


def student_raised(exc, device):
    """A StudentError on `device` as a verdict's fields, or NotJudged when it was no mismatch."""
    if for_the_runner(exc):
        raise exc
    if not (DEVICE_MISMATCH.search(exc.message) or copied_to_cpu(exc)):
        raise NotJudged("device_not_judged", device=device, type=exc.type, message=exc.message)
    return {"device": device, "message": exc.message, "where": exc.where(),
            "copied": copied_to_cpu(exc)}


def placed(result, what, device, dtype=None):
    """One tensor as the worker describes it (placement.describe), checked for its device and
    dtype; its values (None on meta)."""
    if not isinstance(result, dict) or "device" not in result:
        raise Verdict("wrong_type", expected=f"{what}: Tensor", got=str((result or {}).get("type")))
    if result["device"] != device:
        raise Verdict("wrong_device", what=what, expected=device, got=str(result["device"]))
    if dtype and result.get("dtype") != dtype:
        raise Verdict("dtype_forced", expected=dtype, seen=f"{what}: {result.get('dtype')}")
    return result.get("value")


def pair(result):
    items = result.get("items") if isinstance(result, dict) else None
    if not (isinstance(items, list) and len(items) == 2):
        raise Verdict("wrong_type", expected="(context, weights)", got=str(result))
    return items


def same_values(got, expected, device):
    """On a device with values (CUDA), they must be the CPU's."""
    if got is not None and not same(got, expected, atol=1e-4, rtol=1e-3):
        raise Verdict("device_values", device=device)


# -- attend.device ------------------------------------------------------------------------------
@pytest.mark.check("attend.device")
def test_attend_runs_on_the_inputs_device(student, seed, record_note):
    unprobed(student)
    q, k, v = fresh_qkv(seed, 700)
    try:
        context, weights = attend_judged(student, q, k, v)
        attention_gate(context, weights, q, k, v, causal_mask(T))
    except Verdict:
        raise Verdict("device_unobserved") from None  # the other attend cards say what it is
    decide({device: attend_outcome(student, device, q, k, v, context, weights)
            for device in student.devices()}, record_note)


def attend_outcome(student, device, q, k, v, context, weights):
    try:
        try:
            items = pair(student.call_on("attend", device, q, k, v, return_weights=True))
        except StudentError as exc:
            fields = student_raised(exc, device)
            raise _attend_mismatch(student, device, q, k, v, fields) from None
        same_values(placed(items[0], "context", device), context, device)
        same_values(placed(items[1], "weights", device), weights, device)
    except (Verdict, NotJudged) as outcome:
        return outcome
    return None


def _attend_mismatch(student, device, q, k, v, fields):
    """Which tensor stayed on the CPU: the mask attend made itself where attend runs given one on
    the device, else another tensor made inside attend."""
    if fields.pop("copied", False):
        return Verdict("attend_copied_to_cpu", **fields)
    try:
        student.call_on("attend", device, q, k, v, mask=causal_mask(T), return_weights=True)
    except StudentError:
        return Verdict("attend_tensor_on_cpu", **fields)
    return Verdict("mask_without_device", **fields)


# -- module.device ------------------------------------------------------------------------------
def heads(x, matrix, bias=None):
    """x [B,T,D] through one projection [D,D] (and the student's bias, module.param_count's
    mistake), split into heads: [B,H,T,d] (float64)."""
    y = x.double() @ matrix.double().T
    if type(bias) is torch.Tensor and bias.shape == (D,):
        y = y + bias.double()
    return y.reshape(B, T, H, D // H).transpose(1, 2)


def new_block(student, weights):
    """(a new block, inject's answer for `weights`): the caller judges the layout after its
    calls on the block."""
    module = student.module(D, H, MAX_LEN)
    return module, module.contract("inject", **inject_args(weights))


def block_on_cpu(student, seed, salt):
    """Fresh weights and an input, once a block holding them has shown on the CPU weights that
    follow q·kᵀ of the judge's own projections."""
    weights = fresh_weights(seed, salt)
    x = fresh_randn(B, T, D, seed=seed, salt=salt + 10)
    try:
        module, kind = new_block(student, weights)
        out = module(x, return_weights=True)
    except StudentError as exc:  # the block cannot even be built or run (module.shapes says why)
        raise (exc if for_the_runner(exc) else Verdict("device_unobserved")) from None
    read = module.contract("read", d_model=D)  # the reading's own error is the check's
    try:
        layout(module, kind)
        _, w = y_and_weights(out, x)
        shaped(w, [B, H, T, T])
    except StudentError as exc:  # describe's, naming what the names hold
        raise (exc if for_the_runner(exc) else Verdict("device_unobserved")) from None
    except Verdict:
        raise Verdict("device_unobserved") from None  # the other module cards say what it is
    biases = read if isinstance(read, dict) else {}
    q, k = (heads(x, weights[i], biases.get("bias_" + p)) for i, p in enumerate("qk"))
    if weights_factor(w, q, k, causal_mask(T)) is None:
        raise Verdict("device_unobserved")
    return weights, x


@pytest.mark.check("module.device")
def test_block_runs_where_it_was_moved(student, seed, record_note):
    unprobed(student)
    weights, x = block_on_cpu(student, seed, 720)
    decide({device: block_outcome(student, weights, device, x, seed)
            for device in student.devices()}, record_note)


def function_at(source, line):
    """The name of the innermost function of the student's source that holds `line`, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    holding = [node for node in ast.walk(tree)
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and line is not None
               and node.lineno <= line <= (node.end_lineno or node.lineno)]
    return max(holding, key=lambda node: node.lineno).name if holding else None


def _block_mismatch(student, exc, device, placement, seed):
    """Which tensor stayed behind: the mask .to() did not move, another tensor it did not move
    (named where the failing line reads it or where it is the only one), one attend makes (where
    attend alone fails on the device), one copied to the CPU, or one made in forward."""
    fields = student_raised(exc, device)
    copied = fields.pop("copied")
    if not placement["moved"]:
        return Verdict("mask_not_moved", **fields)
    left = [n for n in placement["left"] if isinstance(n, str)]
    read = [n for n in left if re.search(rf"\b{re.escape(n.split('.')[-1])}\b", exc.code)]
    if read or len(left) == 1:
        return Verdict("tensor_not_moved", name=(read or left)[0], **fields)
    if function_at(student.source(), exc.line) == "attend":
        q, k, v = fresh_qkv(seed, 760)
        try:
            student.call_on("attend", device, q, k, v, return_weights=True)
        except StudentError:
            return _attend_mismatch(student, device, q, k, v, dict(fields, copied=copied))
    if copied:
        return Verdict("copied_to_cpu", **fields)
    return Verdict("forward_tensor_on_cpu", **fields)


def block_outcome(student, weights, device, x, seed):
    """A new block holding `weights`, moved to `device` and run there.  On CUDA its values must be
    this very block's on the CPU, asked before it moved; a block that answers the CPU differently
    twice is random (other cards name it) and its values are not compared, as on meta: a GPU
    takes no point a CPU-only machine gives."""
    module, kind = new_block(student, weights)
    cpu = [module.contract("forward_on", x=x, device="cpu")
           for _ in range(0 if device == "meta" else 2)]
    answer = module.contract("place", device=device)
    answer = answer if isinstance(answer, dict) else {}
    mask, before = answer.get("mask"), answer.get("mask_before")
    # Is the mask on `device` (or is there none); the names of the tensors .to() did not move.
    placement = {"moved": not isinstance(mask, dict) or mask.get("device") == device,
                 "left": answer.get("left") if isinstance(answer.get("left"), list) else []}
    try:
        try:
            items = module.contract("forward_on", x=x, device=device)
        except StudentError as exc:
            steady_answer(cpu, ("y", "weights"))
            raise _block_mismatch(student, exc, device, placement, seed) from None
        layout(module, kind)
        expected = steady_answer(cpu, ("y", "weights"))
        items = pair(items)
        if not placement["moved"]:
            raise Verdict("mask_not_moved", device=device, message="—", where="self.mask")
        # Still bool where it was (a mask of another dtype is module.mask_buffer's to judge).
        if isinstance(mask, dict) and isinstance(before, dict) and before.get("dtype") == "bool" \
                and mask.get("dtype") != "bool":
            raise Verdict("wrong_type", expected="self.mask: bool", got=str(mask.get("dtype")))
        got = [placed(item, what, device) for item, what in zip(items, ("y", "weights"))]
        for value, want in zip(got, expected or ()):
            same_values(value, want, device)
    except (Verdict, NotJudged) as outcome:
        return outcome
    return None


def steady_answer(answers, kept):
    """The two CPU answers of forward_on as a tuple of the `kept` items' values; None where none
    was asked or the two differ (random: named by other cards)."""
    if not answers:
        return None
    values = [tuple(placed(items[i], what, "cpu") for i, what in enumerate(kept))
              for items in map(pair, answers)]
    return values[0] if same_answer(values[0], values[1]) else None


# -- module.dtype -------------------------------------------------------------------------------
@pytest.mark.check("module.dtype")
def test_block_follows_its_dtype(student, seed, record_note):
    weights, x = block_on_cpu(student, seed, 740)
    outcomes = [dtype_outcome(student, weights, dtype, x) for dtype in ("float64", "bfloat16")]
    for outcome in outcomes:
        if isinstance(outcome, Verdict):
            raise outcome
    for outcome in filter(None, outcomes):  # NotJudged: said, costing nothing
        note(record_note, outcome.key, **outcome.fields)


def dtype_outcome(student, weights, dtype, x):
    """A new block holding `weights`, its float32 y asked twice, then block.to(dtype) on an input
    of that dtype: y and weights of that dtype; in float64, the values it gave in float32."""
    module, kind = new_block(student, weights)
    cpu = [module.contract("forward_on", x=x, device="cpu") for _ in range(2)]
    module.contract("place", dtype=dtype)
    try:
        try:
            items = module.contract("forward_on", x=x, device="cpu", dtype=dtype)
        except StudentError as exc:
            steady_answer(cpu, ("y",))  # its verdict first, as asked first
            if for_the_runner(exc):
                raise
            if not DTYPE_MISMATCH.search(exc.message):
                raise NotJudged("dtype_not_judged", dtype=dtype, type=exc.type,
                                message=exc.message) from None
            raise Verdict("dtype_forced", expected=dtype,
                          seen=f"{exc.type}: {exc.message} ({exc.where()})") from None
        layout(module, kind)
        float32 = steady_answer(cpu, ("y",))  # None: random (only values need it steady)
        items = pair(items)
        got = placed(items[0], "y", "cpu", dtype)
        placed(items[1], "weights", "cpu", dtype)
        if dtype == "float64" and float32 is None:
            raise NotJudged("not_judged_random")
        if dtype == "float64" and not same(got, float32[0]):
            raise Verdict("dtype_values", dtype=dtype)
    except (Verdict, NotJudged) as outcome:
        return outcome
    return None
