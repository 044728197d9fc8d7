"""The class page as a TA uses it (issue 25): a mixed class graded once per module by the real CLI
(the untouched stub, an exit at import, an endless loop, an exit in attend, an unreadable zip,
quiz mistakes, a disguised copy, a package whose manifest names someone else, a notebook with a
stray cell), two TA overrides set and one removed by the override command; then the students table (order,
status, flags), the reteach table, the override record and the card's badge, in zh and in en,
the gradebook, Gradescope's results and the page drawn by headless Chromium.

SUMMARY_SCREENSHOT=/some/folder keeps the screenshots (summary.png, and erin.png, taken only then)
for a look.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader import rubric  # noqa: E402
from grader.batch import overrides  # noqa: E402
from grader.render import report  # noqa: E402
from test_classview import disguise, package_of  # noqa: E402
from grader import words as vocabulary  # noqa: E402
from grader.render import feedback_html as report_html  # noqa: E402
import words as one_language  # noqa: E402

PY = sys.executable
RUBRIC = rubric.load()
CORRECT = ROOT / "tests" / "submissions" / "correct"
WRONG = ROOT / "tests" / "submissions" / "wrong"
BAD_PARAMS = "Q1_FORMAL_PARAMS = 16640  # with the biases\n"


def styled(name, tail=""):
    """A correct style of its own (none is a near-copy of another), with `tail` appended."""
    return (CORRECT / name).read_text(encoding="utf-8") + tail


def attend_replaced(body):
    """attend replaced at the end of the file: the module (which calls it) is hit too."""
    return f"\n\ndef attend(q, k, v, mask=None, return_weights=False):\n    {body}\n"


def stray_notebook(source):
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": source.splitlines(True)},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": ["for step in range(3):\n", "    print(step)\n"]}]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def make_class(folder):
    folder.mkdir(parents=True)
    alice = styled("einsum.py")
    (folder / "alice.py").write_text(alice, encoding="utf-8")
    with zipfile.ZipFile(folder / "carol.zip", "w") as archive:  # her copy, disguised
        archive.writestr("carol/attention.py", disguise(alice))
    shutil.copy(ROOT / "exercises" / "attention.py", folder / "stub.py")
    # An endless loop asleep, not spinning: to the judge the same hang (no answer within the
    # call's time, the worker killed), without a core burnt for each call's whole time.
    (folder / "loop.py").write_text(styled("where_mask.py", "\nimport time\n" + attend_replaced(
        "while True: time.sleep(1)")))
    (folder / "crash.py").write_text(styled("manual_softmax.py",
                                            attend_replaced("import os; os._exit(3)")))
    (folder / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")
    shutil.copy(ROOT / "tests" / "submissions" / "hostile" / "exit_at_import.py",
                folder / "exits.py")
    (folder / "quiza.py").write_text(styled("view_permute.py", BAD_PARAMS))
    (folder / "quizb.py").write_text(styled("prescale_q.py", BAD_PARAMS
                                            + "Q2_SHAPE_IS_ENOUGH = True\n"))
    shutil.copy(WRONG / "mask_missing.py", folder / "erin.py")
    package_of(folder / "upload-9.zip", "someone.else", styled("separate_projections.py"))
    (folder / "nb.ipynb").write_text(stray_notebook(styled("helpers_and_classes.py")))


def grader(*args):
    return subprocess.run([PY, "-m", "grader", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


ERIN_WHY = "mask discussed in office hours: the idea is right"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("classpage")
    make_class(base / "class")
    out = base / "out"
    # One judge (one zygote) for the class: judges of their own are test_batch's.  The endless
    # loop holds each call for its whole time: 2 s, as test_batch's hostile class (an honest call
    # takes well under a tenth of it; training has a limit of its own).
    proc = grader("batch", base / "class", "--out", out, "--jobs", "1", "--call-timeout", "2")
    assert proc.returncode == 0, proc.stderr
    before = read_csv(out / "gradebook.csv")
    steps = [("override", out, "erin", "attend.causal", 2, "--why", ERIN_WHY, "--who", "ta.li"),
             ("override", out, "quiza", "quiz.q1_params", 1, "--why", "typo", "--who", "ta.li"),
             ("override", out, "quiza", "quiz.q1_params", "--remove", "--why", "no typo after all",
              "--who", "ta.wang")]
    for step in steps:
        done = grader(*step)
        assert done.returncode == 0, done.stderr
    listed = grader("override", out, "--list")
    english = base / "out-en"  # the same folder, its class outputs rebuilt in English
    shutil.copytree(out, english)
    again = grader("batch", base / "class", "--out", english, "--lang", "en", "--jobs", "1")
    assert again.returncode == 0 and " 0 to grade." in again.stderr, again.stderr
    unknown = grader("override", out, "bobby", "attend.causal", 1, "--why", "x")
    return {"out": out, "en": english, "before": before, "listed": listed.stdout,
            "said": [proc.stderr, done.stderr, again.stderr, unknown.stderr],
            "unknown": unknown,
            "summary": json.loads((out / "summary.json").read_text(encoding="utf-8"))}


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return {r["student"]: r for r in csv.DictReader(handle)}


def test_the_students_table_puts_the_neediest_first_with_their_flags(graded):
    roster = graded["summary"]["roster"]
    assert [(r["student"], r["status"]) for r in roster[:5]] == [
        ("broken", "ungradable"), ("stub", "untouched_stub"), ("exits", "import_failed"),
        ("crash", "crashed"), ("loop", "timed_out")]  # one rank: by score, then by name
    rest = roster[5:]
    assert all(r["status"] == "graded" for r in rest)
    assert [r["score"] for r in rest] == sorted(r["score"] for r in rest)
    assert rest[-1]["score"] == rest[-1]["max_score"]
    flags = {r["student"]: r["flags"] for r in roster}
    assert flags["alice"]["group"] == flags["carol"]["group"] == 1
    assert flags["upload-9"] == {"identity": "someone.else"}
    assert flags["nb"] == {"left_out": 1}
    # erin's wrong solution and the hostile exit are both the reference with one change each
    assert flags["erin"] == {"group": 2, "overrides": ["attend.causal"]}
    assert flags["exits"] == {"group": 2}
    assert flags["quiza"] == flags["stub"] == flags["loop"] == {}
    causes = {r["student"]: r["causes"] for r in roster}
    assert causes["quizb"] == ["quiz_wrong_q1_params", "quiz_wrong_q2_shape_is_enough"]
    assert causes["erin"] == ["mask_missing"] and causes["alice"] == []
    assert graded["summary"]["near_copies"]["groups"] == [["alice", "carol"], ["erin", "exits"]]


def test_the_gradebook_gives_each_failure_its_status_and_a_note_in_the_language(graded):
    zh, en = read_csv(graded["out"] / "gradebook.csv"), read_csv(graded["en"] / "gradebook.csv")
    statuses = {s: r["status"] for s, r in zh.items()}
    assert statuses == {"broken": "ungradable", "stub": "untouched_stub", "loop": "timed_out",
                        "crash": "crashed", "exits": "import_failed", **{s: "graded" for s in (
                            "alice", "carol", "quiza", "quizb", "erin", "upload-9", "nb")}}
    assert zh["stub"]["note"].startswith("交上来的是未改动的模板")
    assert en["stub"]["note"].startswith("The untouched stub")
    assert "超时" in zh["loop"]["note"] and "timed out" in en["loop"]["note"]
    assert "意外结束" in zh["crash"]["note"] and "ended unexpectedly" in en["crash"]["note"]
    assert zh["exits"]["note"] == "attention.py 无法导入（SystemExit: 0），所有检查都没有运行。"
    assert en["exits"]["note"] == \
        "attention.py does not import (SystemExit: 0): no check could run."
    assert "清单写的学生是 'someone.else'" in zh["upload-9"]["note"]
    assert "manifest names student 'someone.else'" in en["upload-9"]["note"]
    for row in list(zh.values()) + list(en.values()):  # two decimals at most, parts readable
        for value in (row["total"], *(row[c.id] for c in RUBRIC.checks)):
            assert not value or re.fullmatch(r"\d+(\.\d{1,2})?", value), (row["student"], value)
        assert all(re.fullmatch(r"\S+ \d+/\d+", p) for p in row["parts"].split("; ") if p)


def test_the_reteach_table_ranks_every_cause_the_quizs_too(graded):
    items = {m["key"]: m for m in graded["summary"]["mistakes"]}
    assert items["quiz_wrong_q1_params"]["who"] == ["quiza", "quizb"]
    assert items["quiz_wrong_q1_params"]["students"] == 2
    assert items["quiz_wrong_q2_shape_is_enough"]["who"] == ["quizb"]
    assert items["mask_missing"]["who"] == ["erin"]
    first = graded["summary"]["mistakes"][0]
    assert first["key"] == "quiz_wrong_q1_params"  # the most students first
    assert first["text"]["zh"].startswith("Q1_FORMAL_PARAMS 的答案不对")
    assert first["text"]["en"].startswith("The answer to Q1_FORMAL_PARAMS is wrong")
    assert first["section"] == {lang: RUBRIC.section("quiz", lang) for lang in ("zh", "en")}
    assert "「因果掩码」" in items["mask_missing"]["section"]["zh"]
    outcomes = {o["key"] for o in graded["summary"]["outcomes"]}
    assert not {k for k in outcomes if k.startswith("quiz_wrong_")}  # not "other outcomes"
    md_zh = (graded["out"] / "summary.md").read_text(encoding="utf-8")
    md_en = (graded["en"] / "summary.md").read_text(encoding="utf-8")
    assert "## 该重讲什么" in md_zh and "| 2 | " in md_zh and "quiza, quizb" in md_zh
    assert "## What to reteach" in md_en and "## Students: whom to help first" in md_en
    assert md_zh.index("## 学生：先帮谁") < md_zh.index("## 该重讲什么") < md_zh.index("## 疑似抄袭")


def test_an_override_is_a_record_with_its_history(graded):
    summary, out = graded["summary"], graded["out"]
    assert [(o["student"], o["check"], o["was"], o["score"], o["who"]) for o in
            summary["overrides"]] == [("erin", "attend.causal", 0, 2, "ta.li")]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", summary["overrides"][0]["when"])
    history = summary["override_history"]
    assert [(e["action"], e["student"], e["replaced"], e["score"], e["who"]) for e in history] == [
        ("set", "erin", 0, 2, "ta.li"), ("set", "quiza", 0, 1, "ta.li"),
        ("remove", "quiza", 1, 0, "ta.wang")]
    assert "撤销 quiza quiz.q1_params" in graded["listed"]  # in the batch's language
    rows, before = read_csv(out / "gradebook.csv"), graded["before"]
    assert rows["erin"]["attend.causal"] == "2" and before["erin"]["attend.causal"] == "0"
    assert float(rows["erin"]["total"]) == pytest.approx(float(before["erin"]["total"]) + 2)
    assert f"助教改分 attend.causal：0 → 2，理由：{ERIN_WHY}（ta.li，" in rows["erin"]["note"]
    assert rows["quiza"] == before["quiza"]  # removed: as the grader decided
    page = (out / "students" / "quiza" / "feedback.html").read_text(encoding="utf-8")
    assert 'data-status="overridden"' not in page and 'id="overrides"' not in page
    refused = grader("override", out, "quiza", "quiz.q1_params", "--remove", "--why", "again")
    assert refused.returncode == 2 and "没有可撤销的改分" in refused.stderr


def test_other_outcomes_are_whole_sentences_naming_the_students(graded):
    """The stub, the endless loop, the crash and the import failure are outcomes that name no
    cause: each is one sentence in the page's language, with who and the cards it was seen on,
    every id inert in the Markdown and the HTML."""
    from grader.inert import markdown_inline as md_inline

    outcomes = {o["key"]: o for o in graded["summary"]["outcomes"]}
    assert {"not_implemented", "timeout", "import_failed"} <= set(outcomes), sorted(outcomes)
    assert "stub" in outcomes["not_implemented"]["who"] and "loop" in outcomes["timeout"]["who"]
    assert outcomes["import_failed"]["who"] == ["exits"]
    pages = {"zh": graded["out"], "en": graded["en"]}
    for lang, end in (("zh", "。"), ("en", ".")):
        md = (pages[lang] / "summary.md").read_text(encoding="utf-8")
        html = (pages[lang] / "summary.html").read_text(encoding="utf-8")
        table = md.split("## " + vocabulary.text("gradebook", "outcomes", lang))[1].split("\n## ")[0]
        rows = [line for line in table.splitlines() if line.startswith("| ") and "`" in line]
        assert len(rows) == len(outcomes), table
        for item in outcomes.values():
            row = next(r for r in rows if f"`{item['key']}` " in r)
            sentence = row.split(f"`{item['key']}` ", 1)[1].rstrip(" |")
            assert sentence.endswith(end) and " …" not in sentence, row
            assert sentence.startswith(vocabulary.text("outcomes", item["key"], lang)), row
            for student in item["who"]:
                assert md_inline(student) in sentence, (student, row)
            assert not one_language.foreign(
                re.sub(r"\\?[A-Za-z_]*\\_\\_[A-Za-z_]*|\b(" + "|".join(item["who"]) + r")\b",
                       " ", sentence), lang), row
            # The page: the same sentence, escaped as a whole (an id is text, never markup).
            assert report_html.esc(item["text"][lang]) in html
            assert all(s in item["text"][lang] for s in item["who"])


def test_a_chinese_class_run_says_no_english_sentence(graded):
    """batch, override, an override refused for an unknown student: every line in Chinese (ids,
    paths and check ids are data), none of the internals without --verbose; the English run's
    lines hold no Chinese."""
    zh_batch, override, en_batch, unknown = graded["said"]
    assert graded["unknown"].returncode == 2 and "没有学生 'bobby'" in unknown
    assert "error" not in unknown
    ids = r"\b(alice|bob|carol|stub|loop|crash|broken|exits|quiza|quizb|erin|nb|someone|else|bobby)\b"
    for text, lang in ((zh_batch, "zh"), (override, "zh"), (unknown, "zh"), (en_batch, "en")):
        text = re.sub(ids, "s1", re.sub(r"upload-9", "s1", text))
        assert not one_language.foreign_lines(text, lang), text
    for internal in ("评分方式", "内存峰值", "计算线程", "相似度", "zygote"):
        assert internal not in zh_batch


def test_the_card_shows_the_override_beside_the_graders_verdict(graded):
    page = (graded["out"] / "students" / "erin" / "feedback.html").read_text(encoding="utf-8")
    card = re.search(r'<article class="card failed overridden" id="check-attend\.causal".*?'
                     r"</article>", page, re.S).group(0)
    assert 'data-status="overridden"' in card and 'class="badge override"' in card
    assert "原判：✗ 未通过 0 / 2" in card and "grader: ✗ failed 0 / 2" in card
    assert '<span class="points">2 / 2</span>' in card and ERIN_WHY in card
    assert "✗ <span" not in card.split('class="was"')[0]  # no red "failed" badge beside 2 / 2
    md = (graded["out"] / "students" / "erin" / "feedback.md").read_text(encoding="utf-8")
    assert "| ✎ | `attend.causal`" in md and "| 2/2 | 助教改分（原判：未通过） |" in md
    record = json.loads((graded["out"] / "students" / "erin" / "report.json").read_text())
    applied = overrides.apply(record, overrides.load(str(graded["out"])))
    results = json.loads(report.to_gradescope(RUBRIC, applied["report"], "en"))
    test = next(t for t in results["tests"] if t["name"].startswith("attend.causal:"))
    assert (test["score"], test["status"]) == (2, "passed")
    assert test["output"].startswith("Changed by a TA: the grader gave 0 / 2 (failed), now 2.")
    assert results["score"] == applied["score"] == record["score"] + 2
    full = report.points(sum(c.points for c in RUBRIC.checks))
    assert results["output"].startswith(f"Score {report.points(applied['score'])} / {full}. ")
    assert "hidden checks pass" in results["output"] and "isolation" not in results["output"]
    assert results["extra_data"]["overridden"] == ["attend.causal"]
    assert results["extra_data"]["rubric_hash"] == RUBRIC.hash


def test_the_export_carries_the_overridden_scores(graded, tmp_path):
    """`export`: Gradescope's results.json per graded student and scores.csv, overrides applied."""
    done = grader("export", graded["out"], "--to", tmp_path / "exp", "--lang", "en")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "exp" / "scores.csv", encoding="utf-8", newline="") as handle:
        rows = {r["student"]: r for r in csv.DictReader(handle)}
    with open(graded["out"] / "gradebook.csv", encoding="utf-8", newline="") as handle:
        book = {r["student"]: r for r in csv.DictReader(handle)}
    assert set(rows) == set(book)
    for student, row in rows.items():  # the same final score and status as the gradebook's
        assert (row["score"], row["status"]) == (book[student]["total"], book[student]["status"])
    assert rows["erin"]["overridden"] == "attend.causal"
    results = json.loads((tmp_path / "exp" / "gradescope" / "erin" / "results.json").read_text())
    assert str(results["score"]).rstrip("0").rstrip(".") == rows["erin"]["score"]
    assert results["extra_data"]["overridden"] == ["attend.causal"]
    ungradable = [s for s, r in rows.items() if r["status"] == "ungradable"]
    assert ungradable and not any((tmp_path / "exp" / "gradescope" / s).exists() for s in ungradable)


