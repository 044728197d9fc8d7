"""The student's feedback page in headless Chromium (Debian `chromium`): a failing submission is
graded by the batch CLI, its page is rendered, screenshotted, and the DOM Chromium built (after
the page's own script ran) is checked: one card per check with its status, the total, heatmaps of
the student's weights beside the expected ones with the leaking cells marked, the zh/en switch,
nothing loaded from the network, and the student's printed output escaped.

Skipped, with the reason, where no Chromium is installed (apt-get install -y chromium).
"""
import html.parser
import json
import re
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.render import feedback_html
from grader.batch import judge
from grader import rubric  # noqa: E402

import zygotes

PY = sys.executable
RUBRIC = rubric.load()
HOSTILE_PRINT = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


CHROMIUM = chromium_binary()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium here (Debian: apt-get install -y chromium)")


def chromium(url, *mode, timeout=90):
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", *mode, url],
            capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Dom(html.parser.HTMLParser):
    """A flat list of (tag, attrs, ancestors) and the text of elements by id."""

    VOID = {"meta", "br", "img", "input", "link", "hr"}

    def __init__(self, text):
        super().__init__()
        self.elements, self.stack, self.texts = [], [], {}
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        element = {"tag": tag, "attrs": attrs, "classes": set((attrs.get("class") or "").split()),
                   "parents": list(self.stack), "text": ""}
        self.elements.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for element in self.stack:
            element["text"] += data

    def find(self, tag=None, cls=None, within=None, **attrs):
        found = []
        for e in self.elements:
            if tag and e["tag"] != tag or cls and cls not in e["classes"]:
                continue
            if any(e["attrs"].get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            if within is not None and not any(p is within for p in e["parents"]):
                continue
            found.append(e)
        return found


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A batch run over one failing submission (no causal mask, and it prints HTML)."""
    base = tmp_path_factory.mktemp("page")
    (base / "class").mkdir()
    source = (ROOT / "tests" / "submissions" / "wrong" / "mask_missing.py").read_text(encoding="utf-8")
    (base / "class" / "zoe.py").write_text(source + f"\nprint({HOSTILE_PRINT!r})\n", encoding="utf-8")
    proc = subprocess.run([PY, "-m", "grader", "batch", str(base / "class"), "--out",
                           str(base / "out"), "--jobs", "1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    folder = base / "out" / "students" / "zoe"
    record = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert record["status"] == "graded" and record["score"] < record["max_score"]
    return {"path": folder / "feedback.html", "record": record, "base": base}


@pytest.fixture(scope="module")
def dumps(page):
    """The DOM Chromium built, after the page's script ran, as opened and with #lang=en, and the
    screenshot the same Chromium run drew of it (1200 x 2000): {lang: Dom}, {lang: png path}."""
    if CHROMIUM is None:
        pytest.skip("no headless Chromium here (Debian: apt-get install -y chromium)")
    out, shots = {}, {}
    for lang, suffix in (("zh", ""), ("en", "#lang=en")):
        shots[lang] = page["base"] / f"zoe.{lang}.png"
        dump = chromium(page["path"].as_uri() + suffix, "--dump-dom",
                        f"--screenshot={shots[lang]}", "--window-size=1200,2000")
        assert dump.returncode == 0 and "<article" in dump.stdout, dump.stderr[-2000:]
        assert shots[lang].exists(), dump.stderr[-2000:]
        out[lang] = Dom(dump.stdout)
    out["shots"] = shots
    return out


@needs_chromium
def test_page_in_chromium_has_cards_and_heatmaps(page, dumps):
    dom = dumps["zh"]
    report = page["record"]["report"]
    # One card per check, in rubric order, with the report's status and points.
    cards = dom.find("article", cls="card")
    assert [c["attrs"]["data-check"] for c in cards] == [c.id for c in RUBRIC.checks]
    statuses = {c["id"]: c for c in report["checks"]}
    for card in cards:
        result = statuses[card["attrs"]["data-check"]]
        assert card["attrs"]["data-status"] == result["status"]
        assert result["status"] in card["classes"]
        points = dom.find("span", cls="points", within=card)[0]["text"]
        assert points == f"{result['score']:g} / {result['max_score']:g}"
    total = dom.find(id="total")[0]
    assert total["text"].strip() == f"{report['score']:g} / {report['max_score']:g}"
    # Failing cards carry the feedback in both languages, naming the mistake.
    causal = next(c for c in cards if c["attrs"]["data-check"] == "attend.causal")
    assert causal["attrs"]["data-status"] == "failed"
    feedback = {lang: e["text"] for e in dom.find("pre", cls="feedback", within=causal)
                for lang in ("zh", "en") if lang in e["classes"]}
    assert RUBRIC.message("mask_missing", "zh").split("：")[0] in feedback["zh"]
    assert RUBRIC.message("mask_missing", "en").split(":")[0] in feedback["en"]
    # Heatmaps in the failing attend cards: the student's weights beside the expected ones.
    failing_attend = [c for c in cards if c["attrs"]["data-check"].startswith("attend.")
                      and c["attrs"]["data-status"] != "passed"]
    assert failing_attend
    t = judge.PROBE_T
    for card in failing_attend:
        tables = dom.find("table", cls="heatmap", within=card)
        assert [tb["attrs"]["data-kind"] for tb in tables] == ["student", "expected"]
        student, expected = tables
        assert len(dom.find("td", within=student)) == t * t
        assert not dom.find("td", cls="leak", within=expected)
        if dom.find("div", cls="heatmaps", within=card)[0]["attrs"]["data-probe"] == "causal":
            leaks = dom.find("td", cls="leak", within=student)  # no mask: the whole future leaks
            assert len(leaks) == t * (t - 1) // 2
    passing = [c for c in cards if c["attrs"]["data-status"] == "passed"]
    assert passing and not any(dom.find("table", within=c) for c in passing)


@needs_chromium
def test_language_switch_and_screenshot(dumps):
    dom_zh, dom_en = dumps["zh"], dumps["en"]
    assert dom_zh.find("html")[0]["attrs"]["class"] == "lang-zh"
    assert dom_en.find("html")[0]["attrs"]["class"] == "lang-en"  # the page's script switched it
    assert dom_zh.find("button", id="lang-toggle")[0]["attrs"]["onclick"] == "toggleLang()"
    # One screenshot per language (drawn by the Chromium run that dumped its DOM); to look at
    # them: FEEDBACK_SCREENSHOT=/tmp/x.png keeps /tmp/x.png (Chinese) and /tmp/x.en.png (English).
    for lang in ("zh", "en"):
        shot = dumps["shots"][lang]
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == (1200, 2000)
        assert len(data) > 50_000  # a drawn page with cards and heatmaps, not a blank one
        keep = os.environ.get("FEEDBACK_SCREENSHOT")
        if keep:
            shutil.copy(shot, keep if lang == "zh" else keep.removesuffix(".png") + ".en.png")


class LanguageText(html.parser.HTMLParser):
    """The page's text by the language it is shown in: inside an element of class zh (shown in
    the Chinese view only), of class en, or outside both (shown in either: must be neither)."""

    def __init__(self, text):
        super().__init__()
        self.stack, self.texts = [], {"zh": [], "en": [], "both": []}
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag in Dom.VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        inherited = self.stack[-1] if self.stack else "both"
        self.stack.append(next((lang for lang in ("zh", "en") if lang in classes), inherited))

    def handle_endtag(self, tag):
        if tag not in Dom.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if data.strip() and not (self.stack and self.stack[-1] == "script"):
            self.texts[self.stack[-1] if self.stack else "both"].append(data)


def test_each_language_view_shows_one_language(page):
    """What the Chinese view shows holds no English prose, what the English view shows no
    Chinese (code, the student's own output and quoted lesson titles aside)."""
    import words

    raw = page["path"].read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)\b.*?</\1>", "", raw, flags=re.S)
    raw = re.sub(r"<details>.*?</details>", "", raw, flags=re.S)  # the student's printout
    # The switch names the other language in that language, as switches do.
    raw = re.sub(r'<button id="lang-toggle".*?</button>', "", raw, flags=re.S)
    raw = raw.replace(page["record"]["student"], "")  # the student's id is data
    texts = LanguageText(raw).texts
    for lang in ("zh", "en"):
        text = "\n".join(texts[lang])
        assert words.foreign_lines(text, lang) == [], lang
    for text in texts["both"]:  # shown in both views: code, numbers, ids
        assert not words.chinese_characters(text) and not words.english_words(text), text


