"""Near-copies in a class: pairs (and groups) of submissions whose own code is mostly the same.

Computed after the grading with copydetect (pinned in requirements-instructor.txt) through its
public CodeFingerprint: identifiers, strings, comments and spacing normalised, every k-gram of
the token text hashed.  What every student is given never counts: the k-grams of the stub and the
notebook's given cells are dropped from each fingerprint, and the quiz answer lines are blanked
(every correct student writes the same answers).  hash() is salted per process: fingerprints are
only compared within the process that made them; the pairs cache holds figures, never hashes.

A pair's figure is copydetect's: the share of one side's fingerprinted code found in the other.
A pair is flagged when the larger share reaches the threshold and the shared code is more than an
idiom (MIN_SHARED characters); flagged pairs chain into groups.  OUTDIR/similarity/pairs.json
caches the figures by the two code hashes and the settings, so a resumed batch or a rebuild
computes only the pairs it lacks.
"""
import hashlib
import io
import itertools
import json
import operator
import os
import re

from grader import paths
from grader.batch.records import read_json
from grader.inert import json_text
from grader.statefile import write_atomic

ROOT = paths.KIT_ROOT
FOLDER = "similarity"
SOURCES, PAIRS, TABLE = "sources", "pairs.json", "similarity.csv"
NOISE = 25      # k: shorter shared token runs are noise (copydetect's default noise threshold)
WINDOW = 1      # winnowing window: every k-gram (copydetect's default for these thresholds)
THRESHOLD = 0.7  # default --similarity: a share of one side's code found in the other
MIN_SHARED = 200  # filtered characters in common, at least: a few shared lines are idioms
SHOWN = 60  # groups whose strongest pair is shown side by side on the page (the CSV has all)
BOILERPLATE_FILES = ("exercises/attention.py", "release/attention.ipynb",
                     "grader/batch/lesson_given_code.txt")
QUIZ_LINE = re.compile(r"^[ \t]*Q\d_[A-Z0-9_]*[ \t]*(:[^=\n]*)?=.*$", re.MULTILINE)


def code_hash(source):
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def blank_quiz(source):
    """The quiz answer lines replaced by spaces (offsets kept for the side-by-side)."""
    return QUIZ_LINE.sub(lambda m: " " * len(m.group(0)), source)


def fingerprint(source, boilerplate=frozenset()):
    """A copydetect CodeFingerprint of `source`, the quiz lines blanked and every k-gram of
    `boilerplate` (hashes made in this process) left out.  Not by the constructor's boilerplate
    argument: with a window of 1 it also drops one place of every k-gram the code repeats."""
    import copydetect

    fp = copydetect.CodeFingerprint("attention.py", NOISE, WINDOW, language="python",
                                    fp=io.StringIO(blank_quiz(source), newline=""))
    dropped = fp.hashes & boilerplate
    if dropped:
        fp.hashes -= dropped
        for value in dropped:
            del fp.hash_idx[value]
        fp.token_coverage = copydetect.utils.get_token_coverage(fp.hash_idx, NOISE,
                                                                len(fp.filtered_code))
    return fp


