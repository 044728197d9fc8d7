"""The near-copies' fingerprints and pairs, made while the class is graded.

copydetect's tokenizer takes ~8 ms a file: 1.6 s of CPU for a class of 200, which used to come
after the last submission was graded, and the figures of a class of 200 different codes (20,100
pairs) another 0.4 s, while one core waited.  A process forked before the grading starts, at
the lowest priority (nice 19), fingerprints the class's codes meanwhile, then figures their
pairs (those the pairs cache lacks), PAIRS_PER_RECORD at a time.  When the grading is over it is
told to stop after the code or the pairs in hand; the parent reads what it made, and
similarity.analyse makes the rest as before (in --jobs processes).  It also keeps each student's
code (similarity.keep_source, written atomically; the parent's own keep_source then reads it
back instead of loading the entry again).  What it makes goes to a private temporary file the
parent opened: records of ("print", code hash, fingerprint) and ("pairs", {cache key: figures}).
"""
import os
import pickle
import signal
import sys
import tempfile
import time

STOP_SECONDS = 10.0  # to finish the code in hand once asked to stop, before it is killed
PAIRS_PER_RECORD = 2000  # pairs figured between two looks at the stop (~45 ms)


class Fingerprints:
    """start() a fingerprinter for `entries`; collect() stops it and returns {code hash: print}."""

    def __init__(self, pid, results):
        self.pid, self.results = pid, results

    @classmethod
    def start(cls, outdir, entries):
        """Fork the fingerprinter (Linux: it must be a fork made before any pipe, socket or
        thread of the grading exists, so it holds none of them); None where it cannot."""
        if sys.platform != "linux" or not entries:
            return None
        results = tempfile.TemporaryFile(prefix="attn-prints-")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _fingerprint(outdir, entries, results.fileno())
            finally:
                os._exit(0)  # never the parent's cleanup, nor a second flush of its buffers
        return cls(pid, results)

    def collect(self):
        """Stop the fingerprinter after the code in hand and return what it made:
        ({code hash: print}, {pair cache key: figures})."""
        _end(self.pid, signal.SIGTERM)
        from grader.batch import similarity

        similarity.load_copydetect()  # what unpickling a print imports, without matplotlib (0.2 s)
        with self.results:
            self.results.seek(0)
            return _read(self.results.read())

    def cancel(self):
        """Stop it now (the batch was interrupted); what it made is dropped."""
        _end(self.pid, signal.SIGKILL)
        self.results.close()


def _fingerprint(outdir, entries, fd):
    from grader.batch import similarity

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C is the parent's to handle
    os.nice(19)
    boilerplate = similarity.boilerplate_hashes()
    prints = {}
    for entry in entries:
        if stopping:
            return
        saved = similarity.keep_source(outdir, entry)  # the parent's keep_source reads it back
        if saved is None or saved["hash"] in prints:
            continue
        prints[saved["hash"]] = similarity.fingerprint(saved["source"], boilerplate)
        _write(fd, ("print", saved["hash"], prints[saved["hash"]]))
    cache = similarity.load_pairs(outdir, similarity.settings_key(boilerplate))
    index = similarity.hash_index(prints)
    todo = [(a, b) for a, b in similarity.pair_keys(prints) if f"{a}:{b}" not in cache]
    for chunk in _chunks(todo):
        if stopping:
            return
        found = similarity.class_figures(prints, chunk, index)
        _write(fd, ("pairs", {f"{a}:{b}": figures for (a, b), figures in found.items()}))


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


def _read(blob):
    """({code hash: print}, {pair cache key: figures}) from the complete records of `blob` (a
    record cut short by a kill is left out)."""
    prints, pairs, at = {}, {}, 0
    while at + 8 <= len(blob):
        size = int.from_bytes(blob[at:at + 8], "little")
        if at + 8 + size > len(blob):
            break
        record = pickle.loads(blob[at + 8:at + 8 + size])
        if record[0] == "print":
            prints[record[1]] = record[2]
        else:
            pairs.update(record[1])
        at += 8 + size
    return prints, pairs


def _end(pid, how):
    """Signal the fingerprinter and reap it (killed if it has not ended within STOP_SECONDS)."""
    try:
        os.kill(pid, how)
    except OSError:
        pass
    deadline = time.monotonic() + STOP_SECONDS
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        if time.monotonic() > deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            deadline = float("inf")
        time.sleep(0.005)
