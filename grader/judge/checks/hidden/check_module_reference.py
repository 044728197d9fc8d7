"""Hidden checks of CausalSelfAttention: injected weights against the reference and the named
mistakes, gradients, and learning the copy task."""
import math

import pytest
import torch

from grader.sandbox.runtime import copytask
from grader.judge.secret.reference import ref
from grader.judge.secret.variants import module_candidates
from grader.judge.checks.public.check_module import layout
from grader.judge.checks.support import Verdict, close, expect_close, fmt, randn, shaped, tensor

B, T, D, H, MAX_LEN = 2, 5, 12, 3, 16


def weights(seed):
    """O(1/√D) weights: large enough that √D vs √d and other mistakes stand out."""
    return [randn(D, D, seed=seed + i) / math.sqrt(D) for i in range(4)]


def inject(student_module, wq, wk, wv, wo):
    kind = layout(student_module.describe())
    if kind == "fused":
        state = {"qkv.weight": torch.cat([wq, wk, wv]), "out_proj.weight": wo}
    else:
        state = {"q_proj.weight": wq, "k_proj.weight": wk, "v_proj.weight": wv,
                 "out_proj.weight": wo}
    student_module.load(state)
    return kind


def reference_module(wq, wk, wv, wo, heads=H, d_model=D):
    module = ref.CausalSelfAttention(d_model, heads, MAX_LEN)
    with torch.no_grad():
        module.qkv.weight.copy_(torch.cat([wq, wk, wv]))
        module.out_proj.weight.copy_(wo)
    return module


def injected(student, seed):
    """The student's block with known weights, the weights, and an input: (module, w, x)."""
    w = weights(seed)
    module = student.module(D, H, MAX_LEN)
    inject(module, *w)
    return module, w, randn(B, T, D, seed=seed + 10)


@pytest.mark.check("module.reference")
def test_output_matches_reference(student):
    module, w, x = injected(student, 200)
    with torch.no_grad():
        expected = reference_module(*w)(x)
    candidates = [(name, y) for name, (y, _) in module_candidates(x, *w, H)]
    expect_close(module(x), expected, "y = forward(x)", candidates)


@pytest.mark.check("module.reference")
def test_weights_match_reference(student):
    module, w, x = injected(student, 220)
    with torch.no_grad():
        _, expected = reference_module(*w)(x, return_weights=True)
    out = module(x, return_weights=True)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(y, weights)", got=type(out).__name__)
    got = tensor(out[1])
    if list(got.shape) == [B, T, T] and close(got, expected.mean(dim=1)):
        raise Verdict("weights_averaged", detail=f"weights shape {list(got.shape)}")
    candidates = [(name, wts) for name, (_, wts) in module_candidates(x, *w, H)]
    expect_close(got, expected, "weights [B,H,T,T]", candidates)


@pytest.mark.check("module.gradients")
def test_gradients_match_reference(student):
    w = weights(240)
    module = student.module(D, H, MAX_LEN)
    kind = inject(module, *w)
    x = randn(B, T, D, seed=250)
    upstream = randn(B, T, D, seed=251)
    reference = reference_module(*w)
    (reference(x) * upstream).sum().backward()
    expected = {"out_proj.weight": reference.out_proj.weight.grad}
    if kind == "fused":
        expected["qkv.weight"] = reference.qkv.weight.grad
    else:
        for name, block in zip(("q_proj", "k_proj", "v_proj"), reference.qkv.weight.grad.split(D)):
            expected[f"{name}.weight"] = block
    grads = module.grads(x, upstream)
    for name, grad in expected.items():
        got = grads.get(name) if isinstance(grads, dict) else None
        if got is None:
            raise Verdict("wrong_values", where=f"{name}.grad ", expected="a gradient", got="None",
                          detail=f"{name} received no gradient")
        expect_close(got, grad, f"{name}.grad")


@pytest.mark.check("module.learns")
def test_learns_the_copy_task(student):
    # About 0.1 s of training here; 20 s leaves room for a loaded grading machine.
    result = student.train_copy(seed=0, n_heads=copytask.N_HEADS, timeout=20)
    if not isinstance(result, dict) or not isinstance(result.get("state"), dict):
        raise Verdict("wrong_type", expected="trained weights", got=type(result).__name__)
    losses = result.get("losses")
    losses_text = fmt(torch.tensor(losses)) if isinstance(losses, list) and all(
        isinstance(v, (int, float)) for v in losses) else "?"
    state = {k: tensor(v, k) for k, v in result["state"].items()}
    # The loss the worker reports is not trusted: the judge recomputes it on a fresh batch.  The
    # embeddings and the LM head are the kit's (their trained weights must have the kit's
    # shapes); the block is the student's own, a fresh instance loaded with its trained weights,
    # so a block with another mistake (a scale, a q/k/v order) that trains fine passes here and
    # loses its points only where that mistake is named.
    lm = copytask.TinyLM(None)
    kit = {n: p.shape for n, p in lm.named_parameters()}
    if any(name not in state or state[name].shape != shape for name, shape in kit.items()):
        raise Verdict("wrong_shape", expected=sorted(kit), got=sorted(state))
    block = student.module(copytask.D_MODEL, copytask.N_HEADS, copytask.CONTEXT)
    block.load({k[len("attn."):]: v for k, v in state.items() if k.startswith("attn.")})
    with torch.no_grad():
        for name in kit:
            lm.get_parameter(name).copy_(state[name])
        ids, targets = copytask.repeat_batch(torch.Generator().manual_seed(777), batch=256)
        h = lm.tok(ids) + lm.pos(torch.arange(ids.shape[1]))  # [B,T,D]
        out = shaped(block(h), h.shape, "block(h)")  # [B,T,D], computed in the worker
        logits = lm.head(out)  # [B,T,vocab]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1)).item()
    if not loss < 1.0:
        raise Verdict("learn_failed", got=f"{loss:.3f}", losses=losses_text)
