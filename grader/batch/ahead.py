"""The near-copies' fingerprints, pairs and analysis, made while the class is graded.

A code's fingerprint took ~8 ms (now ~2.4 ms: lexing.py): 1.6 s of CPU for a class of 200, which
used to come after the last submission was graded, and the figures of a class of 200 different
codes (20,100 pairs) another 0.4 s, while one core waited.  A process forked before the grading
starts, at the lowest priority (nice 19), fingerprints the class's codes meanwhile, then figures
their pairs (those the pairs cache lacks), PAIRS_PER_RECORD at a time, then makes the analysis
itself (similarity.analyse: rows, groups, the pairs shown side by side, the pairs cache saved) and
the similarity table's CSV text, all of which depend on the code only.  When the grading is over it
is told to stop after the code or the pairs in hand (an analysis under way is finished: the parent
would make it again, no faster); the parent takes the analysis where it was made for the very
sources the parent compares, and otherwise makes the rest from what was made (similarity.analyse,
in --jobs processes).  It also keeps each student's code (similarity.keep_source, written
atomically; the parent's own keep_source then reads it back instead of loading the entry again).
What it makes goes to a private temporary file the parent opened: records of ("print", code hash,
the fingerprint pickled), ("pairs", {cache key: figures}), ("analysing",) as the analysis begins
(what a stop looks for: _end) and ("analysis", sources key, threshold, the analysis without its
rows, the CSV).
A fingerprint is unpickled only when the parent needs it (copydetect's import, 0.1 s, which an
analysis made ahead spares the class's last second).
"""
import os
import pickle
import signal
import sys
import tempfile
import time

STOP_SECONDS = 10.0  # to finish the code in hand once asked to stop, before it is killed
# An analysis under way when the grading ends is waited for (the parent would only make it
# again): this much longer, a bound for a fingerprinter gone wrong, not a time it should take.
ANALYSIS_SECONDS = 300.0
PAIRS_PER_RECORD = 2000  # pairs figured between two looks at the stop (~45 ms)


class Fingerprints:
    """start() a fingerprinter for `entries`; collect() stops it and returns what it made."""

    def __init__(self, pid, results):
        self.pid, self.results = pid, results

    @classmethod
    def start(cls, outdir, entries, threshold=None):
        """Fork the fingerprinter (Linux: it must be a fork made before any pipe, socket or
        thread of the grading exists, so it holds none of them); None where it cannot.  With a
        `threshold` it goes on to the analysis once every pair is figured."""
        if sys.platform != "linux" or not entries:
            return None
        results = tempfile.TemporaryFile(prefix="attn-prints-")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _fingerprint(outdir, entries, results.fileno(), threshold)
            finally:
                os._exit(0)  # never the parent's cleanup, nor a second flush of its buffers
        return cls(pid, results)

    def collect(self):
        """Stop the fingerprinter after the code or the pairs in hand (or once its analysis is
        made) and return what it made (Made, with the CPU the fingerprinter used)."""
        cpu_seconds = _end(self.pid, signal.SIGTERM, lambda: _analysing(self.results.fileno()))
        with self.results:
            self.results.seek(0)
            made = Made(*_read(self.results.read()))
        made.cpu_seconds = cpu_seconds
        return made

    def cancel(self):
        """Stop it now (the batch was interrupted); what it made is dropped."""
        _end(self.pid, signal.SIGKILL)
        self.results.close()


class Made:
    """What the fingerprinter made: `figured` ({pair cache key: figures}), `prints` ({code hash:
    fingerprint}, unpickled on first use) and the analysis, for analysis_for()."""

    def __init__(self, pickled_prints, figured, analysis=None):
        self._pickled, self._prints, self.figured = pickled_prints, None, figured
        self.analysis, self.cpu_seconds = analysis, None

    @property
    def prints(self):
        if self._prints is None:
            from grader.batch import similarity

            similarity.load_copydetect()  # what a print unpickles, without matplotlib (0.2 s)
            self._prints = {code: pickle.loads(blob) for code, blob in self._pickled.items()}
        return self._prints

    def analysis_for(self, sources, threshold):
        """(analysis without its rows, the similarity CSV) made ahead for these very `sources`
        at this `threshold`; None where none was (the batch was too short) or it was made for
        other sources (an entry whose record the grading did not write is left out here)."""
        if self.analysis is None:
            return None
        key, made_at, view, table = self.analysis
        return (view, table) if key == sources_key(sources) and made_at == threshold else None


