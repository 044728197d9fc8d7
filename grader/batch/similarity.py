"""Near-copies in a class: pairs (and groups) of submissions whose own code is mostly the same.

The fingerprints are copydetect's (pinned in requirements-instructor.txt): its tokenizer turns
every identifier into V/F/O and every string into S and drops comments and spacing (the same
text, from pygments' tokens found with fewer regex calls: lexing.py), then k-grams of the
token text are winnowed and two submissions are compared by the k-grams they share, mapped back to
regions of the original code.  Two things are ours:

- what never counts: the stub (exercises/attention.py) and the notebook's given cells are
  boilerplate fingerprints, and the quiz answer lines (`Q1_SHAPE = ...`) are blanked before
  fingerprinting, since every correct student writes the same answers;
- a stable k-gram hash (blake2b) instead of copydetect's `hash()`, which Python salts per process:
  with it a figure computed in a shard, in a resumed batch or in a merge is the same figure.

A pair's figure is copydetect's: the share of one submission's fingerprinted code found in the
other, for each side; the pair is flagged when the larger share reaches the threshold and the
shared code is long enough to be more than an idiom (MIN_SHARED filtered characters).  Flagged
pairs chain into groups.  Pairs are cached in OUTDIR/similarity/pairs.json by the two code
hashes and the settings (the figures only: the shared regions of the pairs shown on the page are
found again, a few dozen comparisons), so a resumed batch or a merge computes only the pairs it
lacks.
"""
import collections
import hashlib
import json
import operator
import os
import re
import sys
import types

from grader import paths
from grader.batch import lexing
from grader.inert import json_text
from grader.statefile import write_atomic

ROOT = paths.KIT_ROOT
FOLDER = "similarity"
SOURCES, PAIRS, TABLE = "sources", "pairs.json", "similarity.csv"
NOISE = 25      # k: shorter shared token runs are noise (copydetect's default noise threshold)
WINDOW = 1      # winnowing window: every k-gram (copydetect's default for these thresholds)
THRESHOLD = 0.7  # default --similarity: a share of one side's code found in the other
MIN_SHARED = 200  # filtered characters in common, at least: a few shared lines are idioms
PARALLEL_FROM = 40  # codes to fingerprint before it is worth forking fingerprinters
SHOWN = 60  # groups whose strongest pair is shown side by side on the page (the CSV has all)
BOILERPLATE_FILES = ("exercises/attention.py", "release/attention.ipynb",
                     "grader/batch/lesson_given_code.txt")
QUIZ_LINE = re.compile(r"^[ \t]*Q\d_[A-Z0-9_]*[ \t]*(:[^=\n]*)?=.*$", re.MULTILINE)


def code_hash(source):
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def blank_quiz(source):
    """The quiz answer lines replaced by spaces (offsets kept for the side-by-side)."""
    return QUIZ_LINE.sub(lambda m: " " * len(m.group(0)), source)


def _kgram_hashes(text, k):
    """int64 hash of every k-gram, the same in every process (copydetect's own uses hash())."""
    import numpy as np

    return np.array([int.from_bytes(hashlib.blake2b(text[i:i + k].encode("utf-8", "surrogatepass"),
                                                    digest_size=8).digest(), "little", signed=True)
                     for i in range(len(text) - k + 1)], dtype=np.int64)


def load_copydetect():
    """copydetect, imported without matplotlib: its detector module imports matplotlib.pyplot
    (0.25 s, most of copydetect's import) for the plots of its own HTML report, which the kit
    never draws.  A stand-in takes matplotlib's place while copydetect is imported and is taken
    out right after, so whatever imports matplotlib later gets the real one."""
    if "copydetect" not in sys.modules:
        stand_ins = {name: types.ModuleType(name) for name in ("matplotlib", "matplotlib.pyplot")
                     if name not in sys.modules}
        if "matplotlib" in stand_ins and "matplotlib.pyplot" in stand_ins:
            stand_ins["matplotlib"].pyplot = stand_ins["matplotlib.pyplot"]
        sys.modules.update(stand_ins)
        try:
            import copydetect  # noqa: F401
        finally:
            for name, module in stand_ins.items():
                if sys.modules.get(name) is module:
                    del sys.modules[name]
    return sys.modules["copydetect"]


