"""Hidden checks of CausalSelfAttention against the reference block, with the judge's weights
written through the contract's names: outputs and weights with the named mistakes, gradients,
and learning the copy task.  The outputs and weights compared are the answers the public checks'
blocks already gave (questions.keep): module.reference asks nothing of its own."""
import contextlib

import pytest
import torch

from grader.sandbox.runtime import copytask
from grader.judge.student import StudentError, WorkerFailure
from grader.judge.secret.variants import (block, module_candidates, module_variant_blocks,
                                          reference_for)
from grader.judge.checks import questions
from grader.judge.checks.public.check_module import (B, D, FOUR, H, MAX_LEN, T, fresh_weights,
                                                     inject, randomness_first, run, run_weights,
                                                     shaped, unknown_layout, y_and_weights)
from grader.judge.checks.support import (Verdict, close, differing, expect_close, fmt, fresh,
                                         fresh_randn, tensor)


def biases(learned):
    """{q, k, v, o} -> bias read through the contract's names, or None (the lesson has none)."""
    if isinstance(learned, dict) and all(type(learned.get("bias_" + p)) is torch.Tensor
                                         for p in "qkvo"):
        return {p: learned["bias_" + p].float() for p in "qkvo"}
    return None


def candidates(module, x, w, part):
    """The named mistakes' (name, y or weights: `part` 0 or 1) for the judge's weights and the
    student's own biases."""
    try:
        learned = module.contract("read", d_model=D)
    except WorkerFailure:  # the block's worker is gone since it answered: its biases unread
        learned = None
    named = module_candidates(x, *w, H, MAX_LEN, biases(learned))
    return [(name, out[part]) for name, out in named]


def ordinary_forwards(student, seed, return_weights):
    """The kept answers of forward with (or without) its weights on blocks holding the judge's
    weights, in the order given.  Where none was kept, module.causal's question is asked here as
    it asks it (the judge's weights written strictly)."""
    forwards = questions.book(student).forwards
    if not any(f.return_weights == return_weights for f in forwards.values()):
        module = student.module(D, H, MAX_LEN)
        inject(module, fresh_weights(seed, 85))
        x = fresh_randn(B, T, D, seed=seed, salt=80)
        randomness_first(student, module, x)
        run_weights(module, x, keep=True)
    wanted = [f for f in forwards.values() if f.return_weights == return_weights]
    # Blocks that still hold the weights they answered with first: a mistake is named from what
    # the block holds now (its biases), and a block redrawn since holds other biases.
    return sorted(wanted, key=lambda f: getattr(f.module, "holding", None) is not f.weights)


def expect_ordinary_outputs(student, seed, check):
    """Every kept y (forward without its weights first, then with) equals the reference block's
    holding the same weights, or the first Verdict; each is marked compared by `check`."""
    for answer in ordinary_forwards(student, seed, False) + ordinary_forwards(student, seed, True):
        answer.compared.add(check)
        module, w, x = answer.module, answer.weights, answer.x
        y = y_and_weights(answer.answer, x)[0] if answer.return_weights else answer.answer
        with torch.no_grad():
            expected = block("reference", *w, H, MAX_LEN)(x)
        with telling_qkv_from_scores(student, seed), \
                naming_unused_projections(module, w, x, y, seed):
            expect_close(y, expected, "y = forward(x)", lambda: candidates(module, x, w, 0))


@pytest.mark.check("module.reference")
def test_output_matches_reference(student, seed):
    expect_ordinary_outputs(student, seed, "module.reference")


@pytest.mark.check("module.reference")
def test_weights_match_reference(student, seed):
    for answer in ordinary_forwards(student, seed, True):
        answer.compared.add("module.reference")
        module, w, x = answer.module, answer.weights, answer.x
        with torch.no_grad():
            _, expected = block("reference", *w, H, MAX_LEN)(x, return_weights=True)
        _, got = y_and_weights(answer.answer, x)
        if list(got.shape) == [B, T, T] and close(got, expected.mean(dim=1)):
            raise Verdict("weights_averaged")
        with telling_qkv_from_scores(student, seed):
            expect_close(got, expected, "weights [B,H,T,T]", lambda: candidates(module, x, w, 1))


@contextlib.contextmanager
def naming_unused_projections(module, w, x, y, seed):
    """Values no named mistake explains: a new W_q, W_k or W_v alone (written through the
    contract's names) that leaves the output unchanged is a projection forward never uses."""
    try:
        yield
    except Verdict as verdict:
        if verdict.key != "wrong_values":
            raise
        others = fresh_weights(seed, 230)
        unused = []
        try:
            for part, name in enumerate(("W_q", "W_k", "W_v")):
                inject(module, [others[i] if i == part else w[i] for i in range(4)])
                if close(run(module, x), y):
                    unused.append(name)
            inject(module, w)
        except (StudentError, WorkerFailure):
            raise verdict from None  # the block cannot be asked again (its worker restarted)
        if unused:
            raise Verdict("projections_unused", names=", ".join(unused)) from None
        raise


