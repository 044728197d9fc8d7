"""Public checks of CausalSelfAttention, on inputs and weights drawn fresh for each grading.

The block is reached through the contract's attribute names (`qkv` or `q_proj`/`k_proj`/`v_proj`,
`out_proj`, the buffer `mask`): the worker writes the judge's weights through them and reads
torch's own registries.  What the worker says is a claim; the points rest on forward's outputs
for inputs the judge chose.  Forward's answers on a block holding the judge's weights are kept
(questions.keep) for module.reference to compare.
"""
import math

import pytest
import torch

from grader.judge.student import StudentError, WorkerFailure
from grader.judge.checks import questions
from grader.judge.checks.scan import source_routes
from grader.judge.checks.support import (Verdict, causal_mask, close, expect_student_error,
                                         differing, fmt, for_the_runner, fresh_randn,
                                         leak_map, observed, same_answer, shaped, steady_call,
                                         tensor, weights_problem)

B, T, D, H, MAX_LEN = questions.B, questions.T, questions.D_MODEL, questions.H, questions.MAX_LEN
CUT = 3  # module.causal changes the input from this position on
FOUR = "{:.4f}".format  # how the block's cards write a number where they show a difference


def fresh_weights(seed, salt):
    """q, k, v, out [D, D] of size about 1/√D: large enough that √D vs √d stands out."""
    return [fresh_randn(D, D, seed=seed, salt=salt + i) / math.sqrt(D) for i in range(4)]


def run(module, x, return_weights=False, keep=False):
    """forward(x) in the worker; an error there becomes `cannot_run` (module.shapes reports it).
    `keep`: the block was already seen to answer steadily, so its answer is kept."""
    try:
        out = module(x, return_weights=return_weights)
    except StudentError as exc:
        if for_the_runner(exc):
            raise
        raise Verdict("cannot_run", type=exc.type, message=exc.message) from None
    if keep:
        kept(module, x, return_weights, out)
    return out


def kept(module, x, return_weights, out):
    """Keep a steady answer of forward on a block holding the judge's weights (inject; none
    redrawn since) for module.reference (questions.keep)."""
    student = getattr(module, "student", None)
    if student is not None and getattr(module, "holding", None) is not None:
        questions.keep(student, module.holding, x, return_weights, out, module)


def run_weights(module, x, keep=False):
    """(y [B,T,D], weights [..., T, T]) from forward(x, return_weights=True), or cannot_run."""
    return y_and_weights(run(module, x, return_weights=True, keep=keep), x)


def y_and_weights(out, x):
    """forward(x, return_weights=True)'s answer `out` as (y, weights), or cannot_run."""
    if not (isinstance(out, tuple) and len(out) == 2) or type(out[1]) is not torch.Tensor:
        raise Verdict("cannot_run", type="return_weights=True", message=type(out).__name__)
    weights = out[1]
    if weights.dim() < 2 or list(weights.shape[-2:]) != [x.shape[1]] * 2:
        raise Verdict("cannot_run", type="weights", message=str(list(weights.shape)))
    return shaped(out[0], list(x.shape)), weights


def inject(module, weights):
    """Write q, k, v, out through the contract's names; the layout, or a Verdict naming what the
    names hold.  The block then holds `weights` (module.holding: forward's answers are kept)."""
    module.holding = None
    kind = layout(module, module.contract("inject", **inject_args(weights)))
    module.holding = weights
    return kind


def inject_args(weights):
    """The contract's inject arguments for the judge's q, k, v, out weights [D, D]."""
    return {"d_model": D, "q": weights[0], "k": weights[1], "v": weights[2], "o": weights[3]}


def layout(module, kind):
    """inject's answer `kind` when it names a layout, else a Verdict naming what the names hold."""
    if kind not in ("fused", "separate"):
        raise unknown_layout(module, D)
    return kind


def unknown_layout(module, width):
    """A Verdict naming what the contract's names hold, by describe's reading."""
    found = describe(module, width).get("found")
    names = [n for n, ok in found.items() if ok is True] if isinstance(found, dict) else []
    return Verdict("unknown_layout", got=", ".join(names) or "—")