@needs_chromium
def test_students_output_is_escaped_and_nothing_loads_from_the_network(page, dumps):
    dom = dumps["zh"]
    assert len(dom.find("script")) == 1  # the page's own, not the student's
    assert dom.find("title")[0]["text"] != "pwned"
    assert not dom.find("img")
    handlers = [(e["tag"], k) for e in dom.elements for k in e["attrs"] if k.startswith("on")]
    assert handlers == [("button", "onclick")]
    printed = dom.find("details")[0]["text"]
    assert HOSTILE_PRINT in printed  # shown as text
    raw = page["path"].read_text(encoding="utf-8")
    assert "http://" not in raw and "https://" not in raw
    assert not [e for e in dom.elements if e["attrs"].get("src") or e["attrs"].get("href")]


def test_page_without_a_browser_escapes_and_marks_leaks():
    """The renderer alone (runs everywhere): an ungradable record, and a leaking heatmap."""
    record = {"student": "x<y", "entry": "x<y.zip", "status": "ungradable", "score": 0,
              "max_score": 39, "error": "x<y.zip: not a readable zip", "report": None}
    text = feedback_html.student_page(RUBRIC, record, "en")
    assert "x&lt;y.zip: not a readable zip" in text and "<y" not in text.replace("&lt;y", "")
    assert 'class="lang-en"' in text
    grid = [[1.0, 0.5], [0.5, 0.5]]
    allowed = [[True, False], [True, True]]
    table = feedback_html.heatmap_table(grid, allowed, "student", leaks=[[False, True], [False, False]])
    assert table.count('class="masked leak') == 1 and "0.50" in table
    nan_table = feedback_html.heatmap_table([[None]], [[True]], "student")
    assert 'class="nan"' in nan_table and "NaN" in nan_table


