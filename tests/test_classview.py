"""What the instructor sees of a class beyond the gradebook: near-copies (grader/batch/similarity.py),
who made each named mistake (grader/batch/mistakes.py), and TA overrides (grader/batch/overrides.py).

The first half grades nothing.  The second grades a small class (four entries) once per module.
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

from grader import words
from grader.batch import classhtml, classpage, mistakes
from grader.batch import entries, overrides, similarity
from grader.judge import manifest, submission
from grader import rubric
from grader.batch.gradebook import is_named  # noqa: E402

SUBMISSIONS = ROOT / "tests" / "submissions"
CORRECT = SUBMISSIONS / "correct"
PY = sys.executable
RUBRIC = rubric.load()
# The correct styles written independently of each other.  The module-layout styles
# (module_list_aliases, module_dict_properties, helper_wrappers, parametrized_qkv) reuse one set of
# functions on purpose, to vary only the block's layout, and zero_init_projections is the
# reference with only its initialisation changed: they are near-copies.
LAYOUT_VARIANTS = {"module_list_aliases.py", "module_dict_properties.py", "helper_wrappers.py",
                   "parametrized_qkv.py", "zero_init_projections.py"}
STYLES = sorted(p.name for p in CORRECT.glob("*.py") if p.name not in LAYOUT_VARIANTS)


def disguise(source):
    """What a student who copies does to hide it: identifiers renamed, comments rewritten,
    spacing changed, the functions in another order."""
    for old, new in (("scores", "att_logits"), ("weights", "probs"), ("ctx", "mixed"),
                     ("context", "mixed_values"), ("heads", "n_h")):
        source = re.sub(rf"\b{old}\b", new, source)
    source = re.sub(r"#[^\n]*", "# my own notes", source).replace(" = ", "  =  ")
    head, *defs = re.split(r"\n(?=def |class )", source)
    return "\n".join([head] + defs[::-1]) + "\n"


def a_source(student, text):
    return {"student": student, "digest": student, "hash": similarity.code_hash(text),
            "source": text}


def notebook_of(source):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# my notebook\n"]}]
    cells += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
               "source": chunk.splitlines(True)}
              for chunk in re.split(r"\n(?=def |class )", source)]
    cells.append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                  "source": ["%timeit split_heads(torch.zeros(1, 2, 4), 2)\n"]})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def package_of(path, student, source):
    """A `make submit` package: attention.py and its manifest."""
    work = source.encode("utf-8")
    data = manifest.build(student, "2026-01-01T00:00:00Z", "attention.py", work, RUBRIC,
                          {"score": 0})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("attention.py", work)
        archive.writestr(manifest.NAME, manifest.dumps(data))


# -- near-copies, nothing graded ---------------------------------------------------------------
def test_independently_written_correct_styles_are_not_flagged(tmp_path):
    sources = []
    for path in [CORRECT / name for name in STYLES] + [CORRECT / "notebook.ipynb",
                                                        CORRECT / "folder_submission"]:
        with submission.load(str(path)) as sub:
            sources.append(a_source(path.stem, sub.source))
    near = similarity.analyse(str(tmp_path), sources)
    assert len(near["rows"]) == len(sources) * (len(sources) - 1) // 2
    assert near["pairs"] == [] and near["groups"] == []
    top = near["rows"][0]
    assert top["similarity"] < similarity.THRESHOLD - 0.15, top  # a margin, not a near miss
    assert top["similarity"] > 0.2  # they do share idioms: the figure is not trivially 0


@pytest.mark.parametrize("style", STYLES)
def test_a_disguised_copy_is_flagged(tmp_path, style):
    original = (CORRECT / style).read_text(encoding="utf-8")
    other = (CORRECT / ("einsum.py" if style != "einsum.py" else "where_mask.py")).read_text()
    near = similarity.analyse(str(tmp_path), [a_source("orig", original),
                                              a_source("copy", disguise(original)),
                                              a_source("other", other)])
    assert [(p["a"], p["b"]) for p in near["pairs"]] == [("copy", "orig")]
    pair = near["pairs"][0]
    assert pair["similarity"] >= 0.8 and pair["shared"] >= similarity.MIN_SHARED
    assert near["groups"] == [["copy", "orig"]]
    # The shared regions are code of the copy and of the original, not the quiz lines.
    copy_regions = "".join(pair["code_a"][s:e] for s, e in pair["regions"][0])
    assert "return" in copy_regions and "Q1_SHAPE" not in copy_regions


def test_the_given_code_never_counts(tmp_path):
    """The stub, the lesson's code and the quiz answers are the same for everyone."""
    stub = (ROOT / "exercises" / "attention.py").read_text(encoding="utf-8")
    answers = ("Q1_SHAPE = (1, 1, 3, 4)\nQ1_HEAD0_POS1 = [4, 5, 6, 7]\nQ1_FORMAL_HEAD_WIDTH = 32\n"
               "Q1_FORMAL_PARAMS = 16384\nQ2_CORRECT = [4, 5]\nQ2_WRONG = [2, 3]\n"
               "Q2_SHAPE_IS_ENOUGH = False\n")
    lesson = (ROOT / "grader" / "batch" / "lesson_given_code.txt").read_text(encoding="utf-8")
    handed = re.sub(r"Q1_SHAPE = None.*", answers, stub, flags=re.S)
    near = similarity.analyse(str(tmp_path), [
        a_source("untouched1", stub), a_source("untouched2", stub + "\n"),
        a_source("quiz_only1", handed), a_source("quiz_only2", handed.replace("    ", "  ")),
        a_source("lesson1", stub + lesson), a_source("lesson2", lesson + handed)])
    assert near["pairs"] == [], [(p["a"], p["b"], p["similarity"]) for p in near["pairs"]]
    assert all(r["shared"] < similarity.MIN_SHARED for r in near["rows"])