def fingerprint(source, boilerplate=None):
    """A copydetect CodeFingerprint of `source` with the quiz lines and boilerplate left out."""
    import numpy as np  # (numpy and copydetect load only when a class is compared)

    copydetect = load_copydetect()
    CodeFingerprint, utils = copydetect.CodeFingerprint, copydetect.utils

    code = blank_quiz(source)
    filtered, offsets = lexing.filter_code(code)  # utils.filter_code's values, faster
    hashes, idx = utils.winnow(_kgram_hashes(filtered, NOISE), WINDOW, remove_duplicates=False)
    if boilerplate is not None and len(boilerplate) and len(hashes):
        keep = ~np.isin(hashes, boilerplate)
        hashes, idx = hashes[keep], idx[keep]
    positions = {}
    for value, i in zip(hashes.tolist(), idx.tolist()):
        positions.setdefault(value, []).append(i)
    # copydetect's CodeFingerprint hashes in __init__ with the salted hash(): build it with ours,
    # filling the fields compare_files reads (copydetect is pinned; the tests compare through it)
    fp = CodeFingerprint.__new__(CodeFingerprint)
    fp.filename, fp.raw_code, fp.filtered_code, fp.offsets = "attention.py", code, filtered, offsets
    fp.hashes, fp.hash_idx, fp.k = set(positions), positions, NOISE
    fp.kit_hashes, fp.kit_positions = hashes, idx  # what class_figures() reads
    fp.token_coverage = utils.get_token_coverage(positions, NOISE, len(filtered))
    return fp