def text_grid(text):
    """The numbers of a card's text heatmap, row by row (nan as None)."""
    rows = []
    for line in text.splitlines()[1:]:
        cells = line.split()[1:]
        rows.append([None if c == "nan" else float(c.rstrip("!")) for c in cells])
    return rows


@pytest.mark.parametrize("name", ["mask_off_by_one", "mask_missing", "softmax_dim"])
def test_a_cards_text_and_its_drawing_are_the_same_call(name):
    """The page draws, for a failing attend card, the very weights its text heatmap shows."""
    from grader.judge import grading
    from grader.judge.workers import forked
    from grader.sandbox import forkserver

    # Its worker forked from the module's fork server (plain processes): the drawing is judge-side.
    workers = forked(zygotes.server("process")) if forkserver.supported("process") else None
    sub, student = grading.start(str(ROOT / "tests" / "submissions" / "wrong" / f"{name}.py"),
                                 "process", None, workers)
    data = grading.finish(sub, student)
    assert data["metadata"]["worker_start"] == ("fork" if workers else "exec")
    maps = judge.attention_maps(student)
    drawn = 0
    for result in data["checks"]:
        texts = [v["heatmap"] for v in result["verdicts"] if v.get("heatmap")]
        if result["exercise"] != "attend" or result["status"] == "passed" or not texts:
            continue
        probe = feedback_html._probe_for(result, maps)
        assert probe == result["id"]
        grid = maps[probe]["student"]
        assert text_grid(texts[0]) == [[None if v is None else round(v, 2) + 0.0 for v in row]
                                       for row in grid], result["id"]
        drawn += 1
    assert drawn, "a wrong attend draws at least one failing card"