def test_every_kind_of_entry_is_compared_by_its_code(tmp_path):
    """.py, notebook (code cells), folder, zip and `make submit` package: the submission loader
    reads the one file, and the copies are found whatever they came in."""
    original = (CORRECT / "separate_projections.py").read_text(encoding="utf-8")
    copy = disguise(original)
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "orig.py").write_text(original, encoding="utf-8")
    (folder / "nb.ipynb").write_text(notebook_of(copy), encoding="utf-8")
    (folder / "dir" / "work").mkdir(parents=True)
    (folder / "dir" / "work" / "attention.py").write_text(copy, encoding="utf-8")
    with zipfile.ZipFile(folder / "zipped.zip", "w") as archive:
        archive.writestr("hw12/attention.py", copy)
    package_of(folder / "upload-7.zip", "s2026007", copy)
    # A lone surrogate in a notebook's JSON, a broken zip: the batch's last step must not crash.
    (folder / "odd.ipynb").write_text(notebook_of(copy).replace("my own notes", "\\ud800", 1))
    (folder / "broken.zip").write_bytes(b"PK\x03\x04 not a zip")
    shutil.copy(CORRECT / "einsum.py", folder / "honest.py")
    out = tmp_path / "out"
    kept = [similarity.keep_source(str(out), e) for e in entries.list_entries(str(folder))]
    assert kept.pop(0) is None  # broken.zip: nothing to compare
    kept = [k for k in kept if k is not None and k["student"] != "odd"]
    # The entry's name is the student's identity (the manifest's id is only a flag).
    assert {k["student"] for k in kept} == {"orig", "nb", "dir", "zipped", "upload-7", "honest"}
    assert all("\n%timeit" not in k["source"] for k in kept)  # magics commented out
    near = similarity.analyse(str(out), kept)
    assert near["groups"] == [["dir", "nb", "orig", "upload-7", "zipped"]]
    assert not any("honest" in (p["a"], p["b"]) for p in near["pairs"])


