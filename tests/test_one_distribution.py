"""The judge's questions come from one distribution (issue 71, grader/judge/checks/questions.py).

A submission sees every call the judge makes.  What it must not be able to do is be right exactly
where its answers are compared with the reference and wrong elsewhere.  Held here:

- without a worker, on every attend check run in process against the reference for many seeds:
  v's width (the one size that is drawn) comes from the same distribution whichever check asks,
  and every answer attend gave, in every form (a mask or none, the weights asked or not), is
  compared with the reference, so no property of a call tells whether it is; every compared
  answer was given to a public check, and the one question a hidden check asks of its own is
  attend.zero_scores' rows of zeros; each rank's compared answers hold a v narrower than q and
  one wider, in every seed;
- with the real worker, a submission that records every call it receives (shapes, dtypes,
  devices, strides, the form, grad mode): the calls after the public checks are only the hidden
  checks' own recognisable questions, whose points need the ordinary answers right, every answer
  module.reference and attend.reference compare was given before them, and every attend answer
  of the public checks, whatever its form, is compared;
- the probing corpus (tests/submissions/probing/, each with a `# honest:` file): a file that
  behaves as an honest mistake except where it guesses its answer is compared scores no more
  than the honest file, in total and on every hidden check.
"""
import collections
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.judge import grading, runner, service  # noqa: E402
from grader.judge.checks import questions  # noqa: E402
from grader.judge.checks.hidden import check_attend_reference as hidden  # noqa: E402
from grader.judge.checks.public import check_attend  # noqa: E402
from grader.judge.secret.reference import ref  # noqa: E402

SEEDS = range(200)  # about 0.1 s each, in one thread


# -- the distribution ---------------------------------------------------------------------------
def test_v_width_is_each_width_as_often_at_every_salt():
    for salt in (100, 200, 500, 600, 800, 9100):
        counts = collections.Counter(questions.v_width(seed, salt) for seed in range(2000))
        assert set(counts) == set(questions.V_WIDTHS)
        assert all(abs(n / 2000 - 1 / len(questions.V_WIDTHS)) < 0.04 for n in counts.values())


def test_the_other_side_gives_a_pair_both_sides_and_each_width_as_often():
    seconds = collections.Counter()
    for seed in range(2000):
        first = questions.v_width(seed, 600)
        second = questions.other_side(seed, 610, first)
        assert questions.narrower(first) != questions.narrower(second)
        seconds[second] += 1
    assert all(abs(n / 2000 - 1 / len(questions.V_WIDTHS)) < 0.04 for n in seconds.values())


def test_every_width_keeps_each_wrong_scale_one_factor():
    d, t = questions.D_HEAD, questions.T
    for width in questions.V_WIDTHS:
        factors = [1.0, d ** 0.5, 1 / d, t ** -0.5, width ** -0.5, d ** -0.5]
        assert len({round(f, 3) for f in factors}) == len(factors), width


# -- every attend check in process, against the reference ---------------------------------------
class Recorder:
    """A stand-in for the worker's proxy: attend answered by the reference in process, and every
    call recorded with the check that made it (no other function is asked by these checks)."""

    def __init__(self, seed):
        self.seed, self.calls, self.check = seed, [], None

    def attend(self, q, k, v, mask=None, return_weights=False):
        self.calls.append({"check": self.check, "key": questions.fingerprint((q, k, v, mask)),
                           "rank": q.dim(), "width": v.shape[-1], "masked": mask is not None,
                           "return_weights": return_weights})
        return ref.attend(q, k, v, mask=mask, return_weights=return_weights)


PUBLIC = [("attend.scale", check_attend.test_scale_by_sqrt_d, {}),
          *[("attend.causal", check_attend.test_causal, {"t": t}) for t in (None, 0, 2)],
          *[("attend.softmax", check_attend.test_rows_sum_to_one, {"gain": g})
            for g in (1.0, 100.0)],
          ("attend.mask_arg", check_attend.test_explicit_band_mask, {}),
          ("attend.mask_arg", check_attend.test_all_visible_mask, {}),
          ("attend.return_weights", check_attend.test_return_values, {}),
          ("attend.batched_vs_loop", check_attend.test_batched_equals_loop, {})]
HIDDEN = [*[("attend.reference", hidden.test_matches_reference, {"rank": r}) for r in hidden.RANKS],
          ("attend.zero_scores", hidden.test_zero_scores, {})]


def in_process(seed):
    """(recorder, how many questions the public checks asked) after every attend check ran."""
    student = Recorder(seed)
    for check, test, kwargs in PUBLIC:
        student.check = check
        test(student, seed, **kwargs)
    public_asked = len(questions.book(student).questions)
    for check, test, kwargs in HIDDEN:
        student.check = check
        test(student, seed, **kwargs)
    return student, public_asked