@contextlib.contextmanager
def telling_qkv_from_scores(student, seed):
    """In the block, q and k swapped (k | q | v) and scores k @ qᵀ give the same numbers: the
    student's own attend, on fresh input, tells which of the two it is."""
    try:
        yield
    except Verdict as verdict:
        if verdict.key != "qkv_order":
            raise
        q, k, v = (fresh_randn(1, H, T, D // H, seed=seed, salt=290 + i) for i in range(3))
        try:
            own = student.attend(q, k, v)
        except (StudentError, WorkerFailure):
            raise verdict from None
        if close(own, reference_for("scores_transposed").attend(q, k, v)):
            raise Verdict("scores_transposed", heatmap=verdict.heatmap, **verdict.fields) from None
        raise


@pytest.mark.check("module.gradients")
def test_gradients_match_reference(student, seed):
    w = fresh_weights(seed, 240)
    module = student.module(D, H, MAX_LEN)
    inject(module, w)
    module.holding = None  # its answers are this check's own question's: not kept for the others
    x = fresh_randn(B, T, D, seed=seed, salt=250)
    randomness_first(student, module, x)
    upstream = fresh_randn(B, T, D, seed=seed, salt=251)
    reference = block("reference", *w, H, MAX_LEN)
    (reference(x) * upstream).sum().backward()
    expected = dict(zip("qkv", reference.qkv.weight.grad.split(D)), o=reference.out_proj.weight.grad)
    try:
        grads = module.contract("grads", d_model=D, x=x, upstream=upstream)
    except StudentError as exc:
        if exc.not_implemented or exc.memory_limit or "grad" in exc.message:
            raise  # no gradient path at all is this check's own finding (no_grad_path)
        raise Verdict("cannot_run", type=exc.type, message=exc.message) from None
    if not isinstance(grads, dict) or "missing" in grads:
        missing = grads.get("missing") if isinstance(grads, dict) else None
        raise Verdict("wrong_values", where=f"{', '.join(map(str, missing or ['?']))}.grad ",
                      expected="Tensor", got="None")
    names = {"q": "W_q", "k": "W_k", "v": "W_v", "o": "out_proj.weight"}
    for part, grad in expected.items():
        expect_close(grads.get(part), grad, f"{names[part]}.grad")
    # A backward pass is a question a submission can recognise (grad mode, a loss): the point
    # needs the ordinary answers of forward to be the reference's as well.
    expect_ordinary_outputs(student, seed, "module.gradients")


@pytest.mark.check("module.learns")
def test_learns_the_copy_task(student, seed):
    # About 0.1 s of training here; 20 s leaves room for a loaded grading machine.
    result = student.train_copy(seed=0, n_heads=copytask.N_HEADS, timeout=20)
    if not isinstance(result, dict) or not isinstance(result.get("state"), dict):
        raise Verdict("wrong_type", expected="{losses, state}", got=type(result).__name__)
    state = {k: tensor(v, k) for k, v in result["state"].items()}
    broken = sorted(k for k, v in state.items() if v.is_floating_point() and
                    not bool(torch.isfinite(v).all()))
    if broken:  # every comparison after this would be NaN against NaN: say what happened
        raise Verdict("learn_diverged", got=", ".join(broken[:4]))
    lm = copytask.TinyLM(None)  # the kit's, with the trained embeddings and head (shapes checked)
    kit = {n: p.shape for n, p in lm.named_parameters()}
    if any(name not in state or state[name].shape != shape for name, shape in kit.items()):
        raise Verdict("wrong_shape", expected=sorted(kit), got=sorted(state))
    with torch.no_grad():
        for name in kit:
            lm.get_parameter(name).copy_(state[name])
    # The worker's losses are not trusted: the judge recomputes the loss on a batch of every id
    # (each counts once), in an order drawn for this grading, with the kit's embeddings and head
    # around a fresh instance of the student's block holding the trained weights, and checks that
    # block is attention with the weights it learned.
    ids, targets = copytask.every_id_batch(fresh(seed, 260))
    with torch.no_grad():
        h = lm.tok(ids) + lm.pos(torch.arange(ids.shape[1]))  # [B,T,D]
    attn = {k[len("attn."):]: v for k, v in state.items() if k.startswith("attn.")}
    made_with = [copytask.D_MODEL, copytask.N_HEADS, copytask.CONTEXT]
    trained = student.module(*made_with)
    trained.load(attn)
    out = shaped(run(trained, h), list(h.shape))  # [B,T,D], computed in the worker
    _is_attention(trained, h, out)
    with torch.no_grad():
        logits = lm.head(out)  # [B,T,vocab]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1)).item()
    if not loss < 1.0:
        losses = result.get("losses")
        text = fmt(torch.tensor(losses)) if isinstance(losses, list) and all(
            isinstance(v, (int, float)) for v in losses) else "?"
        raise Verdict("learn_failed", got=f"{loss:.3f}", losses=text)


def _is_attention(trained, h, out):
    """The trained block's output equals the reference block's (or a named mistake's) holding the
    projections read through the contract's names: a block that learned without attention (an
    identity, out_proj(x)) earns nothing here."""
    learned = trained.contract("read", d_model=copytask.D_MODEL)
    if not isinstance(learned, dict) or not all(type(learned.get(p)) is torch.Tensor
                                                for p in "qkvo"):
        raise unknown_layout(trained, copytask.D_MODEL)
    w = [learned[p].float() for p in "qkvo"]
    heads, context = copytask.N_HEADS, copytask.CONTEXT
    with torch.no_grad():
        expected = block("reference", *w, heads, context)(h)
    if close(out, expected, atol=1e-4, rtol=1e-3):
        return
    for _, variant in module_variant_blocks(*w, heads, context, biases=biases(learned)):
        with torch.no_grad():
            if close(out, variant(h), atol=1e-4, rtol=1e-3):
                return  # a named mistake, scored where it is named
    raise Verdict("learn_not_attention", **differing(out, expected, "y", number=FOUR))