def test_pairs_are_computed_once_and_the_same_in_every_process(tmp_path):
    texts = {name: (CORRECT / name).read_text(encoding="utf-8") for name in STYLES[:4]}
    sources = [a_source(Path(n).stem, t) for n, t in texts.items()]
    first = similarity.analyse(str(tmp_path), sources)
    assert (first["computed"], first["reused"]) == (10, 0)  # 6 pairs + each code with itself
    again = similarity.analyse(str(tmp_path), sources)
    assert (again["computed"], again["reused"]) == (0, 10)
    assert again["rows"] == first["rows"]
    grown = sources + [a_source("late", disguise(texts[STYLES[0]]))]
    third = similarity.analyse(str(tmp_path), grown)
    assert third["computed"] == 5 and third["reused"] == 10
    # copydetect's k-gram hash is salted per process, its figures are not: another process with
    # another salt (a seed this process was not given) computes the same figures.
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from grader.batch import similarity as s;"
            "d = json.load(open(sys.argv[2]));"
            "print(json.dumps(s.analyse(sys.argv[3], d)['rows']))")
    (tmp_path / "in.json").write_text(json.dumps(grown))
    for seed in ("2" if os.environ.get("PYTHONHASHSEED") == "1" else "1",):
        fresh = tmp_path / f"fresh{seed}"
        proc = subprocess.run([PY, "-c", code, str(ROOT), str(tmp_path / "in.json"), str(fresh)],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONHASHSEED=seed))
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == json.loads(json.dumps(third["rows"]))


def test_the_class_figures_are_copydetects_on_the_whole_corpus():
    """similarity.class_figures (every pair of a class at once) gives the share and the shared
    length that compare() gets through copydetect's compare_files, for every two files of the
    corpus (each with itself too), disguised copies and the stub included."""
    import itertools

    paths = sorted(SUBMISSIONS.glob("*/*.py")) + [ROOT / "exercises" / "attention.py"]
    texts = [p.read_text(encoding="utf-8") for p in paths]
    texts.append(disguise(texts[0]))
    boilerplate = similarity.boilerplate_hashes()
    prints = {i: similarity.fingerprint(t, boilerplate) for i, t in enumerate(texts)}
    pairs = list(itertools.combinations_with_replacement(range(len(texts)), 2))
    quick = similarity.class_figures(prints, pairs)
    differ, overlapping = [], 0
    for a, b in pairs:
        full = similarity.compare(prints[a], prints[b])
        overlapping += full["shared"] > 0
        if (full["share"], full["shared"]) != (quick[a, b]["share"], quick[a, b]["shared"]):
            differ.append((paths[a].name if a < len(paths) else "disguised", full, quick[a, b]))
    assert not differ, differ[:3]
    assert overlapping > 1000  # most pairs share code: the comparison is not vacuous
    # a pair asked alone gets the figures it gets among all the others
    assert similarity.class_figures({0: prints[0], 5: prints[5]}, [(0, 5)])[0, 5] == quick[0, 5]


def test_codes_with_the_same_fingerprint_are_figured_alike():
    """A copy whose names, comments and spacing alone were changed has the fingerprint of its
    original: every pair gets the figures compare() gives it, the pair of the two the figures of
    a code with itself."""
    texts = [(CORRECT / n).read_text(encoding="utf-8") for n in STYLES[:3]]
    renamed = re.sub(r"#[^\n]*", "# mine", texts[0].replace("scores", "logits"))
    texts += [renamed, renamed.replace(" = ", "  =  ") + "\n# the end\n", texts[1]]
    boilerplate = similarity.boilerplate_hashes()
    prints = {f"c{i}": similarity.fingerprint(t, boilerplate) for i, t in enumerate(texts)}
    assert prints["c3"].filtered_code == prints["c4"].filtered_code == prints["c0"].filtered_code
    pairs = similarity.pair_keys(prints)
    quick = similarity.class_figures(prints, pairs)
    for a, b in pairs:
        full = similarity.compare(prints[a], prints[b])
        assert (quick[a, b]["share"], quick[a, b]["shared"]) == (full["share"], full["shared"])
    assert quick["c3", "c4"] == quick["c0", "c0"]
    assert quick["c2", "c3"]["share"] == quick["c0", "c2"]["share"][::-1]
    quick["c0", "c3"]["share"][0] = -1.0  # each pair's figures are its own
    assert quick["c0", "c4"]["share"][0] != -1.0


