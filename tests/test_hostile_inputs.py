"""Issue 13, continued from tests/test_hostile.py (its attacks and helpers): the wire, the judge's
inputs (zips, notebooks, folders) and what the TA reads.  A file of its own so that make test's
workers (`--dist loadfile`) run these beside the attacks on the sandbox."""
import json
import os
import re
import shutil

import pytest

from grader import inert, safefs
from grader.judge import grading, submission
from grader.render import report
from grader.sandbox.launch import WorkerFailure
from grader.sandbox.runtime import wire
from scratch import private_tempdir
from test_hostile import (CLAIMED, LIMITS, MODES, ONE_COLD, REFERENCE, RUBRIC, attack, eventually,
                          grade, pool_processes, shm_segments)

# What these attacks meet is the judge's (its wire decoder and size caps, the reply's id, its
# writers) and the worker's own wire, the same code whatever the sandbox and however the worker
# started: they are graded in the forked modes (a plain zygote's worker and bubblewrap's), where
# the worker restarted after each refused reply is a fork, not a cold start (in a cold worker each
# forgery cost ~16 s of CPU a mode, for the same refusals).  A cold worker prepares its wire and
# key itself where a forked one inherits the zygote's (worker.prepare): the forgery of the reply's
# id, signed with a key of its own, also meets one cold worker (test_a_cold_workers_forged_...).
FORKED = [m for m in MODES if m.startswith("fork-")]
FORGERIES = [(name, mode) for name in ("forge_reply_amplified", "forge_reply_wrong_id")
             for mode in FORKED]


# -- the wire ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,mode", FORGERIES)
def test_a_forged_reply_is_refused_before_it_is_materialised(tmp_path, mode, name):
    g = grade(tmp_path, attack(name), mode)
    for check, status in g.statuses.items():
        if check.startswith("attend."):
            assert status == "error" and g.keys[check][0] in ("protocol", "crashed"), \
                (check, g.keys[check])
    g.assert_honest_parts_pass()