def describe(module, width=D):
    """What torch's registries hold (the worker's reading: a claim, used to name, never to score)."""
    description = module.contract("describe", d_model=width)
    return description if isinstance(description, dict) else {}


def _listed(params):
    """[(name, shape)] from the worker's reading, whatever came back."""
    if not isinstance(params, list):
        return []
    return [(str(p[0]), [int(s) for s in p[1]]) for p in params
            if isinstance(p, list) and len(p) == 2 and isinstance(p[1], list)
            and all(isinstance(s, int) for s in p[1])]


def described(student):
    """A new block and torch's registries as the worker reads them before forward ever runs.  A
    Verdict where that reading could be staged or forged: the source reaches into the grading
    process, the student's code tried a route the worker refused at run time, or the worker saw
    the block stand between torch's registries and a reader of them (contract.tampering; the
    words are the worker's)."""
    _, tamper = source_routes(student.source())
    tamper = tamper + student.refused()
    if tamper:
        raise Verdict("tampering", what=", ".join(tamper))
    module = student.module(D, H, MAX_LEN)
    description = describe(module)
    seen = description.get("tampered")
    if isinstance(seen, list) and seen:
        raise Verdict("tampering", what=", ".join(str(s)[:80] for s in seen[:4]))
    return module, description


# -- module.param_count ---------------------------------------------------------------------
# The count is judged from torch's registries; forward's behaviour adds evidence where it runs
# steadily, and never takes points from a right count because it fails.
@pytest.mark.check("module.param_count")
def test_parameter_count(student, seed):
    module, description = described(student)
    params = _listed(description.get("params"))
    count = sum(math.prod(shape) for _, shape in params)
    biases = [(n, s) for n, s in params if len(s) == 1 and n.split(".")[-1] == "bias"]
    if biases and count - sum(math.prod(s) for _, s in biases) == 4 * D * D:
        raise Verdict("bias", where="", got=", ".join(f"{n}{s}" for n, s in biases))
    masks = [(n, s) for n, s in params if n == "mask"]
    if masks and count - math.prod(masks[0][1]) == 4 * D * D:
        raise Verdict("mask_parameter", expected=4 * D * D, got=count)
    if count != 4 * D * D:
        raise Verdict("param_count", expected=4 * D * D, got=count,
                      params=", ".join(f"{n}{s}" for n, s in params))
    _behaviour_agrees_with_count(module, seed, description)


def _behaviour_agrees_with_count(module, seed, description):
    """Where forward runs and answers the same twice: no output for an all-zero input (a bias
    kept outside the registries), and no parameter outside the projections moves the output."""
    weights = fresh_weights(seed, 10)
    x = fresh_randn(B, T, D, seed=seed, salt=20)
    y = injected_steady(module, weights, x)
    # An all-zero input's answer is not kept: zero scores are another question (attend.zero_scores)
    zero = steady(module, torch.zeros(B, T, D), keep=False) if y is not None else None
    if y is None or zero is None:
        return
    # A bias outside the registries answers it with one vector at every batch and position (what
    # differs by position, a positional encoding, is no bias).
    rows = zero.reshape(-1, zero.shape[-1]).double()
    if zero.abs().max() > 0 and bool(((rows - rows[0]).abs() <= 1e-6 + 1e-4 * rows[0].abs()).all()):
        raise Verdict("bias", where="max |forward(0)| = ", got=f"{zero.abs().max().item():.4f}")
    after = injected_steady(module, weights, x, scramble=seed)
    if after is not None and not _unmoved(after, y):
        registered = (description.get("mask") or {}).get("registered")
        key = "mask_trained" if registered == "parameter" else "extra_parameter"
        raise Verdict(key, **differing(after, y, "y", number=FOUR))


def steady(module, x, return_weights=False, keep=True):
    """forward(x) [, weights] when it runs and answers the same twice (kept unless `keep` is
    False); None when it cannot be observed or is random (named elsewhere)."""
    def checked(out):
        return y_and_weights(out, x) if return_weights else shaped(out, list(x.shape))

    answers = observed(lambda: [run(module, x, return_weights) for _ in range(2)])
    both = observed(lambda: [checked(answer) for answer in answers]) if answers else None
    if both is None or not same_answer(*both):
        return None
    if keep:
        kept(module, x, return_weights, answers[0])
    return both[0]