def boilerplate_hashes(root=ROOT):
    """Fingerprints of the code every student is given: the stub, the notebook's cells, the
    lesson's code and the contract the stub dictates (BOILERPLATE_FILES)."""
    import numpy as np

    from grader.judge.submission import notebook_source

    texts = []
    for name in BOILERPLATE_FILES:
        path = os.path.join(root, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            texts.append(notebook_source(text) if name.endswith(".ipynb") else text)
    values = [np.array(sorted(fingerprint(t).hashes), dtype=np.int64) for t in texts]
    return np.unique(np.concatenate(values)) if values else np.array([], dtype=np.int64)


def settings_key(boilerplate):
    """What a cached pair depends on besides the two codes: k, the window, the boilerplate and
    the versions of copydetect and of the tokenizer under it (pygments)."""
    import numpy as np
    import pygments

    version = load_copydetect().__version__
    h = hashlib.sha256(f"{NOISE}/{WINDOW}/{version}/{pygments.__version__}".encode())
    h.update(np.asarray(boilerplate, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def class_figures(prints, pairs, index=None):
    """{(a, b): {'share', 'shared'}} for every (a, b) of `pairs` (keys of `prints`, the
    fingerprints): the numbers compare() gets through copydetect's compare_files (tests hold them
    equal on every two files of the corpus), for a whole class at once.  One side's overlap is
    the length of the union of the k-long runs at the positions of its k-grams whose hash the
    other side holds (copydetect's slices, summed); it is found for all the partners of a code
    together (overlaps), in a tenth of the time of one comparison per pair: a class of 200
    different files has 20,000 pairs.  Codes whose fingerprints are the same (a copy whose names,
    comments or spacing were changed, the stub handed in twice) are figured once: their figures
    depend on nothing else.  The regions, which only the pairs shown side by side need, are left
    to compare().  `index`: hash_index(prints), where it is built once for many calls."""
    index = index or hash_index(prints)
    same_as = index.same_as
    wanted = {}  # code -> the codes its overlap with is wanted, both ways
    for a, b in pairs:
        ra, rb = same_as[a], same_as[b]
        wanted.setdefault(ra, set()).add(rb)
        wanted.setdefault(rb, set()).add(ra)
    lengths = overlaps(prints, wanted, index)
    # a share is a's length over its coverage, 0 for none (copydetect's own arithmetic)
    coverage = {code: float(prints[code].token_coverage) if len(prints[code].filtered_code) > 0
                else None for code in wanted}
    found = {}
    for a, b in pairs:
        ra, rb = same_as[a], same_as[b]
        ab, ba = lengths[ra][rb], lengths[rb][ra]
        found[a, b] = {"share": [round(ab / coverage[ra], 4) if ab and coverage[ra] else 0.0,
                                 round(ba / coverage[rb], 4) if ba and coverage[rb] else 0.0],
                       "shared": ab}
    return found


Index = collections.namedtuple("Index", "same_as row_of vocabulary holders first places ids own "
                                        "k chars every_id ends")


def same_fingerprints(prints):
    """{code: the first code, in sorted order, whose fingerprint is the same as its own}."""
    first = {}
    return {code: first.setdefault((prints[code].filtered_code, prints[code].k,
                                    prints[code].kit_hashes.tobytes(),
                                    prints[code].kit_positions.tobytes()), code)
            for code in sorted(prints)}


def hash_index(prints):
    """overlaps' index of `prints`, one code for each fingerprint (same_fingerprints), ~20 ms for
    200 codes and 0.1 s for 1000: `same_as` (the code figured for each code), `row_of` (each
    code figured, its row), `vocabulary` (every hash, sorted), `holders` (the rows holding each
    hash, by hash id), `first` (hash id -> where its holders start), per row its k-gram places
    in order (`places`), their hash ids (`ids`) and its own hash ids sorted (`own`); `k`; and
    for _column, every row's places as characters of all rows' code one after another
    (`chars`), their hash ids (`every_id`) and where each row's characters end (`ends`)."""
    import numpy as np

    same_as = same_fingerprints(prints)
    codes = sorted(set(same_as.values()))
    row_of = {code: i for i, code in enumerate(codes)}
    held_by_code = [np.unique(prints[code].kit_hashes) for code in codes]
    vocabulary = np.unique(np.concatenate(held_by_code)) if codes else np.zeros(0, np.int64)
    own = [np.searchsorted(vocabulary, held) for held in held_by_code]
    ids = np.concatenate(own) if codes else np.zeros(0, np.int64)
    owners = np.repeat(np.arange(len(codes)), [len(held) for held in held_by_code])
    order = np.argsort(ids, kind="stable")
    holders = owners[order]  # the codes holding each hash, by hash id
    first = np.searchsorted(ids[order], np.arange(len(vocabulary) + 1))  # hash id -> holders
    places, place_ids = [], []
    for code in codes:
        fp = prints[code]
        by_place = np.argsort(fp.kit_positions, kind="stable")
        places.append(np.asarray(fp.kit_positions)[by_place].astype(np.int64))  # [n]
        place_ids.append(np.searchsorted(vocabulary, np.asarray(fp.kit_hashes)[by_place]))
    ks = {prints[code].k for code in codes}
    if len(ks) > 1:
        raise ValueError(f"fingerprints of different k: {sorted(ks)}")
    k = ks.pop() if ks else NOISE
    # every code's characters from its first k-gram to its last one's end, one after another
    # (_column): a code's last k - 1 characters start no k-gram, so a window of k characters
    # never reaches into the code before it
    widths = [int(p[-1] - p[0]) + k if len(p) else 0 for p in places]
    ends = np.cumsum(widths, dtype=np.int64)  # [codes] where each code's characters end
    chars = np.concatenate([p - p[0] + end - width if len(p) else p  # [all places] their char
                            for p, end, width in zip(places, ends, widths)] or [[]])
    chars = chars.astype(np.int64)
    every_id = np.concatenate(place_ids or [[]]).astype(np.int64)  # [all places] their hash id
    return Index(same_as, row_of, vocabulary, holders, first, places, place_ids, own, k, chars,
                 every_id, ends)


FEW_PARTNERS = 32  # or fewer: a code's overlaps are read from its partners' columns


def overlaps(prints, partners, index=None):
    """{a: {b: how much of a's code b's holds}} (see class_figures) for each code a of
    `partners` ({a: its partners}, a and b among the codes `index` figures: its same_as'
    values).  A code with many partners gets them all at once, from which codes hold each of
    its hashes (_row); one with a few reads each from its partner's column: how much of every
    code's code that partner holds (_column), made once for all who read it.  A class figured
    in runs of pairs (ahead.py) is a few codes with many partners and every other code with
    those few: rows for the few, and their columns (a class of 1000 different files in runs of
    2000 pairs: 6 s, where a row for every code of every run took 1.8 s a run, ~6.5 minutes)."""
    index = index or hash_index(prints)
    lengths = {a: {} for a in partners}
    readers = {}  # partner -> the codes with few partners that read its column
    for a, others in partners.items():
        if len(others) > FEW_PARTNERS:
            lengths[a].update(_row(index, a, list(others)))
        else:
            for b in others:
                readers.setdefault(b, []).append(a)
    for b, codes in readers.items():
        column = _column(index, b)
        for a in codes:
            lengths[a][b] = int(column[index.row_of[a]])
    return lengths


def _row(index, a, others):
    """{b: how much of a's code b's holds} for each of `others`: a's k-grams marked for every
    code holding their hash, [places, codes], then the partners' columns of it."""
    import numpy as np

    places, ids = index.places[index.row_of[a]], index.ids[index.row_of[a]]
    if len(places) == 0:
        return dict.fromkeys(others, 0)
    codes = len(index.row_of)
    counts = index.first[ids + 1] - index.first[ids]  # [n] codes holding each one
    spans = np.repeat(index.first[ids] - (np.cumsum(counts) - counts), counts) \
        + np.arange(counts.sum())
    held = np.zeros(len(places) * codes, dtype=bool)  # [n, codes], flat
    held[np.repeat(np.arange(len(places)) * codes, counts) + index.holders[spans]] = True
    held = held.reshape(len(places), codes)[:, [index.row_of[b] for b in others]]  # [n, partners]
    start = int(places[0])
    window = np.zeros((int(places[-1]) - start + index.k, len(others)),
                      dtype=bool)  # [chars, partners]
    window[places - start] = held  # held runs starting at each character
    return dict(zip(others, _covered(window, index.k).sum(axis=0, dtype=np.int64).tolist()))


def _column(index, b):
    """[codes]: how much of each code's code b's holds, for every code at once: each code's
    k-grams whose hash b holds, marked on all codes' characters one after another."""
    import numpy as np

    holds = np.zeros(len(index.vocabulary), dtype=bool)
    holds[index.own[index.row_of[b]]] = True
    window = np.zeros(int(index.ends[-1]) if len(index.ends) else 0, dtype=bool)  # [chars]
    window[index.chars] = holds[index.every_id]
    covered = np.concatenate([[0], np.cumsum(_covered(window, index.k), dtype=np.int64)])
    return covered[index.ends] - covered[index.ends - np.diff(index.ends, prepend=0)]


def _covered(window, k):
    """`window` ([chars, ...], the characters where a held k-gram starts) made, in place, the
    characters its k-long runs cover: those where one starts at most k - 1 characters before,
    found by doubling the window (1, 2, 4, 8, 16 and two 16s for k = 25)."""
    size = 1
    while size * 2 <= k:  # window[x]: any run starting in x - 2 size + 1 .. x
        window[size:] |= window[:-size].copy()
        size *= 2
    if size < k:  # the two windows of `size` ending at x and k - size before it
        window[k - size:] |= window[:size - k].copy()
    return window


def compare(fp_a, fp_b):
    """{'share': [a, b], 'shared': filtered chars in common, 'regions': [[start, end]...] x 2}
    (regions in the code as fingerprinted: the quiz lines blanked, offsets unchanged)."""
    overlap, shares, slices = load_copydetect().compare_files(fp_a, fp_b)
    regions = [[[int(s), int(e)] for s, e in zip(*side)] if side.ndim == 2 else []
               for side in slices]
    return {"share": [round(float(x), 4) for x in shares], "shared": int(overlap),
            "regions": regions}


# -- a class: sources kept in OUTDIR, pairs cached ----------------------------------------------
def source_path(outdir, student):
    return os.path.join(outdir, FOLDER, SOURCES, student + ".json")


def read_source(outdir, student):
    try:
        with open(source_path(outdir, student), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "source" in data else None


def keep_source(outdir, entry):
    """The student's code as the grader read it (notebook cells, zip, package: the submission
    loader's one file), saved once per entry content; None when there is none to read."""
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
    try:
        with open(os.path.join(outdir, FOLDER, PAIRS), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data.get("pairs", {}) if data.get("settings") == settings else {}


def save_pairs(outdir, settings, pairs):
    os.makedirs(os.path.join(outdir, FOLDER), exist_ok=True)
    write_atomic(os.path.join(outdir, FOLDER, PAIRS),
                 json.dumps({"settings": settings, "pairs": dict(sorted(pairs.items()))}) + "\n")


def merge_caches(outdir, folders):
    """The pairs the inputs of a merge already compared, joined into OUTDIR's cache (those of
    other settings are dropped when the cache is next read)."""
    joined, settings = {}, None
    for folder in [outdir] + list(folders):
        try:
            with open(os.path.join(folder, FOLDER, PAIRS), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            continue
        settings = settings or data.get("settings")
        if data.get("settings") == settings:
            joined.update(data.get("pairs", {}))
    if settings is not None:
        save_pairs(outdir, settings, joined)


def pair_keys(hashes):
    """(a, b) for every two of the code `hashes` (a code with itself too: two students with the
    same code), a before b in sorted order: a pair's cache key is f"{a}:{b}"."""
    hashes = sorted(set(hashes))
    return [(ha, hb) for i, ha in enumerate(hashes) for hb in hashes[i:]]


def all_pairs(sources, cache, boilerplate, prints, jobs=1, figured=None):
    """{'<hash a>:<hash b>': {'share', 'shared'}} for every two codes of `sources`; returns
    (pairs, how many were not in the cache).  `figured`: figures of pairs made while the class
    was graded (ahead.py), by cache key; the pairs they lack are computed here."""
    codes = {s["hash"]: s["source"] for s in sources}
    keyed = [(pair, f"{pair[0]}:{pair[1]}") for pair in pair_keys(codes)]
    todo = [(pair, key) for pair, key in keyed if key not in cache]
    figured = figured or {}
    cache.update((key, figured[key]) for _, key in todo if key in figured)
    left = [pair for pair, key in todo if key not in cache]
    needed = sorted({h for pair in left for h in pair} - set(prints))
    prints.update(zip(needed, _fingerprints([codes[h] for h in needed], boilerplate, jobs)))
    for (ha, hb), found in class_figures({h: prints[h] for pair in left for h in pair},
                                         left).items():
        cache[f"{ha}:{hb}"] = found
    return {key: cache[key] for _, key in keyed}, len(todo)


def _fingerprints(texts, boilerplate, jobs):
    """fingerprint() of each text, in order: in `jobs` forked processes when there are many
    (~2.4 ms a file, most of it the tokens and the k-grams' hashes; most of a class's
    near-copies once the pairs are found together: class_figures)."""
    import multiprocessing

    forkable = "fork" in multiprocessing.get_all_start_methods()
    if jobs <= 1 or len(texts) < PARALLEL_FROM or not forkable:
        return [fingerprint(text, boilerplate) for text in texts]
    _FORK_INPUT[:] = [texts, boilerplate]
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            return pool.map(_fingerprint_at, range(len(texts)), -(-len(texts) // (4 * jobs)))
    finally:
        _FORK_INPUT.clear()


_FORK_INPUT = []  # what the forked fingerprinters read (inherited, not pickled)


def _fingerprint_at(i):
    texts, boilerplate = _FORK_INPUT
    return fingerprint(texts[i], boilerplate)


def pair_rows(sources, pairs, threshold):
    """One row per two students, the most similar first (then by the two ids)."""
    by_student = sorted(sources, key=lambda s: s["student"])
    ids, hashes = [s["student"] for s in by_student], [s["hash"] for s in by_student]
    rows = []
    for i, (a, hash_a) in enumerate(zip(ids, hashes)):
        for b, hash_b in zip(ids[i + 1:], hashes[i + 1:]):
            if hash_a <= hash_b:  # the cache's key names the smaller hash first
                found = pairs[f"{hash_a}:{hash_b}"]
                share_a, share_b = found["share"]
            else:
                found = pairs[f"{hash_b}:{hash_a}"]
                share_b, share_a = found["share"]
            similarity = max(share_a, share_b)
            rows.append({"a": a, "b": b, "similarity": similarity, "share_a": share_a,
                         "share_b": share_b, "shared": found["shared"],
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
    """Per group: its members, how many flagged pairs it holds, the strongest and weakest of
    them and which pair is the strongest (the one shown side by side)."""
    group_of = {student: i for i, members in enumerate(groups) for student in members}
    inside = [[] for _ in groups]  # each group's flagged pairs, in the rows' order
    for r in rows:  # one pass over the rows: a class of 1000 has 500,500 of them
        if r["flagged"] and group_of.get(r["a"], -1) == group_of.get(r["b"], -2):
            inside[group_of[r["a"]]].append(r)
    out = []
    for members, flagged in zip(groups, inside):
        out.append({"members": members, "pairs": len(flagged),
                    "strongest": flagged[0]["similarity"], "weakest": flagged[-1]["similarity"],
                    "pair": [flagged[0]["a"], flagged[0]["b"]]})
    return out


def log_counts(log, count, near):
    print(f"similarity: {count} submissions, {near['computed']} pairs computed, "
          f"{near['reused']} reused", file=log)


def analyse(outdir, sources, threshold=THRESHOLD, log=None, jobs=1, prints=None, figured=None):
    """Every pair of `sources` (dicts from keep_source), the cache updated (`prints`: fingerprints
    already made, by code hash, and `figured`: pairs' figures, by cache key: ahead.py's); the
    class view:
    {'threshold', 'flagged' (how many pairs), 'groups', 'group_figures', 'pairs' (the strongest
    pair of each of the first SHOWN groups, with their code and regions), 'rows' (every pair, for
    the CSV), 'computed', 'reused'}."""
    boilerplate = boilerplate_hashes()
    settings = settings_key(boilerplate)
    cache, prints = load_pairs(outdir, settings), dict(prints or {})
    pairs, computed = all_pairs(sources, cache, boilerplate, prints, jobs, figured)
    if computed or len(cache) != len(pairs):  # else the cache holds these very pairs already
        save_pairs(outdir, settings, pairs)  # (a rebuild after an override: 1.8 s for 1000)
    rows = pair_rows(sources, pairs, threshold)
    if log is not None:
        log_counts(log, len(sources), {"computed": computed, "reused": len(pairs) - computed})
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
