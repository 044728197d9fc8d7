"""The judge's questions to the student's code, from one distribution for the grading (issue 71).

A submission sees every call the judge makes: its arguments' sizes, dtypes, devices, strides,
form and place in the sequence.  No such property may tell it which check asks, or whether the
answer will be compared with the reference, or it could be right exactly where it is compared.
So, for every check, public or hidden:

- Sizes come from here.  attend's questions are [B, H, T, d] = [2, 3, 5, 4] with v's width drawn
  for each question from V_WIDTHS, as often narrower than q as wider (`v_width`); a check that
  needs both sides asks a second question of the other side (`other_side`), never a width of its
  own.  The block's are D = 12, H = 3, max_len = 8 on inputs [2, 5, 12]; split and merge use the
  same B, T, H, d.  Lower ranks come from slicing a drawn question (attend.batched_vs_loop).
- Forms: every call goes through the proxy's one form (attend(q, k, v, mask=..., return_weights=
  ...), all on the CPU in float32, contiguous; the strided view of merge_heads.non_contiguous is
  the one exception, a hidden-only question, below).
- Answers: a question is answered once per grading (`ask`).  The hidden checks that compare with
  the reference compare the answers the public checks' questions already got: every answer attend
  gave, in every form, at each rank, and forward on a block holding the judge's weights, `keep`, so
  they ask nothing of their own and nothing a call carries tells whether it will be compared.  A
  hidden check that must ask a question of its own, which a submission can recognise (rows of
  zeros, a strided view, a backward pass), earns its point only where the ordinary answers of
  that function are right too.

Everything kept lives on the student proxy for one grading (a proxy graded again starts afresh).
"""
import hashlib

import torch

from grader.judge.student import StudentError, WorkerFailure
from grader.judge.checks.support import Verdict, attend_any_rank, fresh

# attend's questions: q, k [B, H, T, D_HEAD], v [B, H, T, d_v] with d_v from V_WIDTHS.
B, H, T, D_HEAD = 2, 3, 5, 4
# Two widths narrower than q and two wider, none equal to T, d or d²: each wrong scale (1, √d, 1/d,
# 1/√T, 1/√(v's width)) is then one factor, whichever width a question draws.
V_WIDTHS = (2, 3, 6, 7)
# The block's questions: CausalSelfAttention(D_MODEL, H, MAX_LEN) on inputs [B, T, D_MODEL].
D_MODEL, MAX_LEN = H * D_HEAD, 8
# v's width is drawn from a stream of its own, so the values drawn at a salt stay what they were.
WIDTH_STREAM = 7_919_003


def v_width(seed, salt):
    """v's width for the question drawn at `salt`: one of V_WIDTHS, each as likely."""
    pick = torch.randint(len(V_WIDTHS), (1,), generator=fresh(seed, salt + WIDTH_STREAM))
    return V_WIDTHS[int(pick)]


def narrower(width):
    """v of this width is narrower than q (the other side: wider)."""
    return width < D_HEAD


def other_side(seed, salt, width):
    """A width of the other side of q's from `width`, drawn at `salt`: with `v_width`'s draw for
    the first question, each of two questions is any width of V_WIDTHS as often (both sides are
    equally likely), and the two together always hold a narrower v and a wider one."""
    side = [w for w in V_WIDTHS if narrower(w) != narrower(width)]
    pick = torch.randint(len(side), (1,), generator=fresh(seed, salt + WIDTH_STREAM))
    return side[int(pick)]


# -- answers, once per grading ------------------------------------------------------------------
# A tensor of an answer larger than this is kept as a stand-in of its shape and dtype (no memory):
# only a wrong shape can be that large (the largest right answer is 1 KiB), and a stand-in is
# judged as the same wrong shape.  The judge keeps a grading's answers to the end, so what one
# answer may keep is bounded (tests/bench_judge_memory.py).
KEPT_BYTES = 1 << 16


class Asked:
    """One question to the student's code and its outcome: `answer`, or `error` (the student's
    error, the worker's failure or the Verdict the asking named)."""

    def __init__(self, function, args, form, order):
        self.function, self.args, self.form, self.order = function, args, form, order
        self.answer = self.error = None
        self.compared = set()  # the ids of the checks that compared this answer with the reference

    def outcome(self):
        if self.error is not None:
            raise self.error
        return self.answer


