"""The check runner (grader/judge/runner.py): every check runs through pytest's own protocol, each
student's result is pytest-json-report's document of its tests, and the rubric's parts are read
from it; what a check notes belongs to the submission it was run for, never to the next one a
judge grades; an error of the kit itself (not the submission's) is loud."""
import json
import os
import types

import pytest

from grader import __main__ as cli
from grader import rubric as rubric_module
from grader.judge import runner
from grader.judge.secret import variants
from grader.judge.service import Judge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION = os.path.join(ROOT, "solutions", "attention.py")

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


def checks_session(tmp_path, monkeypatch, name, source):
    folder = tmp_path / "checks"
    folder.mkdir()
    # a module name of its own per test: pytest refuses a second check_runner.py from elsewhere
    (folder / f"check_runner_{name}.py").write_text(source)
    monkeypatch.setattr(runner, "check_files", lambda visibilities: [str(folder)])
    return runner.CheckSession(("public",))


@pytest.fixture
def session(tmp_path, monkeypatch, request):
    with checks_session(tmp_path, monkeypatch, request.node.name, CHECKS) as checks:
        yield checks


def test_a_students_result_is_the_pytest_json_report_of_its_tests(session):
    document = session.run(types.SimpleNamespace(seed=7, note=True))
    tests = {t["nodeid"].split("::")[-1]: t for t in document["tests"]}
    assert list(tests) == ["test_direct[1]", "test_direct[2]", "test_with_a_fixture_of_pytest",
                           "test_failing_with_a_fixture_of_pytest"]
    assert document["summary"] == {"passed": 2, "failed": 2, "total": 4, "collected": 4}
    assert document["exitcode"] == 1
    assert {n: t["metadata"]["check"] for n, t in tests.items()} == {
        "test_direct[1]": "x.direct", "test_direct[2]": "x.direct",
        "test_with_a_fixture_of_pytest": "x.protocol",
        "test_failing_with_a_fixture_of_pytest": "x.protocol_fails"}
    assert all(t["metadata"]["max_points"] == 0.0 == t["metadata"]["points"]  # not in the rubric
               for t in tests.values())
    failed = tests["test_direct[2]"]
    assert failed["outcome"] == "failed" and failed["call"]["outcome"] == "failed"
    assert tests["test_direct[1]"]["user_properties"] == [
        {"kit_note": {"key": "seen", "fields": {"seed": "7"}}}]


def test_checks_with_and_without_pytests_fixtures_are_recorded_alike(session):
    noting = runner.parts_of(session.run(types.SimpleNamespace(seed=7, note=True)))
    direct, protocol = noting["x.direct"], noting["x.protocol"]
    assert [p["status"] for p in direct] == ["passed", "error"]
    failed_plain, failed_with_fixtures = direct[1], noting["x.protocol_fails"][0]
    assert failed_plain["verdict"]["key"] == failed_with_fixtures["verdict"]["key"] == "internal"
    assert failed_plain["status"] == failed_with_fixtures["status"]  # a bare assert: the kit's own
    seen = {"key": "seen", "fields": {"seed": "7"}}
    assert direct[0]["note"] == seen and protocol[0]["note"] == seen
    # the next student noted nothing: no note of the one before is said on its cards
    quiet = runner.parts_of(session.run(types.SimpleNamespace(seed=8, note=False)))
    assert all("note" not in part for parts in quiet.values() for part in parts)
    assert [p["status"] for p in quiet["x.protocol"]] == ["passed"]


def test_only_the_checks_asked_for_run(session):
    """`only` (the notebook's `%check EXERCISE`): the checks of those ids run, with the verdicts
    they get among all the others; the rest are not called at all."""
    def parts(only=None):
        return runner.parts_of(session.run(types.SimpleNamespace(seed=7, note=False), only))

    everything = parts()
    one = parts({"x.protocol_fails"})
    assert set(one) == {"x.protocol_fails"} and one["x.protocol_fails"] == \
        everything["x.protocol_fails"]
    two = parts({"x.direct", "x.protocol"})
    assert two == {k: v for k, v in everything.items() if k in ("x.direct", "x.protocol")}
    assert parts(set()) == {}
    # and the session goes on grading everything for the next student
    assert parts() == everything