@pytest.fixture(scope="module")
def gradings():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors, as the judge runs them (process.one_thread_here)
    try:
        return {seed: in_process(seed) for seed in SEEDS}
    finally:
        torch.set_num_threads(threads)


def labelled(student):
    """Each recorded call with `compared` (its answer compared with the reference by a hidden
    check) and `lesson` (the lesson's fixed example, the same in every grading)."""
    entries = {(questions.fingerprint(e.args), e.form["return_weights"]): e
               for e in questions.book(student).questions.values()}
    example = questions.fingerprint(check_attend.EXAMPLE_Q)
    for call in student.calls:
        entry = entries[(call["key"], call["return_weights"])]
        yield dict(call, compared=bool(entry.compared), lesson=call["key"][1][0] == example)


def test_every_answer_compared_was_given_to_a_public_check(gradings):
    for seed, (student, public_asked) in gradings.items():
        asked = list(questions.book(student).questions.values())
        assert any(e.compared for e in asked)
        assert all(e.order < public_asked for e in asked if "attend.reference" in e.compared)
        own = asked[public_asked:]  # what the hidden checks asked themselves
        assert len(own) == 1 and bool((own[0].args[0][..., hidden.ZERO_ROWS, :] == 0).all()), seed


def test_every_answer_of_every_form_is_compared(gradings):
    """With or without a mask, the weights asked or not: every call but attend.zero_scores' own
    question is compared with the reference, so no form (nor any size) tells which ones are."""
    forms = collections.Counter()
    for student, _ in gradings.values():
        for call in labelled(student):
            assert call["compared"] == (call["check"] != "attend.zero_scores"), call
            forms[call["masked"], call["return_weights"]] += call["compared"]
    assert set(forms) == {(False, True), (True, True), (False, False)}


def test_each_rank_compares_a_v_narrower_than_q_and_one_wider(gradings):
    for seed, (student, _) in gradings.items():
        for rank in hidden.RANKS.values():
            sides = {questions.narrower(e.args[2].shape[-1])
                     for e in questions.book(student).questions.values()
                     if "attend.reference" in e.compared and e.args[0].dim() == rank}
            assert sides == {True, False}, (seed, rank)


def test_every_check_draws_v_widths_from_the_one_distribution(gradings):
    by_check = collections.defaultdict(collections.Counter)
    for student, _ in gradings.values():
        seen = set()
        for call in labelled(student):
            if not call["lesson"] and (call["check"], call["key"]) not in seen:
                seen.add((call["check"], call["key"]))
                by_check[call["check"]][call["width"]] += 1
    # attend.reference asks nothing: it compares the others' answers
    assert set(by_check) == {check for check, _, _ in PUBLIC} | {"attend.zero_scores"}
    for check, counts in by_check.items():
        total = sum(counts.values())
        assert set(counts) == set(questions.V_WIDTHS), check
        assert all(abs(n / total - 1 / len(questions.V_WIDTHS)) < 0.08 for n in counts.values()), \
            (check, counts)


# -- the real worker, a submission that records what it is asked ----------------------------------
RECORDER = '''

# -- recording every call the judge makes, as this code sees it (tests/test_one_distribution.py)
CALLS_SEEN = []
_inside = [0]


def _described(value):
    if not isinstance(value, torch.Tensor):
        return {"value": type(value).__name__}
    try:
        zero_rows = bool((value == 0).all(-1).any()) if value.dim() >= 2 else False
    except Exception:  # noqa: BLE001 (a tensor without values)
        zero_rows = False
    return {"shape": list(value.shape), "dtype": str(value.dtype), "device": str(value.device),
            "stride": list(value.stride()), "contiguous": value.is_contiguous(),
            "zero_rows": zero_rows}


def _recorded(name, function):
    def recording(*args, **kwargs):
        if not _inside[0]:
            CALLS_SEEN.append({"fn": name, "args": [_described(a) for a in args],
                               "kwargs": sorted(kwargs), "grad": torch.is_grad_enabled(),
                               "mask": kwargs.get("mask") is not None,
                               "return_weights": bool(kwargs.get("return_weights"))})
        _inside[0] += 1
        try:
            return function(*args, **kwargs)
        finally:
            _inside[0] -= 1
    return recording


split_heads = _recorded("split_heads", split_heads)
merge_heads = _recorded("merge_heads", merge_heads)
attend = _recorded("attend", attend)
CausalSelfAttention.forward = _recorded("forward", CausalSelfAttention.forward)
'''