class Book:
    """What one grading asked: `questions` (key -> Asked) and `forwards` (key -> Forward), each
    in the order first asked or given."""

    def __init__(self, seed):
        self.seed, self.questions, self.forwards = seed, {}, {}


def book(student):
    """This grading's Book, kept on the student proxy (a proxy graded again starts a new one)."""
    seed = getattr(student, "seed", None)
    kept = getattr(student, "questions_asked", None)
    if kept is None or kept.seed != seed:
        kept = student.questions_asked = Book(seed)
    return kept


def fingerprint(value):
    """What identifies an argument: a tensor by shape, dtype and bytes; anything else by repr."""
    if type(value) is torch.Tensor:
        data = value.detach().contiguous().cpu()
        digest = hashlib.sha1(data.reshape(-1).view(torch.uint8).numpy().tobytes()
                              if data.numel() else b"").hexdigest()
        return ("tensor", tuple(data.shape), str(data.dtype), digest)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(fingerprint(v) for v in value))
    return ("value", repr(value))


def ask(student, function, call, args, **form):
    """`call()`'s outcome, once per grading for the question (`function`, `args`, `form`): asked
    again, by another check or a hidden one, the kept answer (or error) comes back and the worker
    is asked nothing."""
    asked = book(student).questions
    key = (function, fingerprint(args), fingerprint(sorted(form.items())))
    if key not in asked:
        entry = asked[key] = Asked(function, args, form, len(asked))
        try:
            entry.answer = kept_answer(call())
        except (StudentError, WorkerFailure, Verdict) as exc:
            # kept without its traceback and chain: their frames would keep the answers alive
            exc.__context__ = exc.__cause__ = None
            entry.error = exc.with_traceback(None)
    return asked[key].outcome()


def kept_answer(answer):
    """The answer as it is kept: a tensor beyond KEPT_BYTES as a stand-in of its shape and dtype;
    a tuple of its items so kept; a list, dict or string (never a right answer) as an empty one
    of its type, which a check names by its type alone."""
    if type(answer) is torch.Tensor:
        if answer.numel() * answer.element_size() > KEPT_BYTES:
            return torch.zeros((), dtype=answer.dtype).expand(answer.shape)
        return answer
    if type(answer) is tuple:
        return tuple(kept_answer(a) for a in answer)
    if type(answer) in (list, dict, str, bytes):
        return type(answer)()
    return answer


def entries(student, function, **form):
    """The kept questions of `function` with this form, in the order they were asked."""
    return [e for e in book(student).questions.values() if e.function == function
            and all(e.form.get(name) == value for name, value in form.items())]


def attend(student, q, k, v, mask=None, return_weights=False, own=None):
    """student.attend(q, k, v, mask=, return_weights=) as every check asks it (support.
    attend_any_rank: made twice, a random answer named, code for [B,H,T,d] only named), once per
    grading.  `own`: the hidden check whose own question this is (never an ordinary answer)."""
    return ask(student, "attend", lambda: attend_any_rank(student, q, k, v, mask=mask,
                                                          return_weights=return_weights),
               (q, k, v, mask), return_weights=return_weights, masked=mask is not None, own=own)


def merge_heads(student, x, views=()):
    """student.merge_heads on x (as the worker's view `views` makes it), once per grading."""
    return ask(student, "merge_heads", lambda: student.call("merge_heads", x, views=views), (x,),
               views=fingerprint(list(views)), strided=bool(views))


# -- the block: forward's answers on a block holding the judge's weights --------------------------
class Forward:
    """One answer of forward on a block holding the judge's `weights` [q, k, v, out]: the input
    `x`, return_weights, the answer (y, or (y, weights)), and the block that gave it."""

    def __init__(self, weights, x, return_weights, answer, module):
        self.weights, self.x, self.return_weights = weights, x, return_weights
        self.answer, self.module = kept_answer(answer), module
        self.compared = set()


def keep(student, weights, x, return_weights, answer, module):
    """Keep forward's `answer` for input x on a block holding `weights` (the first per question):
    the hidden comparisons take their answers from here."""
    kept = book(student).forwards
    key = (fingerprint(weights), fingerprint(x), return_weights)
    if key not in kept:
        kept[key] = Forward(weights, x, return_weights, answer, module)


def forwards(student):
    """The forward answers kept in this grading, in the order they were given."""
    return list(book(student).forwards.values())