def test_every_kgram_of_the_boilerplate_is_left_out():
    """The stub handed in as it is has nothing left to compare, and a k-gram the code repeats
    keeps every place it is at unless it is boilerplate (copydetect's own boilerplate argument
    would drop one of each repeated k-gram's places)."""
    stub = (ROOT / "exercises" / "attention.py").read_text(encoding="utf-8")
    boilerplate = similarity.boilerplate_hashes()
    empty = similarity.fingerprint(stub, boilerplate)
    assert not empty.hashes and not empty.hash_idx and empty.token_coverage == 0
    text = (CORRECT / STYLES[0]).read_text(encoding="utf-8")
    whole, kept = similarity.fingerprint(text), similarity.fingerprint(text, boilerplate)
    assert kept.hashes == whole.hashes - boilerplate
    assert kept.hash_idx == {h: at for h, at in whole.hash_idx.items() if h not in boilerplate}
    assert any(len(at) > 1 for at in kept.hash_idx.values())


def test_the_pairs_cache_is_written_only_when_it_would_change(tmp_path, monkeypatch):
    """A rebuild that compares the very pairs the cache holds (an override, a rerun with nothing
    new) leaves pairs.json as it is; a new code, or a student gone, writes it again."""
    texts = [(CORRECT / n).read_text(encoding="utf-8") for n in STYLES[:3]]
    sources = [a_source(f"s{i}", t) for i, t in enumerate(texts)]
    written = []
    save = similarity.save_pairs
    monkeypatch.setattr(similarity, "save_pairs", lambda *a: written.append(len(a[2])) or save(*a))
    out = str(tmp_path / "out")
    first = similarity.analyse(out, sources)
    again = similarity.analyse(out, sources)
    assert written == [6] and again["rows"] == first["rows"] and again["computed"] == 0
    similarity.analyse(out, sources[:2])  # a student gone: the cache loses that code's pairs
    assert written == [6, 3]
    assert len(similarity.load_pairs(out, similarity.settings_key(
        similarity.boilerplate_texts()))) == 3
    similarity.analyse(out, sources)  # back: its pairs are computed and written again
    assert written == [6, 3, 6]


def test_the_rows_come_most_similar_first_then_by_the_two_ids():
    """pair_rows' order is (similarity descending, a, b), ties included: three codes, two of
    them the same, for five students."""
    texts = [(CORRECT / n).read_text(encoding="utf-8") for n in STYLES[:2]]
    sources = [a_source(s, t) for s, t in (("e", texts[0]), ("b", texts[1]), ("d", texts[0]),
                                           ("a", texts[1]), ("c", texts[0]))]
    boilerplate = similarity.boilerplate_hashes()
    pairs, _ = similarity.all_pairs(sources, {}, boilerplate, {})
    rows = similarity.pair_rows(sources, pairs, 0.7)
    assert len(rows) == 10
    assert rows == sorted(rows, key=lambda r: (-r["similarity"], r["a"], r["b"]))
    assert [(r["a"], r["b"]) for r in rows[:4]] == [("a", "b"), ("c", "d"), ("c", "e"),
                                                     ("d", "e")]
    ab = rows[0]
    assert ab["share_a"] == ab["share_b"] == ab["similarity"] == 1.0 and ab["flagged"]


def test_group_figures_count_each_groups_own_flagged_pairs():
    rows = [{"a": "a", "b": "b", "similarity": 0.99, "flagged": True},
            {"a": "c", "b": "d", "similarity": 0.95, "flagged": True},
            {"a": "b", "b": "c", "similarity": 0.9, "flagged": False},
            {"a": "a", "b": "e", "similarity": 0.8, "flagged": True},
            {"a": "b", "b": "e", "similarity": 0.75, "flagged": True},
            {"a": "c", "b": "e", "similarity": 0.72, "flagged": False}]
    groups = similarity.groups_of(rows)
    assert groups == [["a", "b", "e"], ["c", "d"]]
    assert similarity.group_figures(groups, rows) == [
        {"members": ["a", "b", "e"], "pairs": 3, "strongest": 0.99, "weakest": 0.75,
         "pair": ["a", "b"]},
        {"members": ["c", "d"], "pairs": 1, "strongest": 0.95, "weakest": 0.95,
         "pair": ["c", "d"]}]


