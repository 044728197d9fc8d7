"""The device and dtype checks (issue 27): attend.device, module.device, module.dtype.

- each device or dtype mistake of the corpus (tests/submissions/wrong/device_*, dtype_*,
  scale_float_tensor) loses exactly the checks its header names, no other, with its cause named;
- code that cannot run on `meta` for a reason other than its device (correct/nan_guard_item.py:
  `.item()` underneath) keeps full marks, and the card says it could not judge there;
- the verdict logic on its own: CUDA decides where it could judge, a mismatch is told from
  another failure by torch's own words;
- where CUDA is present, the reference and the device mistakes behave on CUDA as on meta (without
  CUDA those tests are skipped, and say so).

The gradings are shared with tests/test_corpus.py (one grading per submission per session).
"""

import os

import pytest
import torch

from grader.judge.checks.public import check_device
from grader.judge.checks.support import Verdict
from grader.render import report
from loading import load_file
from test_corpus import RUBRIC, ROOT, SUBMISSIONS, graded, header

DEVICE_CHECKS = ("attend.device", "module.device", "module.dtype")
MISTAKES = sorted(p for p in (SUBMISSIONS / "wrong").glob("*.py")
                  if set(header(p)["expect-fail"]) & set(DEVICE_CHECKS))
NO_CUDA = "no CUDA here: the CUDA runs of the device checks are not tried on this machine"


def test_every_device_mistake_of_the_issue_is_in_the_corpus():
    names = {p.stem for p in MISTAKES}
    assert {"device_mask_no_device", "device_mask_attribute", "device_tensor_in_forward",
            "dtype_softmax_float32", "scale_float_tensor"} <= names
    assert {p.name for p in (SUBMISSIONS / "correct").iterdir()} >= {
        "triu_future_mask.py", "nan_guard_item.py", "additive_mask_bmm.py", "helper_wrappers.py"}


@pytest.mark.parametrize("path", MISTAKES, ids=[p.name for p in MISTAKES])
def test_a_device_mistake_loses_exactly_its_own_points(path):
    g = graded(path)
    failing = {c["id"] for c in g.data["checks"] if c["status"] != "passed"}
    assert failing == set(header(path)["expect-fail"])
    lost = sum(c["max_score"] - c["score"] for c in g.data["checks"])
    assert lost == sum(RUBRIC.by_id[c].points for c in failing)
    named = {v["key"] for c in g.data["checks"] for v in c["verdicts"]}
    assert set(header(path)["expect-key"]) <= named


def test_code_that_cannot_run_on_meta_is_not_judged_there_and_loses_nothing():
    g = graded(SUBMISSIONS / "correct" / "nan_guard_item.py")
    assert g.data["score"] == g.data["max_score"]
    for check_id in ("attend.device", "module.device"):
        result = g.by_id[check_id]
        assert result["status"] == "passed" and result["score"] == result["max_score"]
        if torch.cuda.is_available():
            continue  # the CUDA run judged it: nothing left unjudged
        assert [n["key"] for n in result["notes"]] == ["device_not_judged"]
        assert "cannot be called on meta tensors" in result["notes"][0]["fields"]["message"]
        for lang in ("zh", "en"):  # the card says so, in the student's words
            text = report.feedback(RUBRIC, result, lang)
            assert text == RUBRIC.message("device_not_judged", lang, **result["notes"][0]["fields"])
            assert "meta" in report.to_text(RUBRIC, g.data, lang)


def test_the_reference_gets_every_device_point_without_a_note():
    g = graded(ROOT / "solutions" / "attention.py")
    for check_id in DEVICE_CHECKS:
        assert g.by_id[check_id]["status"] == "passed"
        assert g.by_id[check_id]["notes"] == []


# -- the verdict logic alone ----------------------------------------------------------------------
def notes_of(outcomes):
    said = []
    check_device.decide(outcomes, lambda name, value: said.append((name, value)))
    return said


def test_cuda_decides_where_it_could_judge():
    mismatch = Verdict("mask_without_device")
    unjudged = check_device.NotJudged("device_not_judged", device="meta")
    assert notes_of({"meta": unjudged, "cuda": None}) == []
    with pytest.raises(Verdict):
        notes_of({"meta": unjudged, "cuda": mismatch})
    assert notes_of({"meta": mismatch, "cuda": None}) == []  # the real device has the last word
    with pytest.raises(Verdict):
        notes_of({"meta": mismatch})
    said = notes_of({"meta": unjudged})
    assert [value["key"] for _, value in said] == ["device_not_judged"]