def injected_steady(module, weights, x, return_weights=False, scramble=None):
    """steady(module, x) after inject(module, weights); None where nothing can be observed.
    With `scramble` (a seed), every parameter is first redrawn, and an error of scramble or
    inject is the check's; without, inject failing is one more thing not observed."""
    if scramble is None:
        if observed(lambda: inject(module, weights)) is None:
            return None
    else:
        module.contract("scramble", seed=scramble)
        inject(module, weights)
        module.holding = None  # every other parameter redrawn: not the judge's block any more
    return steady(module, x, return_weights)


def randomness_first(student, module, x):
    """Before any cause is drawn from forward's outputs: forward twice on the same input must
    answer the same.  Otherwise the Verdict names the randomness: dropout (steady after eval()),
    attend's own randomness, or new layers or weights made on every call."""
    alike, answers = _answers_alike(module, x)
    if alike:
        kept(module, x, False, answers[0])
    if alike is not False:
        return  # steady, or failing (the failure, a wrong shape too, is judged where it is)
    module.contract("train_mode", training=False)
    try:
        in_eval = _answers_alike(module, x)[0]
    finally:
        module.contract("train_mode", training=True)
    if in_eval:
        raise Verdict("random_dropout")
    q, k, v = (fresh_randn(1, H, T, D // H, seed=0, salt=95 + i) for i in range(3))
    try:
        steady_call(lambda: student.attend(q, k, v))  # a Verdict when attend is random
    except (StudentError, WorkerFailure):
        pass
    raise Verdict("random_new_weights")


def _answers_alike(module, x):
    """(alike, answers) of forward(x) twice, whatever it returns: alike is True or False, None
    where an answer cannot be observed (raised, hung, ...)."""
    answers = observed(lambda: [run(module, x) for _ in range(2)])
    if answers is None or any(answer is None for answer in answers):
        return None, answers
    return same_answer(*answers), answers


def _unmoved(after, before):
    """The same output, NaN where it was NaN (a forward that gives NaN, e.g. a mask convention
    turned around, is another card's mistake, not a parameter that moved)."""
    nan = torch.isnan(before)
    return bool((torch.isnan(after) == nan).all()) and close(after[~nan], before[~nan])


# -- module.mask_buffer -------------------------------------------------------------------------
REGISTERED = {"buffer": "register_buffer", "parameter": "nn.Parameter",
              "attribute": "self.mask = tensor", "missing": "—"}


@pytest.mark.check("module.mask_buffer")
def test_mask_is_a_buffer(student, seed):
    """The mask as torch's registries hold it, built as the lesson builds it ([max_len, max_len],
    bool, lower triangle True); where forward runs steadily with the judge's weights, a step over
    every parameter must not move its zeros."""
    module, description = described(student)
    mask = description.get("mask") or {}
    registered, value = mask.get("registered"), mask.get("value")
    if type(value) is not torch.Tensor:
        raise Verdict("mask_not_buffer", registered=REGISTERED.get(registered, "—"))
    # A Parameter is named by what it does (the behaviour below: it is trained), not by the
    # float dtype and the values a Parameter cannot help having.
    if registered != "parameter":
        if list(value.shape) != [MAX_LEN, MAX_LEN]:
            raise Verdict("wrong_shape", expected=[MAX_LEN, MAX_LEN], got=list(value.shape))
        if value.dtype != torch.bool:
            raise Verdict("mask_dtype", got=str(value.dtype).replace("torch.", ""))
        if not torch.equal(value, causal_mask(MAX_LEN)):
            key = "mask_anti_causal" if torch.equal(value, causal_mask(MAX_LEN).T) \
                else "wrong_values"
            raise Verdict(key, where="mask[:3, :3] ", expected="[[1, 0, 0], [1, 1, 0], [1, 1, 1]]",
                          got=str(value[:3, :3].int().tolist()))
    _mask_survives_a_step(module, seed)
    if registered != "buffer":
        raise Verdict("mask_not_buffer", registered=REGISTERED.get(registered, "—"))


def _mask_survives_a_step(module, seed):
    """After a step over every parameter (the judge's weights written back) the weights that
    were exactly 0 must be the same cells: a parameter mask would be moved.  Nothing is concluded
    where this cannot be observed."""
    weights = fresh_weights(seed, 40)
    x = fresh_randn(B, T, D, seed=seed, salt=50)
    seen = injected_steady(module, weights, x, return_weights=True)
    if seen is None:
        return
    before = seen[1]
    seen = injected_steady(module, weights, x, return_weights=True, scramble=seed + 1)
    if seen is None:
        return
    after = seen[1]
    if after.shape != before.shape or not torch.equal(after == 0, before == 0):
        raise Verdict("mask_trained", **differing((after != 0).double(), (before != 0).double(),
                                                  "weights != 0 ", number=FOUR))


# -- module.shapes ------------------------------------------------------------------------------
@pytest.mark.check("module.shapes")
@pytest.mark.parametrize("t", [T, MAX_LEN, 1])
def test_forward_shapes(student, seed, t):
    x = fresh_randn(B, t, D, seed=seed, salt=60 + t)
    module = student.module(D, H, MAX_LEN)
    try:
        y = module(x)
    except StudentError as exc:
        if t < MAX_LEN and not exc.not_implemented and _full_length_works(module, seed):
            raise Verdict("mask_not_cropped", message=exc.message) from None
        raise
    shaped(y, [B, t, D])
    out = module(x, return_weights=True)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Verdict("wrong_type", expected="(y, weights)", got=type(out).__name__)
    shaped(out[0], [B, t, D])
    weights = tensor(out[1])
    if list(weights.shape) == [B, t, t]:
        raise Verdict("weights_averaged")
    shaped(weights, [B, H, t, t])


def _full_length_works(module, seed):
    try:
        module(fresh_randn(1, MAX_LEN, D, seed=seed, salt=69))
        return True
    except StudentError:
        return False


# -- module.errors ------------------------------------------------------------------------------
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
def test_too_long(student, seed):
    module = student.module(D, H, MAX_LEN)
    t = MAX_LEN + 1
    try:
        # afresh: a forward that hung on an ordinary input may still refuse this one at once
        module(fresh_randn(1, t, D, seed=seed, salt=70), afresh=True)
    except StudentError as exc:
        if exc.not_implemented or exc.memory_limit:
            raise
        if not exc.is_a("ValueError"):
            raise Verdict("max_len_wrong_error", t=t, max_len=MAX_LEN, type=exc.type,
                          message=exc.message) from None
        return
    raise Verdict("max_len_no_error", t=t, max_len=MAX_LEN)


# -- module.causal ------------------------------------------------------------------------------
@pytest.mark.check("module.causal")
def test_module_is_causal(student, seed):
    module = _holding_judges_weights(student, seed)
    x = fresh_randn(B, T, D, seed=seed, salt=80)
    randomness_first(student, module, x)
    later = x.clone()
    later[:, CUT:] += fresh_randn(B, T - CUT, D, seed=seed, salt=81)
    y, weights = run_weights(module, x, keep=True)
    y_later = shaped(run(module, later, keep=True), [B, T, D])
    allowed = causal_mask(T)
    if not close(y_later[:, :CUT], y[:, :CUT]):
        raise Verdict(_leak_key(weights, allowed), heatmap=leak_map(weights, allowed),
                      **differing(y_later[:, :CUT], y[:, :CUT], "y", number=FOUR))
    if (weights.reshape(-1, T, T)[:, ~allowed] != 0).any():  # outputs causal, weights not
        raise Verdict(_leak_key(weights, allowed), heatmap=leak_map(weights, allowed),
                      where="weights[..., 0, 1:] ",
                      expected="0", got=fmt(weights.reshape(-1, T, T)[0, 0, 1:]))
    _reads_the_past(student, module, x, y, weights, seed)


def _holding_judges_weights(student, seed):
    """A new block holding the judge's weights where the contract's names reach them, else its
    own (inject is module.param_count's to judge).  Causality is judged on weights of a known
    size, not the block's own draw: a correct block whose out_proj starts at zero answers 0 for
    every input, one whose query projection starts at zero weighs every position alike."""
    module = student.module(D, H, MAX_LEN)
    weights = fresh_weights(seed, 85)
    try:
        kind = module.contract("inject", **inject_args(weights))
    except StudentError:
        return module  # inject raised: its own weights, what it could hold
    except WorkerFailure:
        return student.module(D, H, MAX_LEN)  # a new block, without inject
    if kind in ("fused", "separate"):
        module.holding = weights  # its answers are kept (kept)
    return module


def _leak_key(weights, allowed):
    """The mistake the weights themselves show, else only what was seen: the future leaks in
    through the weights (module.reference tells how) or outside them (a reshape that mixes
    positions)."""
    key = weights_problem(weights, allowed)
    if key == "mask_missing":
        return "future_leaks"
    return key or "leak_outside_weights"


def _reads_the_past(student, module, x, y, weights, seed):
    """Causal is not enough: the block must read earlier positions through weights that follow
    the input (an identity or a fixed average is causal too).  Reading no earlier position is
    named so only where the student's split_heads and merge_heads keep each position's numbers
    together; otherwise the card says what was seen."""
    earlier = x.clone()
    earlier[:, 0] += fresh_randn(B, D, seed=seed, salt=82)
    y_earlier, weights_earlier = run_weights(module, earlier, keep=True)
    if close(y_earlier[:, -1], y[:, -1]):
        key = "past_unread" if _positions_kept_together(student, x) is False else "no_mixing"
        raise Verdict(key, t=T - 1)
    flat = weights.double().reshape(-1, T, T)
    uniform = causal_mask(T).double() / torch.arange(1, T + 1).double()[:, None]
    if close(flat, uniform.expand_as(flat)):
        raise Verdict("weights_not_from_input", seen="1/(t+1)")
    if close(weights_earlier, weights):
        raise Verdict("weights_not_from_input", seen="x[:, 0] → weights")


def _positions_kept_together(student, x):
    """split_heads(x)[:, :, t] holds x[:, t]'s numbers and merge_heads puts them back at t
    (compared sorted: a property, not a layout); None where they cannot be observed."""
    try:
        heads = tensor(student.split_heads(x, H))
        merged = tensor(student.merge_heads(heads)) if list(heads.shape) == [B, H, T, D // H] \
            else None
    except (StudentError, WorkerFailure):
        return None
    except Verdict:
        return False
    if merged is None or list(merged.shape) != [B, T, D]:
        return False
    per_position = heads.transpose(1, 2).reshape(B, T, D)  # whatever order within a position
    return close(per_position.sort(dim=-1).values, x.sort(dim=-1).values) and \
        close(merged.sort(dim=-1).values, x.sort(dim=-1).values)


# -- module.no_library_attention ----------------------------------------------------------------
@pytest.mark.check("module.no_library_attention")
def test_attention_by_hand(student, seed):
    # Only a stub is excused (the piece called is not written: its raise, or no such name), and
    # only the library's own refusal counts against this check: any other error of forward or
    # attend (a helper it calls that the file lacks included) is another check's business.
    x = fresh_randn(1, T, D, seed=seed, salt=90)
    for piece, call in (("CausalSelfAttention", lambda: student.module(D, H, MAX_LEN)(x)),
                        ("attend", lambda: student.attend(*(fresh_randn(1, H, T, 4, seed=seed,
                                                                        salt=91 + i)
                                                            for i in range(3))))):
        try:
            call()
        except StudentError as exc:
            if exc.not_implemented and exc.not_defined in (None, piece) \
                    or exc.during == "import":
                raise
            # the worker's own refusal, never a student's class of that name (worker.py's mro)
            if exc.is_a("contract.LibraryAttentionDisabled"):
                raise Verdict("forbidden", what="LibraryAttentionDisabled") from None
        except WorkerFailure:
            if student.import_error is not None:
                raise  # nothing of the file ran (an endless loop or an exit at import)
    library, tamper = source_routes(student.source())
    if library or tamper:
        raise Verdict("forbidden", what=", ".join(library + tamper))