# -- root causes --------------------------------------------------------------------------------
def card(check, *keys, follows=None):
    exercise = {"attend": "attend", "module": "CausalSelfAttention", "split_heads": "split_heads",
                "quiz": "quiz"}[check.split(".")[0]]
    return {"id": check, "exercise": exercise, "verdicts": [
        dict({"key": k}, **({"follows_from": follows} if follows else {})) for k in keys]}


def named(key):
    return is_named(key)


def test_one_root_cause_explains_the_names_on_the_same_exercises():
    # As graded today: mask applied after the softmax also draws mask_missing and
    # mask_from_values on attend's cards, and wrong_values (an outcome) on the gradients.
    report = {"checks": [card("attend.causal", "mask_missing", "mask_missing"),
                         card("attend.softmax", "mask_after_softmax"),
                         card("attend.mask_arg", "mask_after_softmax"),
                         card("attend.reference", *["mask_after_softmax"] * 4),
                         card("attend.zero_scores", "mask_from_values"),
                         card("module.causal", "mask_after_softmax"),
                         card("module.reference", "mask_after_softmax"),
                         card("module.gradients", "wrong_values")]}
    assert mistakes.root_causes(report, named) == {"mask_after_softmax": [
        "attend.mask_arg", "attend.reference", "attend.softmax", "module.causal",
        "module.reference"]}


def test_independent_mistakes_are_two_root_causes_and_outcomes_none():
    report = {"checks": [card("split_heads.transpose", "split_no_transpose", "split_no_transpose"),
                         card("module.causal", "mask_missing"),
                         card("module.reference", "split_no_transpose", "scale_none"),
                         card("attend.scale", "scale_none"),
                         card("attend.reference", "scale_none", "wrong_shape"),
                         card("quiz.q1_shape", "quiz_wrong_q1_shape")]}
    roots = mistakes.root_causes(report, named)
    assert list(roots) == ["scale_none", "split_no_transpose"]
    assert "mask_missing" not in roots  # module.causal: seen where the other two already reach
    assert mistakes.root_causes({"checks": [card("attend.scale", "wrong_values"),
                                            card("quiz.q1_shape", "quiz_wrong_q1_shape")]},
                               named) == {}


def test_the_reference_comparisons_diagnosis_comes_first():
    # As graded today: weights taken before the scaling are named by attend.reference only,
    # while two property cards call the same code "no causal mask".
    report = {"checks": [card("attend.causal", "mask_missing"),
                         card("attend.softmax", "mask_missing", "mask_missing"),
                         card("attend.mask_arg", "wrong_values"),
                         card("attend.reference", "weights_prescores"),
                         card("attend.zero_scores", "mask_from_values")]}
    assert mistakes.root_causes(report, named) == {"weights_prescores": ["attend.reference"]}


def test_a_card_that_follows_from_a_mistake_counts_for_it():
    report = {"checks": [card("attend.causal", "mask_missing", follows="mask_after_softmax"),
                         card("attend.softmax", "mask_after_softmax")]}
    assert mistakes.root_causes(report, named) == {
        "mask_after_softmax": ["attend.causal", "attend.softmax"]}