@pytest.mark.parametrize("message,mismatch", [
    ("Tensor on device meta is not on the expected device cpu!", True),
    ("Tensor on device cpu is not on the expected device meta!", True),
    ("Expected all tensors to be on the same device, but found at least two devices, cuda:0 and "
     "cpu!", True),
    ("Expected all tensors to be on the same device, but got mat1 is on cpu, different from other "
     "tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)", True),
    ("Tensor.item() cannot be called on meta tensors", False),
    ("Cannot copy out of meta tensor; no data!", False),
    ("expected m1 and m2 to have the same dtype, but got: float != double", False),
])
def test_a_device_mismatch_is_told_by_torchs_words(message, mismatch):
    assert bool(check_device.DEVICE_MISMATCH.search(message)) is mismatch


def test_a_forced_dtype_is_told_by_torchs_words():
    forced = ["expected m1 and m2 to have the same dtype, but got: float != double",
              "mat1 and mat2 must have the same dtype, but got Float and BFloat16",
              "expected scalar type Double but found Float"]
    assert all(check_device.DTYPE_MISMATCH.search(m) for m in forced)
    assert not check_device.DTYPE_MISMATCH.search("Tensor.item() cannot be called on meta tensors")


# -- meta and CUDA agree --------------------------------------------------------------------------
def load(path):
    return load_file(path, "device_case")


def outcome(call):
    """'ran', 'mismatch' or 'other' for a call of the student's code on some device."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 (what the student's code raised is the datum)
        return "mismatch" if check_device.DEVICE_MISMATCH.search(str(exc)) else "other"
    return "ran"


def runs(module, device):
    q, k, v = (torch.randn(2, 3, 5, 4, device=device) for _ in range(3))
    block = module.CausalSelfAttention(12, 3, 8).to(device)
    x = torch.randn(2, 5, 12, device=device)
    return {"attend": outcome(lambda: module.attend(q, k, v, return_weights=True)),
            "block": outcome(lambda: block(x, return_weights=True))}


CASES = [ROOT / "solutions" / "attention.py"] + MISTAKES


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_meta_and_cuda_agree(path):
    module = load(path)
    assert runs(module, "cuda") == runs(module, "meta")


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_the_worker_grades_on_cuda_where_it_is_present():
    g = graded(ROOT / "solutions" / "attention.py")
    assert "cuda" in g.data["metadata"].get("devices", [])



def test_a_device_failure_leads_to_the_device_hints():
    from grader.tools import hints

    checks = [{"id": c.id, "exercise": c.exercise, "status": "passed"} for c in RUBRIC.checks]
    for result in checks:
        if result["id"] == "attend.device":
            result["status"] = "failed"
    data = {"checks": checks}
    assert hints.ladders(RUBRIC, data) == {"attend": "device"}
    assert hints.resolve(RUBRIC, "device") == "device" and "device" in RUBRIC.hints
    for result in checks:
        if result["id"] == "attend.scale":
            result["status"] = "failed"  # an earlier card of attend: attend's own ladder
    assert hints.ladders(RUBRIC, data) == {"attend": "attend"}


def test_a_workers_warm_up_leaves_dynamo_unimported():
    """worker.prepare loads meta's kernels (placement.warm_meta) and hands torch's Python
    kernels their own function as the "dynamo-disabled" one: meta operations afterwards never
    import torch._dynamo (~1 s and 40 MiB inside a student's call)."""
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import worker; torch = worker.prepare()\n"
            "x = torch.randn(2, 3, 4, device='meta')\n"
            "m = torch.ones(4, 4, dtype=torch.bool, device='meta').tril()\n"
            "w = (x @ x.transpose(-1, -2) / 2).masked_fill(~m[:3, :3], float('-inf'))\n"
            "y = torch.where(m[:3, :3], w, 0.0).softmax(-1) @ x\n"
            "print('torch._dynamo' in sys.modules, 'sympy' in sys.modules)")
    runtime = os.path.join(ROOT, "grader", "sandbox", "runtime")
    proc = subprocess.run([sys.executable, "-I", "-c", code, runtime], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]  # meta's kernels loaded, dynamo not