def sources_key(sources):
    """Which codes an analysis compared: each student's, by its digest and code hash."""
    return sorted([s["student"], s.get("digest"), s["hash"]] for s in sources)


def _fingerprint(outdir, entries, fd, threshold=None):
    from grader.batch import similarity

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C is the parent's to handle
    os.nice(19)
    boilerplate = similarity.boilerplate_hashes()
    prints, sources, figured = {}, [], {}
    for entry in entries:
        if stopping:
            return
        saved = similarity.keep_source(outdir, entry)  # the parent's keep_source reads it back
        if saved is None:
            continue
        sources.append(saved)
        if saved["hash"] in prints:
            continue
        prints[saved["hash"]] = similarity.fingerprint(saved["source"], boilerplate)
        _write(fd, ("print", saved["hash"], pickle.dumps(prints[saved["hash"]])))
    cache = similarity.load_pairs(outdir, similarity.settings_key(boilerplate))
    index = similarity.hash_index(prints)
    todo = [(a, b) for a, b in similarity.pair_keys(prints) if f"{a}:{b}" not in cache]
    for chunk in _chunks(todo):
        if stopping:
            return
        found = {f"{a}:{b}": figures
                 for (a, b), figures in similarity.class_figures(prints, chunk, index).items()}
        figured.update(found)
        _write(fd, ("pairs", found))
    if threshold is None or stopping:
        return
    _write(fd, ("analysing",))  # from here a stop waits for the analysis (_end)
    _write(fd, ("analysis",) + _analysis(outdir, sources, threshold, prints, figured))


def _analysis(outdir, sources, threshold, prints, figured):
    """(sources key, threshold, the analysis without its rows, the similarity CSV): what the
    parent would make of the same sources (gradebook._near_copies)."""
    from grader.batch import classpage, similarity

    view = similarity.analyse(outdir, sources, threshold, prints=prints, figured=figured)
    table = classpage.similarity_csv(view.pop("rows"))
    return sources_key(sources), threshold, view, table


def _chunks(pairs, size=PAIRS_PER_RECORD):
    """`pairs` (sorted by their first code) in runs of at least `size`, cut only where the first
    code changes: a code's partners are figured in one call, which overlaps() does together."""
    run = []
    for pair in pairs:
        if len(run) >= size and pair[0] != run[-1][0]:
            yield run
            run = []
        run.append(pair)
    if run:
        yield run


def _write(fd, record):
    data = pickle.dumps(record)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(fd, view):]


def _records(blob):
    """The complete records of `blob`, in order (a record cut short by a kill is left out)."""
    at = 0
    while at + 8 <= len(blob):
        size = int.from_bytes(blob[at:at + 8], "little")
        if at + 8 + size > len(blob):
            return
        yield pickle.loads(blob[at + 8:at + 8 + size])
        at += 8 + size


def _read(blob):
    """({code hash: pickled print}, {pair cache key: figures}, the analysis record's fields or
    None) from the complete records of `blob`."""
    prints, pairs, analysis = {}, {}, None
    for record in _records(blob):
        if record[0] == "print":
            prints[record[1]] = record[2]
        elif record[0] == "pairs":
            pairs.update(record[1])
        elif record[0] == "analysis":
            analysis = record[1:]
    return prints, pairs, analysis


def _analysing(fd):
    """Whether the fingerprinter, still writing to `fd`, is making the analysis: read with
    pread, which leaves the file offset the two processes share where the writer has it."""
    kinds = [record[0] for record in _records(os.pread(fd, os.fstat(fd).st_size, 0))]
    return "analysing" in kinds and "analysis" not in kinds


def _end(pid, how, analysing=lambda: False):
    """Signal the fingerprinter and reap it: killed if it has not ended within STOP_SECONDS, or
    ANALYSIS_SECONDS more where `analysing()` says it is making the analysis.  Returns the CPU
    seconds it used (None where it was reaped elsewhere)."""
    try:
        os.kill(pid, how)
    except OSError:
        pass
    deadline, extended = time.monotonic() + STOP_SECONDS, False
    while True:
        try:
            done, _, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline and not extended and how != signal.SIGKILL \
                and analysing():
            deadline, extended = deadline + ANALYSIS_SECONDS, True
        elif time.monotonic() > deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            deadline = float("inf")
        time.sleep(0.005)