# -- overrides, nothing graded -----------------------------------------------------------------
def test_an_override_is_checked_applied_to_a_copy_and_kept_as_history(tmp_path):
    students = {"alice", "bob"}
    for student, check, score, message in (
            ("carol", "attend.scale", 1, "unknown student 'carol'"),
            ("bob", "attend.sclae", 1, "unknown check 'attend.sclae'"),
            ("bob", "attend.scale", 2.5, "outside 0..2"),
            ("bob", "attend.scale", -1, "outside 0..2")):
        with pytest.raises(overrides.OverrideError, match=re.escape(message)):
            overrides.validate(RUBRIC, students, student, check, score)
    overrides.validate(RUBRIC, students, "bob", "attend.scale", 2)
    record = {"student": "bob", "score": 3, "report": {"score": 3, "checks": [
        {"id": "attend.scale", "score": 0, "status": "failed"},
        {"id": "attend.causal", "score": 3, "status": "passed"}]}}
    item = {"student": "bob", "check": "attend.scale", "score": 2, "why": "typo in the rubric",
            "who": "ta1", "when": "2026-01-01T00:00:00Z"}
    assert overrides.record_override(str(tmp_path), item, 0)["action"] == "set"
    changed = overrides.apply(record, overrides.load(str(tmp_path)) + [
        {"student": "alice", "check": "attend.scale", "score": 0, "why": "other"}])
    assert changed["score"] == 5 and changed["report"]["checks"][0]["score"] == 2
    assert changed["overrides"] == [{"check": "attend.scale", "was": 0, "status": "failed",
                                     "score": 2, "why": "typo in the rubric", "who": "ta1",
                                     "when": "2026-01-01T00:00:00Z"}]
    assert changed["report"]["checks"][0]["override"]["status"] == "failed"
    assert record["score"] == 3 and record["report"]["checks"][0]["score"] == 0
    event = overrides.record_override(str(tmp_path), dict(item, score=1, who="ta2"), 0)
    assert (event["action"], event["replaced"], event["score"]) == ("change", 2, 1)
    event = overrides.remove_override(str(tmp_path), "bob", "attend.scale", "regraded", "ta1", "t")
    assert (event["action"], event["replaced"], event["score"]) == ("remove", 1, 0)
    assert overrides.load(str(tmp_path)) == []
    assert [e["action"] for e in overrides.load_history(str(tmp_path))] == [
        "set", "change", "remove"]
    with pytest.raises(overrides.OverrideError, match="no override to remove"):
        overrides.remove_override(str(tmp_path), "bob", "attend.scale", "again", "ta1", "t")


# -- student strings stay data ------------------------------------------------------------------
def test_student_strings_are_inert_in_every_class_output():
    evil = "=HYPERLINK(\"x\")<script>alert(1)</script>`|\n# not a heading\u202e"
    note = {"zh": evil, "en": evil}
    summary = {"mistakes": [{"key": "scale_none", "students": 1, "percent": 100, "who": [evil],
                             "checks": [], "text": {"zh": "z", "en": "e"},
                             "section": {"zh": "s", "en": "s"}}],
               "roster": [{"student": evil, "entry": evil, "status": "ungradable", "score": 0,
                           "max_score": 39, "partial": [], "causes": ["scale_none"], "note": note,
                           "flags": {"group": 1, "identity": evil, "overrides": ["attend.scale"]}}],
               "overrides": [{"student": evil, "check": "attend.scale", "was": 0, "score": 1,
                              "why": evil, "who": evil, "when": evil}],
               "override_history": [{"action": "set", "student": evil, "check": "attend.scale",
                                     "replaced": 0, "score": 1, "why": evil, "who": evil,
                                     "when": evil}],
               "near_copies": {"threshold": 0.7, "flagged": 1, "groups": [[evil, "b"]],
                               "group_figures": [{"members": [evil, "b"], "pairs": 1,
                                                  "strongest": 0.9, "weakest": 0.9,
                                                  "pair": [evil, "b"]}], "pairs": [{
                   "a": evil, "b": "b", "similarity": 0.9, "share_a": 0.9, "share_b": 0.8,
                   "shared": 300, "regions": [[[0, 25]], [[0, 3]]],
                   "code_a": "x = '</pre><script>'\n```\n", "code_b": "```"}]}}
    page = classhtml.students_html(summary) + classhtml.reteach_html(summary) + \
        classhtml.last_sections_html(summary)
    page = page.replace(classhtml.SCRIPT, "")  # the page's own script, not a student's
    assert "<script>" not in page and "</pre><script>" not in page
    assert "&lt;script&gt;" in page and "\u202e" not in page
    md = "\n".join(classpage.students_markdown(summary, "en") + classpage.reteach_markdown(
        summary, "en") + classpage.near_copies_markdown(summary["near_copies"], "en")
        + classpage.overrides_markdown(summary, "en"))
    assert "````python\nx = '</pre><script>'\n```\n````" in md  # a fence longer than its runs
    outside = md.replace("x = '</pre><script>'\n```", "")
    assert "\n# not a heading" not in outside and "<script>" not in outside
    record = {"student": evil, "entry": evil, "score": 1, "max_score": 39,
              "report": {"checks": [card("attend.scale", "scale_none")]}}
    rows = list(csv.reader(classpage.mistakes_csv(
        summary, [record], lambda r: mistakes.root_causes(r["report"], named)).splitlines()))
    assert rows[1][1].startswith("'=") and rows[1][2].startswith("'=")
    table = classpage.similarity_csv([{"a": evil, "b": "+cmd", "similarity": 1, "share_a": 1,
                                       "share_b": 1, "shared": 300, "flagged": True}])
    assert all(cell[:1] not in "=+-@" for row in csv.reader(table.splitlines()) for cell in row)


