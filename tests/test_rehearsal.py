"""A class's fork server serves rehearsal.py's requests once before its first fork
(grader/sandbox/runtime/rehearsal.py): every kind of call a worker answers is asked, each is
answered as planned, nothing of it is left for a student's grading to meet, and a fork of a
rehearsed zygote gives the verdicts of a fork of a bare one."""
import json
import os
import subprocess
import sys

import pytest

from grader.authoring import stubs as authoring
from grader.sandbox import forkserver, launch as sandbox
from grader.judge import grading
from grader.judge.workers import forked
from zygotes import shared_zygote

ROOT = authoring.ROOT
WRONG = os.path.join(ROOT, "tests", "submissions", "wrong")
CORRECT = os.path.join(ROOT, "tests", "submissions", "correct")
MODES = ["process"] + (["bubblewrap"] if sandbox.bubblewrap_works()
                       and forkserver.supported("bubblewrap") else [])

# Run where a worker runs: the runtime's modules by their bare names, in a process of their own.
REHEARSE = r"""
import json, sys
sys.path.insert(0, "grader/sandbox/runtime")
import worker
torch = worker.prepare(forks=True)
import contract, placement, rehearsal

kit = dict(worker._PREPARED)
asked, actions = set(), set()
for request in rehearsal.requests():
    for _, call in worker.calls_of(request):
        asked.add(call["op"])
        if call["op"] == "contract":
            actions.add(call["args"]["action"])
state = torch.default_generator.get_state()
first_draw = torch.rand(3).tolist()  # what a worker forked now would draw first
torch.default_generator.set_state(state)
replies = []

def keep(reply):  # as the worker's send: encoded (a reply that cannot be is an error)
    kit["wire"].encode(reply)
    replies.append(reply)

rehearsed = worker.rehearse_serving(torch, kit, send=keep)
after_draw = torch.rand(3).tolist()
torch.default_generator.set_state(state)
real_requests, rehearsal.requests = rehearsal.requests, lambda: iter([
    {"id": 1, "op": "train_copy", "args": {"seed": 0, "n_heads": 4}}])

def breaks(reply):  # the training has drawn from the generator; then something of ours fails
    raise RuntimeError("a reply the kit made wrong")

broken = worker.rehearse_serving(torch, kit, send=breaks)
rehearsal.requests = real_requests
print(json.dumps({
    "rehearsed": rehearsed, "broken": broken,
    "same_draw_after_broken": torch.rand(3).tolist() == first_draw,
    "ops": sorted(worker.operations(rehearsal, torch, kit)), "asked": sorted(asked),
    "actions": sorted(set(contract.ACTIONS) | set(placement.BLOCK_ACTIONS)),
    "asked_actions": sorted(actions),
    "errors": [[r["id"], r["error"]["type"], r["error"]["message"]] for r in replies
               if "error" in r],
    "answered": sum("ok" in r for r in replies),
    "same_draw": after_draw == first_draw,
    "grad": torch.is_grad_enabled(), "dtype": str(torch.get_default_dtype()),
}))
"""


@pytest.fixture(scope="module")
def rehearsed():
    done = subprocess.run([sys.executable, "-I", "-c", REHEARSE], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_every_kind_of_call_a_worker_answers_is_rehearsed(rehearsed):
    # A new op or contract action not added to rehearsal.requests fails here.
    assert rehearsed["asked"] == rehearsed["ops"]
    assert rehearsed["asked_actions"] == rehearsed["actions"]


def test_each_call_is_answered_and_only_the_planned_ones_raise(rehearsed):
    # The two refusals a student's code makes (a bad number of heads): the path of an error.
    assert [e[1] for e in rehearsed["errors"]] == ["ValueError", "ValueError"]
    assert all("must divide" in e[2] for e in rehearsed["errors"])
    assert rehearsed["answered"] >= 30


def test_the_rehearsal_leaves_torch_as_it_found_it(rehearsed):
    assert rehearsed["rehearsed"] is True
    assert rehearsed["same_draw"]  # the CPU's generator: the worker's first draw is unchanged
    assert rehearsed["grad"] and rehearsed["dtype"] == "torch.float32"


def test_a_rehearsal_made_wrong_is_only_a_warm_up_lost(rehearsed):
    # an error of the kit's own halfway: the fork server says it did not rehearse and serves on,
    # with torch as it found it (the training before it drew from the generator)
    assert rehearsed["broken"] is False
    assert rehearsed["same_draw_after_broken"]


def outcome(data):
    return data["score"], [(c["id"], c["status"], c["score"],
                            json.dumps(c["verdicts"], sort_keys=True, default=str))
                           for c in data["checks"]]


@pytest.mark.parametrize("mode", MODES)
def test_a_rehearsed_zygote_grades_as_a_bare_one(mode):
    """A class's zygote (shared by two judges) rehearses, a judge's own does not; forks of each
    give the same verdicts, numbers included, on files whose verdicts follow the worker's random
    state (dropout left on, a Linear made in forward) and on a spread of others.  (These verdicts
    stayed the same with the generator left as the rehearsal moved it: that restore is held by
    test_the_rehearsal_leaves_torch_as_it_found_it.)"""
    (proc, runtime_dir, spool), shared = shared_zygote(mode)
    alone = forkserver.ForkServer(mode)
    names = sorted(n for n in os.listdir(WRONG) if n.endswith(".py"))
    random = ["attend_dropout_functional.py", "block_dropout_active.py",
              "linear_made_in_forward.py"]
    paths = [os.path.join(WRONG, n) for n in random + names[::9]] + [
        authoring.SOLUTION, os.path.join(CORRECT, "einsum.py")]
    try:
        shared[0].wait_ready()
        alone.wait_ready()
        assert shared[0].rehearsed and not alone.rehearsed
        for path in paths:
            got = [grading.finish(*grading.start(path, mode, None, forked(server)))
                   for server in (shared[0], alone)]
            assert [g["metadata"]["worker_start"] for g in got] == ["fork", "fork"]
            assert outcome(got[0]) == outcome(got[1]), os.path.basename(path)
    finally:
        for server in shared + (alone,):
            server.close()
        forkserver.stop_zygote(proc, runtime_dir, spool)


def test_the_student_bundle_leaves_the_rehearsal_out_and_its_workers_still_prepare():
    """rehearsal.py's block is one mask and one scale away from the exercise's answer: it stays
    with the batch, on the instructor's side; a worker of the bundle asked to rehearse says it
    could not, and serves as before."""
    from grader.authoring import release

    assert "sandbox/runtime/rehearsal.py" in {
        os.path.relpath(os.path.join(root, name), os.path.join(ROOT, "grader"))
        for root, _, names in os.walk(os.path.join(ROOT, "grader")) for name in names}
    assert not any(path.endswith("rehearsal.py") for path in release.released_grader_files())
    assert not os.path.exists(os.path.join(ROOT, "release", "grader", "sandbox", "runtime",
                                           "rehearsal.py"))
    script = ("import sys; sys.path.insert(0, 'release/grader/sandbox/runtime'); import worker; "
              "worker.prepare(forks=True, rehearse=True); print(worker.rehearsed)")
    done = subprocess.run([sys.executable, "-I", "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "False"
