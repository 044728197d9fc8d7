"""Cheap imitations of the skill earn nothing (tests/submissions/imitation/).

Each file imitates properties without the skill: of split_heads, merge_heads and attend (uniform
or random causal weights, shapes only, a memorised table for fixed inputs, faked context or
weights) or of CausalSelfAttention (an identity block, a block that is only out_proj, a block
whose attention is uniform, a lying self-description, library attention by an indirect route, a
patched worker loop, the contract's readers patched or the library block undone through names
built at run time, in a .py and in a notebook's kept statements).  Its header names the checks it imitates:
    # imitates: <check id or pattern>, ...
and on each of them it must score no more than the untouched stub (exercises/attention.py), where
it reaches into the worker in a worker forked from the fork server and in a cold worker, both of
the strongest sandbox this machine has (REACH_IN, REACH_MODES), else in a forked worker of the
strongest sandbox.
"""
import fnmatch
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import zygotes  # noqa: E402
from grader.judge.workers import forked  # noqa: E402
from grader.judge import grading  # noqa: E402
from grader.sandbox import forkserver, launch as sandbox  # noqa: E402

IMITATIONS = sorted(p for p in (ROOT / "tests" / "submissions" / "imitation").iterdir()
                    if p.suffix in (".py", ".ipynb"))
STUB = ROOT / "exercises" / "attention.py"
ISOLATIONS = ["process"] + (["bubblewrap"] if sandbox.bubblewrap_works() else [])
MODES = [(isolation, fork) for isolation in ISOLATIONS for fork in (False, True)
         if not fork or forkserver.supported(isolation)]
IMITATES = re.compile(r"^# imitates: (.+?)\s*$", re.M)

_graded = {}


def imitated(path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":  # the header is a comment in the notebook's first code cell
        text = "".join("".join(c["source"]) for c in json.loads(text)["cells"]
                       if c["cell_type"] == "code")
    match = IMITATES.search(text)
    assert match, f"{path.name} has no '# imitates:' line"
    return [p.strip() for p in match.group(1).split(",")]


def _forked(isolation):
    server = zygotes.server(isolation)
    server.wait_ready()
    return forked(server)


def graded(path, isolation, fork):
    """{check id: score} of one grading, once per (file, mode)."""
    key = (path, isolation, fork)
    if key not in _graded:
        sub, student = grading.start(str(path), isolation, None, _forked(isolation) if fork else None)
        data = grading.finish(sub, student)
        assert data["metadata"]["isolation"] == isolation
        _graded[key] = {c["id"]: c["score"] for c in data["checks"]}
    return _graded[key]


def test_the_suite_has_every_kind_of_imitation():
    names = {p.stem for p in IMITATIONS}
    assert {"identity_block", "out_proj_only", "uniform_block", "lying_mask", "library_indirect",
            "patched_worker", "uniform_weights", "random_causal", "memorised_table", "shapes_only",
            "context_faked", "weights_faked", "tamper_registry_string_names",
            "tamper_registry_computed_names", "tamper_registry_notebook", "tamper_library_undone",
            "tamper_library_notebook"} <= names


# Imitations that reach into the worker (its modules, torch's registries, the library, the
# device it runs on) may fare otherwise in a forked worker than in a cold one (REACH_MODES).  The
# others imitate answers, which the judge reads alike in every mode (test_forkserver.py, the door
# matrix): one mode, a forked worker in the strongest sandbox, as a class grades.
REACH_IN = ("tamper_", "patched_worker", "library_indirect", "device_probe_")
# What they reach is the worker's Python (its modules, readers, audit hook, torch's dispatcher),
# prepared one way in a cold worker and another in a forked one (the zygote prepares before the
# fork), and alike whatever the sandbox: a cold plain subprocess and a cold bubblewrap worker run
# the same worker.py, and a plain zygote's child and bubblewrap's the same zygote.child and
# worker.serve (bubblewrap adds only the folder, /tmp, uid and namespaces, which no imitation
# touches): a forked and a cold worker, both of the strongest sandbox.  (A plain zygote's child
# meets a tampering's search for what the verdict relies on in tests/test_worker_sealed.py.)
# A notebook's kept statements reach the worker as a .py of the same tampering does (its twin among
# the .py files, graded cold too): what differs is the judge's reading of the notebook, so a
# notebook is graded in one mode, the answer imitations' (forked, where the sandbox can fork).
REACH_MODES = [mode for mode in MODES if mode[0] == ISOLATIONS[-1]]  # forked (where it can), cold


def modes_of(path):
    if not path.stem.startswith(REACH_IN):
        return MODES[-1:]
    return MODES[-1:] if path.suffix == ".ipynb" else REACH_MODES


CASES = [(path, mode) for path in IMITATIONS for mode in modes_of(path)]


@pytest.mark.parametrize("path,mode", CASES, ids=[
    f"{p.stem}-{i}{'-fork' if f else ''}" for p, (i, f) in CASES])
def test_imitation_scores_no_more_than_the_stub(path, mode):
    # The yardstick, the stub's scores, graded once in the answers' mode: the stub scores nothing
    # on any check (as test_doors.py holds the batch's stub to), so its zeros are as strict a
    # yardstick for a cold imitation as a cold stub's would be.
    imitation, stub = graded(path, *mode), graded(STUB, *MODES[-1])
    assert not any(stub.values()), {c: s for c, s in stub.items() if s}
    for pattern in imitated(path):
        checks = fnmatch.filter(stub, pattern)
        assert checks, f"no check matches {pattern}"
        gained = {c: (imitation[c], stub[c]) for c in checks if imitation[c] > stub[c]}
        assert gained == {}, f"{path.name} gains over the stub: {gained}"


def test_the_correct_block_beats_every_imitation_on_what_they_imitate():
    # The families are not trivially 0 for everyone: the reference earns each of them in full.
    isolation, fork = MODES[-1]  # the mode every imitation is graded in
    reference = graded(ROOT / "solutions" / "attention.py", isolation, fork)
    for path in IMITATIONS:
        for pattern in imitated(path):
            for check in fnmatch.filter(reference, pattern):
                assert reference[check] > graded(path, isolation, fork)[check], (path.name, check)
