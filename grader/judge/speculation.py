"""Each check's first request asked of the worker ahead of the check, the checks' together.

A round trip costs the judge and the worker ~0.2 ms of CPU each beyond the calls it carries (the
coldness after every switch between the two: `make bench`, cpu_per_call), and 41 of a grading's
76 round trips are the first request of a check.  So before the checks of one visibility run
(runner.KitPlugin), each check still to run is run dry against a stand-in for the student that
stops it at its first request (`first_request`): what it would ask.  Those
requests go to the worker together, a round trip for each 48 KiB of them (Student.ask_ahead), and
what each call answered is kept.  When the check then runs and its first request is the same by
value (`same_calls`: every argument, every tensor's dtype, shape and values), it is answered from
what was kept, every answer charged to the time budget and its kind of call as if it had been
asked then (Student._replay); any other request is asked as before.

What this changes: the worker makes the first calls of the later checks before the follow-ups of
the earlier ones.  A file whose answers depend only on their arguments answers the same either
way; one that keeps state between calls (a counter, a cache keyed wrongly) may answer otherwise,
the same through every door, since every door runs the same checks in the same order.  The
visibilities are asked one after the other, so that the public checks of `make check` see the
same calls before theirs as in a full grading.  Nothing is asked before the worker has said hello.

What it never changes: a speculation that goes wrong (a call that does not answer within its
timeout or within AHEAD_SECONDS for all of them, a worker that dies or speaks nonsense) is
forgotten whole, uncharged and unreported, the worker stopped; the checks then ask for
themselves on a fresh worker, as they would have.  An answer kept for a worker that has since
been replaced is never used.  After one such failure nothing more is asked ahead for that file.
"""
import copy

import pytest

# The most the worker may take for all the first requests asked ahead of one visibility's checks
# (the reference answers its public ones in ~15 ms, its hidden ones in ~3.5): a file slower than
# that (a call that hangs, say) is asked check by check, as without speculation, this much later.
AHEAD_SECONDS = 1.0


class Planned(BaseException):
    """The dry run reached its first request (BaseException: no `except Exception` in a check
    turns it into a verdict)."""

    def __init__(self, calls, timeout, afresh):
        super().__init__("planned")
        self.calls, self.timeout, self.afresh = calls, timeout, afresh


def stand_in(student):
    """A copy of `student` whose first request stops the check (Planned); its containers are
    its own, so nothing a dry run records (a heatmap's inputs, say) reaches the student."""
    double = copy.copy(student)
    for name, value in vars(double).items():
        if type(value) in (dict, list, set):
            setattr(double, name, copy.copy(value))

    def request_all(calls, timeout=None, afresh=False):
        raise Planned(list(calls), timeout, afresh)

    double.request_all = request_all
    return double


def first_request(function, names, params, double):
    """The calls [(op, args)] of the first request the check `function` makes, run with the kit's
    fixtures (`names`: its arguments, `params`: its parametrize values) against `double`, the
    student's stand_in; None where it asks nothing, or ends otherwise before it asks, or asks
    afresh or with a timeout of its own: a request the check expects to be slow (the copy task's
    training, a start of CUDA) is left to it, for asked ahead it would hold up the others'
    answers until its own timeout."""
    fixtures = {"student": double, "seed": double.seed, "record_note": lambda name, value: None}
    try:
        function(**{name: params[name] if name in params else fixtures[name] for name in names})
    except Planned as planned:
        if planned.afresh or planned.timeout is not None:
            return None
        return planned.calls
    except (Exception, pytest.skip.Exception, pytest.fail.Exception):
        pass
    return None


def same_calls(a, b):
    """Two requests [(op, args)] the same by value: what the worker would be handed is the same."""
    return len(a) == len(b) and all(op == other_op and same_value(args, other_args)
                                    for (op, args), (other_op, other_args) in zip(a, b))


def _torch():
    """torch, looked up when two requests are compared (the checks have imported it by then)."""
    import torch

    return torch


_SCALARS = frozenset((str, int, float, bool, type(None)))


def same_value(a, b):
    """Two arguments the same by value: of one type, containers item by item, tensors by dtype,
    shape and values (a tensor holding NaN is never the same: it is asked again)."""
    if a is b and type(a) in _SCALARS:  # the same string, None or number: most of a call
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same_value(a[key], b[key]) for key in a)
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(map(same_value, a, b))
    torch = _torch()
    if issubclass(kind, torch.Tensor):  # never by identity: one may have changed in place
        try:
            return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
        except RuntimeError:  # on two devices, or one that cannot compare: asked again
            return False
    if kind is float and a != a:  # NaN
        return b != b
    return a == b
