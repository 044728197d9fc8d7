"""The check runner (grader/judge/runner.py): a check asking only for the kit's fixtures is called
directly, any other through pytest's own protocol, and both are recorded alike; what a check
notes belongs to the submission it was run for, never to the next one a judge grades."""
import os
import types

import pytest

from grader.judge import runner
from grader.judge.service import Judge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHECKS = '''
import pytest


@pytest.mark.check("x.direct")
@pytest.mark.parametrize("gain", [1, 2])
def test_direct(student, seed, record_note, gain):
    if student.note:
        record_note("kit_note", {"key": "seen", "fields": {"seed": str(seed)}})
    assert gain == 1


@pytest.mark.check("x.protocol")
def test_with_a_fixture_of_pytest(student, record_note, tmp_path):
    if student.note:
        record_note("kit_note", {"key": "seen", "fields": {"seed": str(student.seed)}})
    assert tmp_path.is_dir()


@pytest.mark.check("x.protocol_fails")
def test_failing_with_a_fixture_of_pytest(student, monkeypatch):
    assert False
'''


@pytest.fixture
def session(tmp_path, monkeypatch, request):
    folder = tmp_path / "checks"
    folder.mkdir()
    # a module name of its own per test: pytest refuses a second check_runner.py from elsewhere
    (folder / f"check_runner_{request.node.name}.py").write_text(CHECKS)
    monkeypatch.setattr(runner, "check_files", lambda visibilities: [str(folder)])
    with runner.CheckSession(("public",)) as checks:
        yield checks


def test_checks_with_and_without_pytests_fixtures_are_recorded_alike(session):
    noting = session.run(types.SimpleNamespace(seed=7, note=True))
    assert [runner.direct_plan(item) is None for item in session.plugin.plans] == \
        [False, False, True, True]
    direct, protocol = noting["x.direct"], noting["x.protocol"]
    assert [p["status"] for p in direct] == ["passed", "error"]
    failed_directly, failed_in_pytest = direct[1], noting["x.protocol_fails"][0]
    assert failed_directly["verdict"]["key"] == failed_in_pytest["verdict"]["key"] == "internal"
    assert failed_directly["status"] == failed_in_pytest["status"]  # a bare assert: the kit's own
    seen = {"key": "seen", "fields": {"seed": "7"}}
    assert direct[0]["note"] == seen and protocol[0]["note"] == seen
    # the next student noted nothing: no note of the one before is said on its cards
    quiet = session.run(types.SimpleNamespace(seed=8, note=False))
    assert all("note" not in part for parts in quiet.values() for part in parts)
    assert [p["status"] for p in quiet["x.protocol"]] == ["passed"]


def test_only_the_checks_asked_for_run(session):
    """`only` (the notebook's `%check EXERCISE`): the checks of those ids run, with the verdicts
    they get among all the others; the rest are not called at all."""
    everything = session.run(types.SimpleNamespace(seed=7, note=False))
    one = session.run(types.SimpleNamespace(seed=7, note=False), only={"x.protocol_fails"})
    assert set(one) == {"x.protocol_fails"} and one["x.protocol_fails"] == \
        everything["x.protocol_fails"]
    two = session.run(types.SimpleNamespace(seed=7, note=False), only={"x.direct", "x.protocol"})
    assert two == {k: v for k, v in everything.items() if k in ("x.direct", "x.protocol")}
    assert session.run(types.SimpleNamespace(seed=7, note=False), only=set()) == {}
    # and the session goes on grading everything for the next student
    assert session.run(types.SimpleNamespace(seed=7, note=False)) == everything


def test_the_kits_checks_are_all_called_directly():
    with runner.CheckSession(("public", "hidden")) as checks:
        checks.run(types.SimpleNamespace(seed=1))  # each check fails at once: no worker
        plans = checks.plugin.plans
    assert len(plans) > 40 and all(plan is not None for plan in plans.values())


def test_a_note_is_said_only_for_the_submission_that_made_it(tmp_path):
    with open(os.path.join(ROOT, "solutions", "attention.py"), encoding="utf-8") as handle:
        source = handle.read()
    forward = source.index("    def forward(self, x")
    body = source.index('"""', source.index('"""', forward) + 3) + 4  # after its docstring
    refusing = tmp_path / "attention.py"
    refusing.write_text(source[:body] + "        if x.dtype == torch.bfloat16:\n"
                        "            raise RuntimeError('no bfloat16 here')\n" + source[body:],
                        encoding="utf-8")
    with Judge(start="fork") as judge:
        first = judge.grade(str(refusing))
        second = judge.grade(os.path.join(ROOT, "solutions", "attention.py"))
    noted = {c["id"]: c["notes"] for c in first["checks"] if c.get("notes")}
    assert [n["key"] for n in noted.get("module.dtype", [])] == ["dtype_not_judged"]
    assert "no bfloat16 here" in str(noted)
    assert not [c["id"] for c in second["checks"] if c.get("notes")]
