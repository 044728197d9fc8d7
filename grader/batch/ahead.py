"""The near-copies' fingerprints, made while the class is graded, from the cores' idle moments.

copydetect's tokenizer takes ~8 ms a file: 1.6 s of CPU for a class of 200, which used to come
after the last submission was graded.  While the judges grade, the cores are not always busy (a
judge waits while its worker computes, and the other way round), so a process forked before the
grading starts, at the lowest priority (nice 19: the scheduler gives it what the judges and
workers leave), fingerprints the class's codes meanwhile.  When the grading is over it is told to
stop after the code in hand; the parent reads what it made, and similarity.analyse makes the
rest as before (in --jobs processes).  It also keeps each student's code (similarity.keep_source,
written atomically; the parent's own keep_source then reads it back instead of loading the entry
again).  Its fingerprints go to a private temporary file the parent opened.
"""
import os
import pickle
import signal
import sys
import tempfile
import time

STOP_SECONDS = 10.0  # to finish the code in hand once asked to stop, before it is killed


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
        """Stop the fingerprinter after the code in hand and return what it made."""
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
    done = set()
    for entry in entries:
        if stopping:
            return
        saved = similarity.keep_source(outdir, entry)  # the parent's keep_source reads it back
        if saved is None or saved["hash"] in done:
            continue
        done.add(saved["hash"])
        data = pickle.dumps((saved["hash"], similarity.fingerprint(saved["source"], boilerplate)))
        view = memoryview(len(data).to_bytes(8, "little") + data)
        while view:
            view = view[os.write(fd, view):]


def _read(blob):
    """The complete records of `blob` (a record cut short by a kill is left out)."""
    prints, at = {}, 0
    while at + 8 <= len(blob):
        size = int.from_bytes(blob[at:at + 8], "little")
        if at + 8 + size > len(blob):
            break
        code, print_ = pickle.loads(blob[at + 8:at + 8 + size])
        prints[code] = print_
        at += 8 + size
    return prints


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