def boilerplate_texts():
    """The code every student is given (BOILERPLATE_FILES)."""
    from grader.judge.submission import notebook_source

    texts = []
    for name in BOILERPLATE_FILES:
        path = os.path.join(ROOT, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            texts.append(notebook_source(text) if name.endswith(".ipynb") else text)
    return texts


def boilerplate_hashes(texts=None):
    """The k-gram hashes of the boilerplate texts, in this process (hash() is salted)."""
    return frozenset().union(*(fingerprint(t).hashes for t in (texts or boilerplate_texts())))


def settings_key(texts):
    """What a cached pair depends on besides the two codes: k, the window, the boilerplate texts
    and the versions of copydetect and of the tokenizer under it (pygments)."""
    import copydetect
    import pygments

    h = hashlib.sha256(f"{NOISE}/{WINDOW}/{copydetect.__version__}/"
                       f"{pygments.__version__}".encode())
    for text in texts:
        h.update(code_hash(text).encode())
    return h.hexdigest()[:16]


def class_figures(prints, pairs):
    """{(a, b): {'share', 'shared'}} for every (a, b) of `pairs` (keys of `prints`, the
    fingerprints): what compare() gets from copydetect's compare_files (the tests hold them
    equal), for many pairs at once (a speed mechanism: docs/building.md): per code, which
    partners hold each of its k-grams, then the characters their k-long runs cover."""
    partners = {}
    for a, b in pairs:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    codes = sorted(partners, key=str)
    row_of = {code: i for i, code in enumerate(codes)}
    holders = {}  # hash -> the rows of the codes holding it
    for code in codes:
        for value in prints[code].hashes:
            holders.setdefault(value, []).append(row_of[code])
    lengths = {a: _overlaps(prints[a], [row_of[b] for b in partners[a]], holders, len(codes))
               for a in codes}
    found = {}
    for a, b in pairs:
        ab = lengths[a][row_of[b]]
        ba = lengths[b][row_of[a]]
        found[a, b] = {"share": [_share(ab, prints[a]), _share(ba, prints[b])], "shared": ab}
    return found


def _share(overlap, fp):
    """Overlap over the code's coverage, 0 for none (copydetect's arithmetic)."""
    if not overlap or not len(fp.filtered_code) or not fp.token_coverage:
        return 0.0
    return round(overlap / float(fp.token_coverage), 4)


def _overlaps(fp, partners, holders, count):
    """{row: fp's filtered characters covered by the k-grams it shares with that code} for each
    row of `partners` (rows among `count` codes)."""
    import numpy as np

    places = sorted((int(i), value) for value, at in fp.hash_idx.items() for i in at)
    if not places:
        return dict.fromkeys(partners, 0)
    held = np.zeros((len(places), count), dtype=bool)  # [places, codes]
    for n, (_, value) in enumerate(places):  # which codes hold each place's k-gram
        held[n, holders[value]] = True
    start, k = places[0][0], fp.k
    covered = np.zeros((places[-1][0] - start + k, len(partners)), dtype=bool)  # [chars, partners]
    covered[[i - start for i, _ in places]] = held[:, partners]
    runs = covered.copy()
    for offset in range(1, k):  # a run covers the k characters from where it starts
        covered[offset:] |= runs[:-offset]
    return dict(zip(partners, covered.sum(axis=0).tolist()))


def compare(fp_a, fp_b):
    """{'share': [a, b], 'shared': filtered chars in common, 'regions': [[start, end]...] x 2}
    (regions in the code as fingerprinted: the quiz lines blanked, offsets unchanged)."""
    import copydetect

    overlap, shares, slices = copydetect.compare_files(fp_a, fp_b)
    regions = [[[int(s), int(e)] for s, e in zip(*side)] if side.ndim == 2 else []
               for side in slices]
    return {"share": [round(float(x), 4) for x in shares], "shared": int(overlap),
            "regions": regions}


def source_path(outdir, student):
    return os.path.join(outdir, FOLDER, SOURCES, student + ".json")


def read_source(outdir, student):
    data = read_json(source_path(outdir, student))
    return data if data is not None and "source" in data else None


def keep_source(outdir, entry):
    """The student's code as the grader read it (submission.load), saved once per entry
    content; None when there is none to read."""
    from grader.judge import submission

    saved = read_source(outdir, entry.student)
    if saved is not None and saved.get("digest") == entry.digest:
        return saved
    try:
        with submission.load(entry.path) as sub:
            # a notebook's JSON may hold lone surrogates: kept visible (\udXXX), never a crash
            source = sub.source.encode("utf-8", "backslashreplace").decode("utf-8")
    except (submission.SubmissionError, OSError, ValueError):
        return None  # ungradable: the judge says why; there is no code to compare
    data = {"student": entry.student, "digest": entry.digest, "hash": code_hash(source),
            "source": source}
    os.makedirs(os.path.dirname(source_path(outdir, entry.student)), exist_ok=True)
    write_atomic(source_path(outdir, entry.student),
                 json_text(data, ensure_ascii=False) + "\n")
    return data


def load_pairs(outdir, settings):
    data = read_json(os.path.join(outdir, FOLDER, PAIRS)) or {}
    return data.get("pairs", {}) if data.get("settings") == settings else {}


def save_pairs(outdir, settings, pairs):
    os.makedirs(os.path.join(outdir, FOLDER), exist_ok=True)
    write_atomic(os.path.join(outdir, FOLDER, PAIRS),
                 json.dumps({"settings": settings, "pairs": dict(sorted(pairs.items()))}) + "\n")


def pair_keys(hashes):
    """(a, b) for every two of the code `hashes`, a code with itself too (two students with the
    same code), a before b: a pair's cache key is f"{a}:{b}"."""
    return list(itertools.combinations_with_replacement(sorted(set(hashes)), 2))


def all_pairs(sources, cache, boilerplate, prints):
    """({'<hash a>:<hash b>': {'share', 'shared'}} for every two codes of `sources`, how many were
    not in the cache); `prints` (fingerprints by code hash) gets those it made."""
    codes = {s["hash"]: s["source"] for s in sources}
    keyed = [(pair, f"{pair[0]}:{pair[1]}") for pair in pair_keys(codes)]
    todo = [pair for pair, key in keyed if key not in cache]
    for code in sorted({h for pair in todo for h in pair} - set(prints)):
        prints[code] = fingerprint(codes[code], boilerplate)
    for (ha, hb), found in class_figures(prints, todo).items():
        cache[f"{ha}:{hb}"] = found
    return {key: cache[key] for _, key in keyed}, len(todo)


def pair_rows(sources, pairs, threshold):
    """One row per two students, the most similar first (then by the two ids)."""
    rows = []
    for a, b in itertools.combinations(sorted(sources, key=lambda s: s["student"]), 2):
        ordered = a["hash"] <= b["hash"]  # the cache's key names the smaller hash first
        found = pairs[f"{a['hash']}:{b['hash']}" if ordered else f"{b['hash']}:{a['hash']}"]
        share_a, share_b = found["share"] if ordered else found["share"][::-1]
        similarity = max(share_a, share_b)
        rows.append({"a": a["student"], "b": b["student"], "similarity": similarity,
                     "share_a": share_a, "share_b": share_b, "shared": found["shared"],
                     "flagged": similarity >= threshold and found["shared"] >= MIN_SHARED})
    # made in the ids' order: a stable sort by similarity alone keeps it among equal figures
    rows.sort(key=operator.itemgetter("similarity"), reverse=True)
    return rows


def side_by_side(row, by_student, prints, boilerplate):
    """The row with both codes (quiz lines blanked) and the shared regions of each."""
    fps = []
    for student in (row["a"], row["b"]):
        source = by_student[student]
        if source["hash"] not in prints:
            prints[source["hash"]] = fingerprint(source["source"], boilerplate)
        fps.append(prints[source["hash"]])
    return dict(row, code_a=fps[0].raw_code, code_b=fps[1].raw_code,
                regions=compare(fps[0], fps[1])["regions"])


def groups_of(rows):
    """Flagged pairs chained into groups (connected components), each sorted, largest first."""
    parent = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for row in rows:
        if row["flagged"]:
            parent[root(row["a"])] = root(row["b"])
    members = {}
    for student in parent:
        members.setdefault(root(student), []).append(student)
    return sorted((sorted(m) for m in members.values() if len(m) > 1), key=lambda g: (-len(g), g))


def group_figures(groups, rows):
    """Per group: its members, its flagged pairs' count, the strongest and weakest figure and
    the strongest pair (the one shown side by side)."""
    group_of = {student: i for i, members in enumerate(groups) for student in members}
    inside = [[] for _ in groups]  # each group's flagged pairs, in the rows' order
    for r in rows:
        if r["flagged"] and group_of.get(r["a"], -1) == group_of.get(r["b"], -2):
            inside[group_of[r["a"]]].append(r)
    out = []
    for members, flagged in zip(groups, inside):
        out.append({"members": members, "pairs": len(flagged),
                    "strongest": flagged[0]["similarity"], "weakest": flagged[-1]["similarity"],
                    "pair": [flagged[0]["a"], flagged[0]["b"]]})
    return out


def analyse(outdir, sources, threshold=THRESHOLD):
    """Every pair of `sources` (from keep_source), the cache updated: {'threshold', 'flagged'
    (how many pairs), 'groups', 'group_figures', 'pairs' (the strongest pair of each of the
    first SHOWN groups, with code and regions), 'rows' (every pair), 'computed', 'reused'}."""
    texts = boilerplate_texts()
    boilerplate = boilerplate_hashes(texts)
    settings = settings_key(texts)
    cache, prints = load_pairs(outdir, settings), {}
    pairs, computed = all_pairs(sources, cache, boilerplate, prints)
    if computed or len(cache) != len(pairs):  # else the cache holds these very pairs already
        save_pairs(outdir, settings, pairs)
    rows = pair_rows(sources, pairs, threshold)
    by_student = {s["student"]: s for s in sources}
    flagged = [r for r in rows if r["flagged"]]
    groups = groups_of(rows)
    figures = group_figures(groups, rows)
    strongest = {tuple(g["pair"]) for g in figures[:SHOWN]}
    shown = [side_by_side(r, by_student, prints, boilerplate) for r in flagged
             if (r["a"], r["b"]) in strongest]
    return {"threshold": threshold, "min_shared": MIN_SHARED, "flagged": len(flagged),
            "pairs": shown, "groups": groups, "group_figures": figures, "rows": rows,
            "computed": computed, "reused": len(pairs) - computed}