@pytest.fixture(scope="module")
def judge():
    """A judge whose workers are forked from a fork server (plain subprocess isolation), as the
    batch's are: what these tests ask of a worker does not depend on how it started (forked and
    cold workers give the same verdicts: test_forkserver.py)."""
    with service.Judge(isolation="process", start="fork") as kept:
        yield kept


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, judge):
    """The calls the recording submission received in the public checks and then in the hidden
    ones (one grading: one student, the public checks run first), and the grading's Book."""
    path = tmp_path_factory.mktemp("recording") / "attention.py"
    path.write_text((ROOT / "solutions" / "attention.py").read_text(encoding="utf-8") + RECORDER,
                    encoding="utf-8")
    sub, student = grading.start(str(path), judge.isolation, judge.limits, judge.workers)
    try:
        grading.prepare(sub, student)
        public = runner.run(student, ("public",))
        seen = student.constants(["CALLS_SEEN"])["CALLS_SEEN"]
        kept = (len(questions.book(student).questions), len(questions.book(student).forwards))
        hidden_run = runner.run(student, ("hidden",))
        student.known_constants.pop("CALLS_SEEN")  # the proxy keeps a name's first reading
        everything = student.constants(["CALLS_SEEN"])["CALLS_SEEN"]
        book = questions.book(student)
    finally:
        student.close()
        sub.cleanup()
    for document in (public, hidden_run):  # the recorder is the reference: every check passes
        assert all(t["outcome"] == "passed" for t in document["tests"]), \
            [t["nodeid"] for t in document["tests"] if t["outcome"] != "passed"]
    return {"public": seen, "hidden": everything[len(seen):], "kept": kept, "book": book,
            "starts": student.starts}


def test_the_recorder_saw_one_worker(recorded):
    assert recorded["starts"] == 1  # one worker: its list holds every call


def test_the_reference_comparisons_ask_nothing_of_their_own(recorded):
    book = recorded["book"]
    questions_kept, forwards_kept = recorded["kept"]
    asked = list(book.questions.values())
    assert [e for e in asked if "attend.reference" in e.compared]
    assert all(e.order < questions_kept for e in asked if "attend.reference" in e.compared)
    forwards = list(book.forwards.values())
    assert [f for f in forwards if "module.reference" in f.compared]
    assert all(i < forwards_kept for i, f in enumerate(forwards) if f.compared)


def test_after_the_public_checks_only_recognisable_questions_come(recorded):
    """attend only on rows of zeros (attend.zero_scores), merge_heads only on a strided view
    (merge_heads.non_contiguous), forward outside grad mode only for module.gradients' and
    module.learns' own blocks: each such check's point also needs the ordinary answers right."""
    hidden_calls = recorded["hidden"]
    assert hidden_calls
    for call in hidden_calls:
        if call["fn"] == "attend":
            assert call["args"][0]["zero_rows"], call
        elif call["fn"] == "merge_heads":
            assert not call["args"][0]["contiguous"], call
        else:
            assert call["fn"] == "forward", call
    assert {c["fn"] for c in hidden_calls} >= {"attend", "merge_heads", "forward"}
    assert any(c["grad"] for c in hidden_calls if c["fn"] == "forward")  # a backward pass


def test_every_attend_answer_the_public_checks_got_is_compared(recorded):
    """In the real worker too: every answer attend gave the public checks, in whatever form, was
    compared with the reference by attend.reference (none is left for a file to be wrong on
    unseen), and the public checks asked attend in several forms."""
    ordinary = [e for e in recorded["book"].questions.values()
                if e.function == "attend" and e.form["own"] is None]
    assert {(e.form["masked"], e.form["return_weights"]) for e in ordinary} == \
        {(False, True), (True, True), (False, False)}
    assert all("attend.reference" in e.compared for e in ordinary), \
        [(e.form, e.args[0].shape) for e in ordinary if "attend.reference" not in e.compared]


# -- the probing corpus ---------------------------------------------------------------------------
PROBING = sorted((ROOT / "tests" / "submissions" / "probing").glob("*.py"))
HONEST = re.compile(r"^# honest: (.+?)\s*$", re.M)


_graded = {}


def graded(judge, path):
    """`path`'s report data, once a test run (two probes share an honest file)."""
    if path not in _graded:
        _graded[path] = judge.grade(str(path))
    return _graded[path]


@pytest.mark.parametrize("path", PROBING, ids=[p.name for p in PROBING])
def test_a_probe_scores_no_more_than_its_honest_mistake(path, judge):
    honest = ROOT / "tests" / "submissions" / HONEST.search(path.read_text("utf-8")).group(1)
    probe, plain = (graded(judge, p) for p in (path, honest))
    assert probe["score"] <= plain["score"], (probe["score"], plain["score"])
    hidden_points = {c["id"]: c["score"] for c in plain["checks"] if c["visibility"] == "hidden"}
    for check in probe["checks"]:
        if check["id"] in hidden_points:
            assert check["score"] <= hidden_points[check["id"]], check["id"]
