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
from grader.sandbox.runtime import devicerule, isolation, placement
from grader.judge.checks.support import Verdict
from grader.render import report
from loading import load_file
from test_corpus import CORRECT, RUBRIC, ROOT, SUBMISSIONS, graded, header

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
    copied, later = Verdict("copied_to_cpu"), Verdict("forward_tensor_on_cpu")
    with pytest.raises(Verdict) as raised:  # both found it: meta's words, as without a GPU
        notes_of({"meta": copied, "cuda": later})
    assert raised.value is copied
    with pytest.raises(Verdict) as raised:
        notes_of({"meta": None, "cuda": later})
    assert raised.value is later
    with pytest.raises(Verdict):
        notes_of({"meta": mismatch})
    said = notes_of({"meta": unjudged})
    assert [value["key"] for _, value in said] == ["device_not_judged"]


class StandInStudent:
    """A student as the judge sees it through the worker: a new block whose contract calls are
    answered one by one, its CPU answers to forward_on given in turn, and its answer on the
    device."""

    def __init__(self, cpu_answers, on_device):
        self.cpu_answers, self.on_device = list(cpu_answers), on_device

    @staticmethod
    def described(y, w, device):
        return {"items": [{"device": device, "dtype": "float32", "shape": list(t.shape),
                           "value": t if device != "meta" else None} for t in (y, w)]}

    def module(self, d_model, n_heads, max_len=None):
        return self

    def contract(self, action, **args):
        args["action"] = action
        if args["action"] == "inject":
            return "fused"
        if args["action"] == "place":
            return {"mask": {"device": args["device"], "dtype": "bool"},
                    "mask_before": {"device": "cpu", "dtype": "bool"}, "left": []}
        if args["device"] == "cpu":
            return self.described(*self.cpu_answers.pop(0), "cpu")
        return self.described(*self.on_device, args["device"])


def block_verdict(cpu_answers, on_device, device="cuda"):
    student = StandInStudent(cpu_answers, on_device)
    weights = [torch.zeros(12, 12)] * 4
    outcome = check_device.block_outcome(student, weights, device, torch.zeros(2, 5, 12), 0)
    assert student.cpu_answers == []  # each CPU answer asked for, and no more
    return outcome.key if outcome is not None else None


def test_cuda_values_are_this_blocks_own_cpu_values():
    """The values on CUDA are compared with the same block's CPU answer, asked before it moved
    (a bias the student's Linear drew is in both); a block that answers the CPU differently twice
    (dropout left on) draws at random, and its values are not compared, as on meta."""
    y, w = torch.randn(2, 5, 12), torch.rand(2, 3, 5, 5)
    other = torch.randn(2, 5, 12)
    assert block_verdict([(y, w)] * 2, (y, w)) is None
    assert block_verdict([(y, w)] * 2, (other, w)) == "device_values"
    assert block_verdict([(y, w)] * 2, (y, w * 2)) == "device_values"
    assert block_verdict([(y, w), (other, w)], (other, w)) is None  # random: not compared
    assert block_verdict([], (other, w), device="meta") is None  # meta has no values: none asked


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


# -- meta under CUDA's rule for devices ----------------------------------------------------------
def load(path):
    return load_file(path, "device_case")


def outcome(call):
    """'ran', 'mismatch', 'copied' (a meta tensor's values copied out: the check counts it where
    the student's line copies, check_device.copied_to_cpu; on CUDA the copy runs and the mismatch
    comes where it meets the device) or 'other' for a call of the student's code."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 (what the student's code raised is the datum)
        if check_device.DEVICE_MISMATCH.search(str(exc)):
            return "mismatch"
        return "copied" if check_device.COPIED_OUT.search(str(exc)) else "other"
    return "ran"


# How the worker calls the student's code there: on a thread of its own, under the device rule.
RUNNER = {"run": isolation.runner(), "rule": devicerule.device_rule}


def runs(module, device):
    """attend and the block on `device`, called as the worker calls them (placement.py)."""
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    block = module.CausalSelfAttention(12, 3, 8)
    placement.place(block, device=device)
    x = torch.randn(2, 5, 12)
    return {"attend": outcome(lambda: placement.call_on(module.attend, device, args=(q, k, v),
                                                        **RUNNER,
                                                        kwargs={"return_weights": True})),
            "block": outcome(lambda: placement.forward_on(block, x, device, **RUNNER))}


def agree(on_cuda, on_meta):
    return {k: "mismatch" if v == "copied" else v for k, v in on_meta.items()} == on_cuda


# Small mixes of a device tensor x [2,5,12] and CPU tensors: (name, call, what CUDA does).
MIXES = [
    ("x @ w on the CPU", lambda x: x @ torch.randn(12, 3), "mismatch"),
    ("linear, w on the CPU", lambda x: torch.nn.functional.linear(x, torch.randn(3, 12)), "mismatch"),
    ("bmm, one on the CPU", lambda x: torch.bmm(x, torch.randn(2, 12, 3)), "mismatch"),
    ("einsum, one on the CPU", lambda x: torch.einsum("btd,de->bte", x, torch.randn(12, 3)),
     "mismatch"),
    ("masked_fill, mask on the CPU",
     lambda x: x.masked_fill(torch.ones(5, 12, dtype=torch.bool), 0.0), "mismatch"),
    ("where, condition on the CPU",
     lambda x: torch.where(torch.ones(5, 12, dtype=torch.bool), x, 0.0), "mismatch"),
    ("cat with a CPU tensor", lambda x: torch.cat([x, torch.zeros(2, 5, 12)]), "mismatch"),
    ("x + a CPU tensor", lambda x: x + torch.ones(5, 12), "mismatch"),
    ("x / a 0-dim CPU tensor", lambda x: x / torch.tensor(3.0), "ran"),
    ("x * a 0-dim CPU tensor, softmax", lambda x: (x * torch.tensor(0.5)).softmax(-1), "ran"),
    ("masked_fill, a 0-dim CPU fill value",
     lambda x: x.masked_fill(torch.ones(5, 12, dtype=torch.bool, device=x.device),
                             torch.tensor(-1e9)), "ran"),
    ("where, a 0-dim CPU other",
     lambda x: torch.where(torch.ones(5, 12, dtype=torch.bool, device=x.device), x,
                           torch.tensor(0.0)), "ran"),
    ("x indexed by CPU indices", lambda x: x[:, torch.tensor([0, 1])], "ran"),
    ("a CPU tensor written into x", lambda x: x.__setitem__(0, torch.zeros(5, 12)), "ran"),
    ("x.to(device) of a CPU tensor", lambda x: x + torch.ones(5, 12).to(x.device), "ran"),
]


def mixed(call, device):
    x = torch.randn(2, 5, 12, device=device)
    return outcome(lambda: RUNNER["run"](call, (x,), contexts=devicerule.device_rule(device)))


@pytest.mark.parametrize("name,call,cuda", MIXES, ids=[m[0] for m in MIXES])
def test_meta_refuses_what_cuda_refuses(name, call, cuda):
    assert mixed(call, "meta") == cuda


def test_meta_alone_lets_a_cpu_matrix_product_through():
    """Why the rule exists: torch's own meta kernel of mm takes a CPU operand."""
    x = torch.randn(2, 5, 12, device="meta")
    assert outcome(lambda: x @ torch.randn(12, 3)) == "ran"
    assert devicerule.device_rule("cpu") == ()  # elsewhere nothing is added