def test_the_kits_checks_each_carry_their_rubric_id_and_share_of_points():
    with runner.CheckSession(("public", "hidden")) as checks:
        document = checks.run(types.SimpleNamespace(seed=1))  # each check fails at once: no worker
    tests = document["tests"]
    assert len(tests) > 40 and all(t["metadata"]["check"] for t in tests)
    rubric = rubric_module.load()
    assert {t["metadata"]["check"] for t in tests} == {c.id for c in rubric.checks}
    assert sum(t["metadata"]["max_points"] for t in tests) == \
        pytest.approx(sum(c.points for c in rubric.checks))


def test_an_error_of_the_kit_keeps_its_traceback_off_the_card(session):
    """A check ended by the kit's own exception: an `internal` verdict (the card's message, "not
    your fault") whose traceback, from the check's own frame down, is kept beside it."""
    parts = runner.parts_of(session.run(types.SimpleNamespace(seed=7, note=False)))
    verdict = parts["x.protocol_fails"][0]["verdict"]
    assert verdict["fields"] == {"message": "AssertionError: assert False"}
    assert verdict["traceback"].startswith("Traceback (most recent call last):\n  File ")
    assert "test_failing_with_a_fixture_of_pytest" in verdict["traceback"]
    assert "pluggy" not in verdict["traceback"] and "site-packages" not in verdict["traceback"]


def test_a_check_module_that_cannot_be_imported_stops_every_grading(tmp_path, monkeypatch):
    broken = CHECKS + "\nraise ValueError('a typo in the checks')\n"
    with checks_session(tmp_path, monkeypatch, "broken", broken) as checks:
        for _ in range(2):
            with pytest.raises(runner.KitError, match="could not be collected") as raised:
                checks.run(types.SimpleNamespace(seed=7, note=False))
            assert "ValueError: a typo in the checks" in str(raised.value)
            assert "check_runner_broken.py" in str(raised.value)
    assert checks.ready.is_set()  # the batch's judge waits for it: it does not wait in vain


def test_a_broken_named_mistake_makes_grade_fail_loudly(monkeypatch, capsys):
    """The reference graded with a named mistake's definition broken (the reference block is
    built through the variants' code): `grade` exits non-zero and says each error, traceback
    and all, on stderr; the cards say it is not the student's fault."""
    def broken(name):
        raise ValueError(f"no such knob in the row of {name!r}")

    monkeypatch.setattr(variants, "reference_for", broken)
    code = cli.main(["grade", SOLUTION, "--isolation", "process", "--format", "json",
                     "--lang", "en"])
    said = capsys.readouterr()
    assert code == 1
    assert "module.reference: ValueError: no such knob in the row of 'reference'" in said.err
    assert 'in reference_for\n' not in said.err and "in broken\n" in said.err
    assert "check_module_reference.py" in said.err
    card = next(c for c in json.loads(said.out)["checks"] if c["id"] == "module.reference")
    assert "not your fault" in card["feedback"] and "Traceback" not in card["feedback"]


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


def test_a_kit_error_in_a_class_goes_to_batch_log(tmp_path, capsys, monkeypatch):
    """A batch judge says each kit error, with its traceback, on its stderr (batch.log); the
    student's record is written as any other."""
    import types

    from grader.batch import judge as batch_judge

    report = {"score": 0.0, "max_score": 1.0, "metadata": {}, "checks": [{
        "id": "attend.scale", "exercise": "attend", "visibility": "public", "status": "error",
        "score": 0.0, "max_score": 1.0, "parts": [], "notes": [],
        "verdicts": [{"status": "error", "key": "internal",
                      "fields": {"message": "RuntimeError: broken variant"},
                      "traceback": "Traceback (most recent call last):\n  ...\n"
                                   "RuntimeError: broken variant\n"}]}]}
    judge = types.SimpleNamespace(begin=lambda path: (types.SimpleNamespace(),
                                                      types.SimpleNamespace()),
                                  finish=lambda sub, student, entry: report)
    written = []
    monkeypatch.setattr(batch_judge, "write_student", lambda outdir, record, lang:
                        written.append(record))
    monkeypatch.setattr(batch_judge, "attention_maps", lambda student: None)
    batch_judge._grade({"id": 1, "student": "ann", "entry": "ann.py", "digest": "d",
                        "path": "ann.py"},
                       {"fingerprint": "f", "outdir": str(tmp_path), "lang": "en"}, judge)
    err = capsys.readouterr().err
    assert "kit error grading ann.py, attend.scale: RuntimeError: broken variant" in err
    assert "Traceback (most recent call last)" in err
    assert written and written[0]["report"] is report