# -- a small class, graded ----------------------------------------------------------------------
def make_small_class(folder):
    """alice and her disguised copy in a zip (carol), two wrong ones: a handful of entries."""
    folder.mkdir(parents=True)
    alice = (CORRECT / "einsum.py").read_text(encoding="utf-8")
    (folder / "alice.py").write_text(alice, encoding="utf-8")
    with zipfile.ZipFile(folder / "carol.zip", "w") as archive:
        archive.writestr("carol/attention.py", disguise(alice))
    shutil.copy(SUBMISSIONS / "wrong" / "mask_after_softmax.py", folder / "bob.py")
    shutil.copy(SUBMISSIONS / "wrong" / "module_scale_sqrt_D.py", folder / "dave.py")


def run(*args, env=None, cwd=ROOT, timeout=900):
    return subprocess.run([PY, "-m", "grader", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    base = tmp_path_factory.mktemp("small")
    make_small_class(base / "class")
    # One judge (one zygote) for four entries: judges of their own are test_batch's.
    proc = run("batch", base / "class", "--out", base / "single", "--jobs", "1", "--verbose")
    assert proc.returncode == 0, proc.stderr
    return {"class": base / "class", "single": base / "single", "stderr": proc.stderr}


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_class_outputs_name_who_and_the_near_copies(small):
    out = small["single"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    who = {m["key"]: m["who"] for m in summary["mistakes"]}
    assert who == {"mask_after_softmax": ["bob"], "scale_sqrt_D": ["dave"]}  # once, at the root
    rows = read_csv(out / "mistakes.csv")
    assert [(r["mistake"], r["student"]) for r in rows] == [("mask_after_softmax", "bob"),
                                                           ("scale_sqrt_D", "dave")]
    assert "attend.softmax" in rows[0]["checks"].split()
    near = summary["near_copies"]
    # bob and dave are two of the kit's wrong solutions: one base, one change each, so they are
    # near-copies indeed; alice and her disguised copy in a zip too; nobody else.
    assert near["groups"] == [["alice", "carol"], ["bob", "dave"]]
    assert near["threshold"] == similarity.THRESHOLD
    table = read_csv(out / "similarity.csv")
    flagged = {(r["student_a"], r["student_b"]) for r in table if r["flagged"] == "yes"}
    assert len(table) == 6 and flagged == {("alice", "carol"), ("bob", "dave")}
    assert all(float(r["similarity"]) < similarity.THRESHOLD for r in table[2:])
    page = (out / "summary.html").read_text(encoding="utf-8")
    assert 'data-a="alice" data-b="carol"' in page and "<mark>" in page
    assert page.count('<details class="group"') == 2
    assert re.findall(r'<tr id="cause-[^"]*" data-key="([^"]+)"', page) == [
        "mask_after_softmax", "scale_sqrt_D"]
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "| 1 | 25% | `mask_after_softmax`" in md and "alice ↔ carol" in md
    assert words.text("batch", "verbose_similarity", "zh", n=4, computed=10,
                      reused=0) in small["stderr"]


def test_an_override_survives_resume_and_regrade_and_lapses_when_the_file_changes(small, tmp_path):
    """bob's override survives a resume and a regrade of his unchanged file.  dave's override,
    then dave fixes his file and the class is run again (bob's regrade in the same run): his new
    grading counts (no override applied), the TA is told once in the batch's language, and the
    class page, summary.md and `override --list` keep saying it until the TA sets it again."""
    out, source = tmp_path / "out", tmp_path / "class"
    shutil.copytree(small["single"], out)
    shutil.copytree(small["class"], source)
    refused = run("override", out, "bob", "attend.nope", 1, "--why", "x", "--lang", "en")
    assert refused.returncode == 2 and "unknown check 'attend.nope'" in refused.stderr
    refused = run("override", out, "bobby", "attend.softmax", 1, "--why", "x")  # the batch's zh
    assert refused.returncode == 2 and "没有学生 'bobby'" in refused.stderr
    why = "softmax order discussed in office hours"
    proc = run("override", out, "bob", "attend.softmax", 1, "--why", why)
    assert proc.returncode == 0, proc.stderr
    base = {r["student"]: r for r in read_csv(small["single"] / "gradebook.csv")}

    def check_applied(folder):
        bob = {r["student"]: r for r in read_csv(folder / "gradebook.csv")}["bob"]
        assert float(bob["attend.softmax"]) == 1 and base["bob"]["attend.softmax"] == "0"
        assert float(bob["total"]) == pytest.approx(float(base["bob"]["total"]) + 1)
        assert why in bob["note"]
        page = (folder / "students" / "bob" / "feedback.html").read_text(encoding="utf-8")
        assert 'id="overrides"' in page and why in page
        assert why in (folder / "students" / "bob" / "feedback.md").read_text(encoding="utf-8")
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        assert [(o["student"], o["check"], o["score"]) for o in summary["overrides"]] == [
            ("bob", "attend.softmax", 1)]
        assert why in (folder / "summary.html").read_text(encoding="utf-8")

    check_applied(out)
    resumed = run("batch", source, "--out", out, "--jobs", "1", "--lang", "en",
                  "--verbose")  # resume: nothing to do
    assert resumed.returncode == 0 and "4 up to date, 0 to grade." in resumed.stderr
    assert "0 pairs computed, 10 reused" in resumed.stderr
    check_applied(out)
    # dave's override, then his file fixed; bob's report gone (his unchanged file regraded).
    dave_why = "the scale discussed in office hours"
    assert run("override", out, "dave", "module.reference", 0.5, "--why", dave_why).returncode == 0
    assert base["dave"]["module.reference"] == "0"
    shutil.copy(CORRECT / "einsum.py", source / "dave.py")  # fixed: the whole card now
    (out / "students" / "bob" / "report.json").unlink()
    points = rubric.load().by_id["module.reference"].points
    regraded = run("batch", source, "--out", out, "--jobs", "1")
    assert regraded.returncode == 0 and "2 份已是最新，这次评分 2 份" in regraded.stderr, \
        regraded.stderr
    check_applied(out)  # bob's, the only override left
    told = words.text("batch", "override_stale", "zh", student="dave", check="module.reference",
                      score="0.5", why=dave_why, graded=f"{points:g}")
    assert regraded.stderr.count(told) == 1
    dave = {r["student"]: r for r in read_csv(out / "gradebook.csv")}["dave"]
    assert float(dave["module.reference"]) == points and dave_why not in dave["note"]
    kept = json.loads((out / overrides.FILE).read_text(encoding="utf-8"))
    assert [o["student"] for o in kept["overrides"]] == ["bob"]
    assert (kept["history"][-1]["action"], kept["history"][-1]["student"]) == ("stale", "dave")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["override_history"][-1]["action"] == "stale"
    html = (out / "summary.html").read_text(encoding="utf-8")
    assert 'class="note stale" data-student="dave"' in html
    assert told in (out / "summary.md").read_text(encoding="utf-8")
    listed = run("override", out, "--list", "--lang", "en")
    assert words.text("batch", "override_stale", "en", student="dave", check="module.reference",
                      score="0.5", why=dave_why, graded=f"{points:g}") in listed.stdout
    again = run("batch", source, "--out", out, "--jobs", "1")  # nothing new: said no more
    assert again.returncode == 0 and told not in again.stderr
    assert run("override", out, "dave", "module.reference", 1, "--why", "again").returncode == 0
    assert 'class="note stale"' not in (out / "summary.html").read_text(encoding="utf-8")