@pytest.mark.parametrize("path", [ROOT / "solutions" / "attention.py"] + CORRECT,
                         ids=["reference"] + [p.name for p in CORRECT])
def test_correct_code_runs_on_meta_under_the_rule(path):
    if path.suffix != ".py":
        pytest.skip("a notebook or a folder: graded through the worker in test_corpus")
    assert set(runs(load(path), "meta").values()) <= {"ran", "other"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("name,call,cuda", MIXES, ids=[m[0] for m in MIXES])
def test_cuda_refuses_what_the_table_says(name, call, cuda):
    assert mixed(call, "cuda") == cuda


CASES = [ROOT / "solutions" / "attention.py"] + MISTAKES


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_meta_and_cuda_agree(path):
    module = load(path)
    on_cuda, on_meta = runs(module, "cuda"), runs(module, "meta")
    assert agree(on_cuda, on_meta), (on_cuda, on_meta)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_the_worker_grades_on_cuda_where_it_is_present():
    g = graded(ROOT / "solutions" / "attention.py")
    assert "cuda" in g.data["metadata"].get("devices", [])


def verdicts_of(out):
    """{student: {check id: (status, score, verdict keys)}} and {student: devices} of a batch."""
    import json

    checks, devices = {}, {}
    for path in (out / "students").glob("*/report.json"):
        report = json.loads(path.read_text(encoding="utf-8"))["report"]
        name = path.parent.name
        devices[name] = report["metadata"].get("devices")
        checks[name] = {c["id"]: (c["status"], c["score"],
                                  sorted(v["key"] for v in c.get("verdicts", [])))
                        for c in report["checks"]}
    return checks, devices


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_a_gpu_grades_the_corpus_as_a_machine_without_one(tmp_path):
    """Every wrong and correct file of the corpus graded twice through the batch on this machine:
    with its GPU, and with the GPU hidden from the grader (CUDA_VISIBLE_DEVICES=""), as a machine
    without one grades.  Every check's status, score and verdicts are the same: where CUDA ran,
    it judged what meta judges (only a note that meta could not judge may go)."""
    import shutil
    import subprocess
    import sys

    inbox = tmp_path / "in"
    inbox.mkdir()
    for kind in ("wrong", "correct"):
        for path in (SUBMISSIONS / kind).iterdir():
            if path.suffix in (".py", ".ipynb"):
                shutil.copy(path, inbox / path.name)
            elif path.is_dir() and path.name != "__pycache__":
                shutil.copytree(path, inbox / path.name)
    graded_by = {}
    for name, hidden in (("gpu", False), ("no gpu", True)):
        env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if hidden else {}))
        out = tmp_path / name.replace(" ", "_")
        argv = [sys.executable, "-m", "grader", "batch", str(inbox), "--out", str(out)]
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        graded_by[name] = verdicts_of(out)
    (with_gpu, where), (without, where_not) = graded_by["gpu"], graded_by["no gpu"]
    assert len(with_gpu) == len(list(inbox.iterdir())) == len(without)
    ran = [n for n, found in where.items() if found]  # [] where the worker never asked (a crash)
    assert ran and all("cuda" in where[n] for n in ran)
    assert not any("cuda" in (found or []) for found in where_not.values())
    differ = [(n, c, without[n][c], with_gpu[n][c]) for n in without for c in without[n]
              if without[n][c] != with_gpu[n].get(c)]
    assert differ == []


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