@pytest.mark.parametrize("mode", ONE_COLD)
def test_a_cold_workers_forged_reply_is_refused_at_its_signature(tmp_path, mode):
    """The forgery of the reply's id in a cold worker, which made its wire and key itself: the one
    call it answers is refused (the frame is not signed with the worker's key) as the protocol's
    error, and the worker ends leaving nothing.  What a whole grading does after each refusal (a
    fresh worker, every attend check an error, the honest parts' points) is the judge's, graded
    above in the forked modes; a cold worker's restarts within one budget are test_hostile.py's
    (test_import_time_and_restarts_count_against_one_budget).  One cold start, not one for each
    of the grading's refusals (~16 s of CPU)."""
    import torch

    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "attention.py").write_text(attack("forge_reply_wrong_id"), encoding="utf-8")
    shm_before = shm_segments()
    with private_tempdir(prefix="hostile-scratch-") as scratch:
        sub, student = grading.start(str(folder), mode, LIMITS)
        try:
            q = torch.randn(1, 2, 3, 4)
            with pytest.raises(WorkerFailure) as refused:
                student.attend(q, q, q)
            assert student.worker is None  # the worker that sent it is ended
        finally:
            student.close()
            sub.cleanup()
    assert refused.value.kind == "protocol", refused.value
    assert "did not sign" in refused.value.message, refused.value.message
    assert student.starts == 1 and student.workers.kind == "exec"  # one cold worker
    assert eventually(lambda: not os.listdir(scratch)), os.listdir(scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    assert eventually(lambda: not (shm_segments() - shm_before)), "a segment outlived the worker"
    assert eventually(lambda: pool_processes(CLAIMED) == []), "a worker's process outlived it"


@pytest.mark.parametrize("mode", FORKED)
def test_reserved_keys_in_student_data_stay_data(tmp_path, mode):
    g = grade(tmp_path, attack("reserved_keys"), mode)
    assert g.statuses["quiz.format"] == "failed"  # a dict, not the tuple or bool asked for
    assert g.statuses["quiz.q1_shape"] != "passed"
    assert g.statuses["quiz.q2_shape_is_enough"] != "passed"
    assert "protocol" not in {k for keys in g.keys.values() for k in keys}
    assert g.statuses["attend.scale"] == "passed"


def test_wire_escapes_reserved_keys_and_caps_what_it_materialises():
    import torch

    data = {"$tensor": [0, 4], "dtype": "float32", "shape": [1], "$$x": 1, "t": torch.ones(2)}
    back = wire.decode(*_split(wire.encode(data)))
    assert back["$tensor"] == [0, 4] and back["$$x"] == 1 and torch.equal(back["t"], torch.ones(2))
    span = {"$tensor": [0, 4096], "dtype": "float32", "shape": [1024]}
    header = json.dumps({"id": 1, "ok": [span] * 2}).encode()
    with pytest.raises(wire.ProtocolError, match="more bytes"):
        wire.decode(header, bytes(4096))
    with pytest.raises(wire.ProtocolError, match="reserved"):
        wire.decode(json.dumps({"$danger": 1}).encode(), b"")
    with pytest.raises(wire.ProtocolError, match="out of order"):
        wire.decode(json.dumps({"id": 8, "ok": [span]}).encode(), bytes(4096), expect_id=7)


def test_a_frame_over_the_caps_is_refused_from_its_prefix_and_one_at_the_caps_is_bounded():
    import tracemalloc

    import torch
    from test_wire import stream  # fill(view) over bytes, each read's room noted

    asked = []
    for header_len, payload_len in ((wire.MAX_HEADER + 1, 0), (10, wire.MAX_PAYLOAD + 1)):
        asked.clear()
        frame = wire.PREFIX.pack(wire.MAGIC, header_len, payload_len) + b"{" * 100
        with pytest.raises(wire.ProtocolError, match="too large"):
            wire.FrameReader().read_frame(stream(frame, asked=asked))
        assert asked == [wire.PREFIX.size]  # the prefix alone is read: nothing sized by it
    with pytest.raises(wire.ProtocolError, match="too large to send"):
        wire.encode({"ok": torch.zeros(wire.MAX_PAYLOAD // 4 + 1)})  # the worker's side refuses too
    frame = wire.encode({"id": 1, "ok": (torch.zeros(wire.MAX_PAYLOAD // 4),
                                         [[]] * (wire.MAX_HEADER // 4 - 64))})
    tracemalloc.start()
    try:
        reply = wire.decode(*wire.FrameReader().read_frame(stream(frame)), expect_id=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reply["ok"][0].numel() == wire.MAX_PAYLOAD // 4
    assert peak <= wire.JUDGE_FRAME_BYTES, (peak, wire.JUDGE_FRAME_BYTES)


def _split(frame):
    _, header_len, payload_len = wire.PREFIX.unpack(frame[:wire.PREFIX.size])
    header = frame[wire.PREFIX.size:wire.PREFIX.size + header_len]
    return header, frame[wire.PREFIX.size + header_len:]


# -- the judge's inputs -----------------------------------------------------------------------------
def _zip(path, members):
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)


def test_zip_caps_make_an_entry_ungradable_with_the_reason(tmp_path):
    many = tmp_path / "many.zip"
    _zip(many, [("attention.py", REFERENCE)] + [(f"junk/{i}.txt", b"") for i in range(1500)])
    with pytest.raises(submission.SubmissionError, match="1501 members"):
        submission.load(str(many))
    large = tmp_path / "large.zip"  # compresses to almost nothing, inflates to 300 MiB
    _zip(large, [("attention.py", REFERENCE)] + [(f"z{i}.bin", bytes(60 * 2 ** 20))
                                                 for i in range(5)])
    with pytest.raises(submission.SubmissionError, match="uncompressed"):
        submission.load(str(large))


def test_a_slow_package_check_stops_at_its_time_cap(tmp_path, monkeypatch):
    from grader.judge import manifest

    listed = {f"f{i}.py": {"sha256": "0"} for i in range(50)}
    package = {"kind": manifest.KIND, "student": "s", "files": listed, "work": "attention.py"}
    slow = tmp_path / "slow.zip"
    _zip(slow, [("manifest.json", json.dumps(package)), ("attention.py", REFERENCE)]
         + [(name, b"x") for name in listed])
    monkeypatch.setattr(submission, "ZIP_SECONDS", -1.0)  # the cap already passed: no clock race
    with pytest.raises(submission.SubmissionError, match="took too long"):
        submission.load(str(slow))


def test_a_notebook_100k_levels_deep_is_ungradable_with_a_reason(tmp_path):
    deep = tmp_path / "attention.ipynb"
    deep.write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(submission.SubmissionError, match="not a readable notebook"):
        submission.load(str(deep))


def test_a_notebook_with_a_lone_surrogate_loads(tmp_path):
    book = tmp_path / "attention.ipynb"
    book.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "x = '\ud800'\n"}]}))
    sub = submission.load(str(book))
    try:
        assert "\ud800" in sub.source
        folder = sub.work_dir  # was: UnicodeEncodeError writing the work file
        with open(os.path.join(folder, "attention.py"), "rb") as handle:
            assert "\ud800".encode("utf-8", "surrogatepass") in handle.read()
    finally:
        sub.cleanup()
    assert not os.path.exists(folder)


def _deep(folder, depth=1500):
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


def test_a_folder_entry_1500_levels_deep_is_listed_and_ungradable(tmp_path):
    from grader.batch import entries

    folder = tmp_path / "class"
    (folder / "deep").mkdir(parents=True)
    _deep(folder / "deep")
    (folder / "alice.py").write_text(REFERENCE)
    try:
        listed = {e.student: e for e in entries.list_entries(str(folder))}
        assert set(listed) == {"alice", "deep"} and len(listed["deep"].digest) == 64
        with pytest.raises(submission.SubmissionError, match="too deep|no attention"):
            submission.load(str(folder / "deep"))
    finally:  # pytest's own clean-up of old temp folders recurses and would fail on it later
        safefs.remove_tree(str(folder / "deep"))


# -- what the TA reads -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", FORKED)
def test_a_hostile_message_is_inert_in_every_writer(tmp_path, mode):
    g = grade(tmp_path, attack("hostile_message"), mode)
    data = g.data
    assert g.statuses["attend.scale"] == "failed"
    message = next(v for c in data["checks"] for v in c["verdicts"] if v["key"] == "raised")
    assert "\ud800" in message["fields"]["message"]  # the student's string reached the judge whole
    outputs = {"text": report.to_text(RUBRIC, data, "en")}
    for fmt, render in report.RENDERERS.items():
        outputs[fmt] = render(RUBRIC, data, "en")
    for fmt, text in outputs.items():
        text.encode("utf-8")  # no lone surrogate left: every writer can write it
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, fmt
    assert "\\x1b]52" in outputs["text"]  # made visible, not dropped
    markdown = outputs["markdown"]
    assert "\n# Hacked" not in _outside_fences(markdown)
    assert "<script>" not in _outside_fences(markdown)
    for test in json.loads(outputs["gradescope"])["tests"]:
        assert "\n# Hacked" not in _outside_fences(test["output"])
    assert json.loads(outputs["json"])["checks"]  # valid JSON


def _outside_fences(markdown):
    """The Markdown text outside fenced code blocks (a fence closes only with as many backticks)."""
    out, fence = [], None
    for line in markdown.splitlines():
        run = re.match(r"^(`{3,})", line)
        if fence is None and run:
            fence = run.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            out.append(line)
    return "\n".join(out)


def test_inert_rules():
    assert inert.for_terminal("a\x1b[2Jb\n\tc\x9b\ud800") == "a\\x1b[2Jb\n\tc\\x9b\\ud800"
    fenced = inert.markdown_fence("x ````` y")
    assert fenced.startswith("``````text\n") and fenced.endswith("\n``````")
    assert inert.markdown_inline("# [a](b) <i> x.py") == "\\# \\[a\\](b) \\<i\\> x.py"
    for start in "=+-@\t\r":
        assert inert.csv_cell(start + "HYPERLINK(1)").startswith("'")
    assert inert.csv_cell("alice") == "alice"
    assert json.loads(inert.json_text({"m": "\ud800é"}, ensure_ascii=False)) == {"m": "\ud800é"}
    assert "&lt;script&gt;" in inert.html("<script>\x1b")


@pytest.mark.parametrize("lines", [0, 1, 3, 6])
def test_json_text_one_member_a_line_is_the_same_json(lines):
    """json_text(lines=N): the same JSON as json.dumps (keys as json writes them, empty
    containers, NaN refused), student strings still inert; one member a line down to N levels,
    so that deep enough it is json's own indented text, and at 0 its one line."""
    data = {"m": "\ud800é\u202e", "report": {"checks": [{"id": "a", "parts": [1, [2, {}]]},
                                                          {"id": "b", "score": 1.5}], "e": []},
            2: True, False: None, None: 2.5, "z": {}}
    options = dict(ensure_ascii=False, allow_nan=False)
    text = inert.json_text(data, lines=lines, indent=1, **options)
    assert json.loads(text) == json.loads(json.dumps(data))
    assert "\\ud800" in text and "\\u202e" in text and "\u202e" not in text
    if lines == 0:
        assert text == inert.json_text(data, **options)
    if lines == 6:
        assert text == inert.json_text(data, indent=1, **options)
    assert ('\n   {"id": "a", "parts": [1, [2, {}]]},\n' in text) == (lines == 3)  # a check a line
    assert text.count("\n") == {0: 0, 1: 7, 3: 13, 6: 25}[lines]
    ordered = inert.json_text(data, lines=2, sort_keys=False, indent=1)
    assert ordered.index('"z"') > ordered.index('"null"')
    keys = inert.json_text({"b": 1, "a": {"d": 1, "c": 2}}, lines=2, sort_keys=True)
    assert keys.index('"a"') < keys.index('"b"') and keys.index('"c"') < keys.index('"d"')
    for refused in ({"x": [float("nan")]}, {float("nan"): 1}):
        with pytest.raises(ValueError):
            inert.json_text(refused, lines=lines, allow_nan=False)


# -- the judge's inputs, again: names (a class of them: tests/test_hostile_batch.py) ---------------
def test_extensions_are_read_whatever_their_case(tmp_path):
    book = {"cells": [{"cell_type": "code", "source": REFERENCE}]}
    (tmp_path / "ALICE.PY").write_text(REFERENCE)
    (tmp_path / "Bob.IPYNB").write_text(json.dumps(book))
    (tmp_path / "carol").mkdir()
    (tmp_path / "carol" / "Attention.PY").write_text(REFERENCE)
    _zip(tmp_path / "DAVE.ZIP", [("work/ATTENTION.IPYNB", json.dumps(book))])
    for name, kind in (("ALICE.PY", "python"), ("Bob.IPYNB", "notebook"), ("carol", "python"),
                       ("DAVE.ZIP", "notebook")):
        with submission.load(str(tmp_path / name)) as sub:
            assert sub.kind == kind and "def attend" in sub.source, name