def test_the_page_in_chromium(graded, tmp_path):
    """The DOM Chromium builds (its script ran: the filter shows), the students in need order
    with links to their pages, the reteach rows, the groups; screenshots to look at."""
    from test_feedback_html import CHROMIUM, Dom, chromium

    if CHROMIUM is None:
        pytest.skip("no headless Chromium here (Debian: apt-get install -y chromium)")
    page = graded["out"] / "summary.html"
    # One DOM, the status menu preset from the address: a filtered row is only styled hidden.
    dump = chromium(page.as_uri() + "#lang=en&status=timed_out", "--dump-dom")
    assert dump.returncode == 0 and 'id="students"' in dump.stdout, dump.stderr[-2000:]
    dom = Dom(dump.stdout)
    assert dom.find("html")[0]["attrs"]["class"] == "lang-en"
    assert "hidden" not in dom.find("div", cls="controls")[0]["attrs"]  # the script ran
    table = dom.find("table", id="students")[0]
    rows = dom.find("tr", within=table)[1:]
    assert [r["attrs"]["data-student"] for r in rows] == [
        r["student"] for r in graded["summary"]["roster"]]
    assert [a["attrs"]["href"] for a in dom.find("a", within=rows[0])][0] == \
        "students/broken/feedback.html"
    assert [r["attrs"]["data-status"] for r in rows[:2]] == ["ungradable", "untouched_stub"]
    reteach = [r["attrs"]["data-key"] for r in dom.find("tr", within=dom.find(
        "table", id="reteach")[0]) if "data-key" in r["attrs"]]
    assert reteach[0] == "quiz_wrong_q1_params" and "mask_missing" in reteach
    groups = dom.find("details", cls="group")
    assert [g["attrs"]["data-members"] for g in groups] == ["alice carol", "erin exits"]
    sides = dom.find("pre", within=groups[0])
    assert len(sides) == 2 and all(dom.find("mark", within=side) for side in sides)
    order = [e["attrs"].get("id") for e in dom.elements if e["attrs"].get("id") in (
        "students", "reteach", "checks", "near-copies", "overrides")]
    assert order == ["students", "reteach", "checks", "near-copies", "overrides"]
    shown = [r["attrs"]["data-student"] for r in rows
             if "display: none" not in r["attrs"].get("style", "")]
    assert shown == ["loop"]  # the status menu, preset from the address
    # The class page drawn; erin's feedback page (its override card) too when kept for a look (a
    # student's page drawn whole: test_feedback_html's screenshots, in both languages).
    keep = os.environ.get("SUMMARY_SCREENSHOT")
    shots = [("summary", page.as_uri())] + ([("erin", (graded["out"] / "students" / "erin"
                                                      / "feedback.html").as_uri())] if keep else [])
    for name, url in shots:
        shot = tmp_path / f"{name}.png"
        proc = chromium(url, f"--screenshot={shot}", "--window-size=1280,1600")
        assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(shot, os.path.join(keep, f"{name}.png"))
