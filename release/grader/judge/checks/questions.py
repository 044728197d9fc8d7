"""The judge's questions to the student's code, from one distribution for the grading.

A submission sees every call the judge makes: its arguments' sizes, dtypes, devices, strides,
form and place in the sequence.  None of these may tell it which check asks, or whether the
answer will be compared with the reference, or it could be right exactly where it is compared.
So, for every check, public or hidden:

- Sizes come from here: attend's [B, H, T, d] = [2, 3, 5, 4], v's width drawn per question from
  V_WIDTHS (`v_width`; a check that needs both sides asks a second question, `other_side`); the
  block's D = 12, H = 3, max_len = 8 on inputs [2, 5, 12].  Lower ranks are slices of a drawn
  question.
- Forms: the proxy's one form per function, on the CPU in float32, contiguous (the strided view
  of merge_heads.non_contiguous, a hidden-only question, is the one exception).
- Answers: a question is answered once per grading (`ask`).  The hidden comparisons use the
  answers the public questions already got (attend's, and forward's on a block holding the
  judge's weights, `keep`).  A hidden check that must ask a question of its own, which a
  submission can recognise (rows of zeros, a strided view, a backward pass), earns its point
  only where the ordinary answers of that function are right too.
"""
import hashlib
from types import SimpleNamespace

import torch

from grader.judge.student import StudentError, WorkerFailure
from grader.judge.checks.support import Verdict, attend_any_rank, fresh, per_grading

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
    """A width on the other side of q's from `width`, drawn at `salt`: with `v_width`'s draw for
    the first question, each of two questions is any width as often, and the two together always
    hold a narrower v and a wider one."""
    side = [w for w in V_WIDTHS if narrower(w) != narrower(width)]
    pick = torch.randint(len(side), (1,), generator=fresh(seed, salt + WIDTH_STREAM))
    return side[int(pick)]


# A tensor of an answer larger than this is kept as a stand-in of its shape and dtype (no memory):
# only a wrong shape can be that large (the largest right answer is 1 KiB), and a stand-in is
# judged as the same wrong shape.  A grading's answers are kept to its end, so each is bounded.
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


def book(student):
    """What this grading asked, kept on the student proxy: `questions` (key -> Asked) and
    `forwards` (key -> a kept forward answer), each in the order first asked or given."""
    return per_grading(student, "questions_asked",
                       lambda: SimpleNamespace(questions={}, forwards={}))


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
    again, by any check, the kept answer (or error) comes back and the worker is asked nothing."""
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
    """student.attend(q, k, v, mask=, return_weights=) as every check asks it (made twice, see
    support.attend_any_rank), once per grading.  `own`: the hidden check whose own question this
    is (never an ordinary answer)."""
    return ask(student, "attend", lambda: attend_any_rank(student, q, k, v, mask=mask,
                                                          return_weights=return_weights),
               (q, k, v, mask), return_weights=return_weights, masked=mask is not None, own=own)


def merge_heads(student, x, views=()):
    """student.merge_heads on x (as the worker's view `views` makes it), once per grading."""
    return ask(student, "merge_heads", lambda: student.call("merge_heads", x, views=views), (x,),
               views=fingerprint(list(views)), strided=bool(views))


def keep(student, weights, x, return_weights, answer, module):
    """Keep forward's `answer` for input x on a block holding the judge's `weights` [q, k, v, out]
    (the first per question): the hidden comparisons take their answers from here."""
    kept = book(student).forwards
    key = (fingerprint(weights), fingerprint(x), return_weights)
    if key not in kept:
        kept[key] = SimpleNamespace(weights=weights, x=x, return_weights=return_weights,
                                    answer=kept_answer(answer), module=module, compared=set())
