"""Issue 13: one student cannot touch another student's grade, the grading machine or the TA's
screen.  Each attack (tests/submissions/isolation/) is the reference plus one snippet, graded in
every isolation mode it applies to: cold bubblewrap, forked bubblewrap (the fork server), and the
plain subprocess, cold and forked.  A mode that cannot defend an attack says so (skip, reason).

For each: grading ends, the attack gains nothing, the honest part of the code still scores, and
nothing is left behind (files in the grader's temp folder, processes, shared-memory segments).
No wall-time assertion: budgets are checked by what the grader counted, not by a clock.
The same attacks in a mixed class, through `python -m grader batch`: tests/test_hostile_batch.py;
the wire, the judge's inputs and what the TA reads: tests/test_hostile_inputs.py.
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.judge.workers import forked
from grader.authoring import stubs as authoring
from grader.sandbox import forkserver, launch as sandbox, uidpool
from grader.sandbox.runtime.limits import CLONE_NEWNET
from grader.judge import grading, submission
from grader.judge import service  # noqa: E402
from grader import rubric
from grader.sandbox.launch import Limits
import zygotes
from scratch import private_tempdir

ATTACKS = Path(__file__).parent / "submissions" / "isolation"
COLD_BWRAP = ["bubblewrap"] if sandbox.bubblewrap_works() else []
FORK_BWRAP = ["fork-bubblewrap"] if COLD_BWRAP and forkserver.supported("bubblewrap") else []
MODES = ["process", "fork-process"] + COLD_BWRAP + FORK_BWRAP
PLAIN = ("process", "fork-process")
# Where an attack meets the same mechanism in both cold modes, it is graded in one of them: the
# worker's own code (its syscall filter and audit hook, its channel) and the judge's (its copy of
# the file, the one budget) are the same in a cold bubblewrap worker and a cold plain subprocess;
# what bubblewrap adds (a read-only folder, its own /tmp, a uid, namespaces) is graded in the modes
# that have it, and what only a plain worker can do (write its folder) in the plain ones.  A forked
# worker starts otherwise than a cold one (the zygote's copy of the file, namespaces of its own),
# so both forked modes stay wherever a cold one does.
ONE_COLD = (COLD_BWRAP or ["process"])[:1]
WORKER_SIDE = ONE_COLD + [m for m in MODES if m.startswith("fork-")]
ROOT = os.geteuid() == 0
REFERENCE = open(authoring.SOLUTION, encoding="utf-8").read()
LIMITS = Limits(call_seconds=10.0, submission_seconds=120.0)
RUBRIC = rubric.load()
MAX = sum(c.points for c in RUBRIC.checks)


def attack(name):
    """The reference with the snippet of tests/submissions/isolation/NAME.py put in its place."""
    snippet = (ATTACKS / f"{name}.py").read_text(encoding="utf-8")
    where = re.match(r"# where: (\w+)", snippet).group(1)
    return inject(**{("at_import" if where == "import" else "in_attend"): snippet})


def inject(at_import="", in_attend=""):
    source = REFERENCE
    if in_attend:
        body = "\n".join("    " + line for line in in_attend.strip().splitlines())
        anchor = '    ### BEGIN SOLUTION\n    # TODO: 分数'
        assert anchor in source
        source = source.replace(anchor, body + "\n" + anchor, 1)
    return source + "\n" + at_import.strip() + "\n"


def shm_segments():
    """(key, shmid) of every System V shared-memory segment of the machine."""
    with open("/proc/sysvipc/shm") as handle:
        return {tuple(line.split()[:2]) for line in handle.readlines()[1:]}


def _started_by_another_checkout(pid):
    """Whether `pid` belongs to another grading than this test process's: it descends from a
    Python of the kit's venv (this checkout's other test worker, a colleague's checkout, their
    judges) and not from this process.  One re-parented to init is a leftover, so it is ours."""
    chain = []  # (pid, program) of each process from `pid` up to init
    while pid > 1:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                program = handle.read().split(b"\0")[0].decode(errors="replace")
            with open(f"/proc/{pid}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        chain.append((pid, program))
        pid = parent
    ancestors = chain[1:]
    if any(ancestor == os.getpid() for ancestor, _ in ancestors):
        return False
    return any("/.venv/" in program for _, program in ancestors)


CLAIMED = set()  # the worker uids this test process has claimed (uidpool.claim, recorded below)
_claim = uidpool.claim


def _recording_claim():
    slot = _claim()
    if slot is not None:
        CLAIMED.add(slot.uid)
    return slot


uidpool.claim = _recording_claim


def pool_processes(uids=None):
    """Processes running as one of the workers' own uids (uidpool.py), but a colleague's;
    with `uids`, only those uids (the ones this process's gradings claimed: a process of
    another grading re-parented to init is then not taken for ours)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if uidpool.FIRST_UID <= uid < uidpool.FIRST_UID + uidpool.SLOTS \
                and (uids is None or uid in uids) and not _started_by_another_checkout(int(pid)):
            found.append(int(pid))
    return found


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def eventually(condition, seconds=15):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


class Graded:
    """One grading with the grader's temp files in a private scratch folder, and what it left."""

    def __init__(self, tmp_path, source, mode, limits=LIMITS, startup_seconds=None):
        folder = tmp_path / "submission"
        folder.mkdir()
        (folder / "attention.py").write_text(source, encoding="utf-8", errors="surrogatepass")
        server = zygotes.server(mode[len("fork-"):]) if mode.startswith("fork-") else None
        shm_before = shm_segments()
        with private_tempdir(prefix="hostile-scratch-") as scratch:
            if server:
                sub, worker = grading.start(str(folder), server.isolation, limits, forked(server))
            else:
                sub, worker = grading.start(str(folder), mode, limits)
            if startup_seconds:  # how long each worker's hello may take, the torch import included
                worker.startup_seconds = startup_seconds
            self.student = worker
            self.data = grading.finish(sub, worker)
        self.output = self.data["metadata"]["student_output"]
        spool = server.spool if server and server.spool else None
        # A forked worker's copy is removed when the zygote reports its exit: wait for it.
        eventually(lambda: not (spool and os.listdir(spool)) and not os.listdir(scratch))
        self.leftovers = sorted(os.listdir(scratch)) + (sorted(os.listdir(spool)) if spool else [])
        shutil.rmtree(scratch, ignore_errors=True)
        eventually(lambda: not (shm_segments() - shm_before))
        self.new_shm = shm_segments() - shm_before
        self.statuses = {c["id"]: c["status"] for c in self.data["checks"]}
        self.keys = {c["id"]: [v["key"] for v in c["verdicts"]] for c in self.data["checks"]}

    def assert_clean(self):
        assert self.leftovers == [], self.leftovers
        assert self.new_shm == set(), "a shared-memory segment outlived the worker"
        assert eventually(lambda: pool_processes(CLAIMED) == []), "a worker's process outlived it"

    def assert_honest_parts_pass(self):
        for check in ("split_heads.transpose", "merge_heads.round_trip", "quiz.q1_params"):
            assert self.statuses[check] == "passed", (check, self.statuses[check], self.output)


def grade(tmp_path, source, mode, limits=LIMITS, startup_seconds=None):
    graded = Graded(tmp_path, source, mode, limits, startup_seconds)
    graded.assert_clean()
    return graded


_shared = {}


def shared_grade(tmp_path_factory, key, source, mode):
    """grade(), once per (key, mode) for the tests that read the same grading."""
    if (key, mode) not in _shared:
        _shared[key, mode] = grade(tmp_path_factory.mktemp(key), source, mode)
    return _shared[key, mode]


READ_ONLY_PROBE = ("import os\nWRITABLE = os.access('.', os.W_OK) or os.access('attention.py', "
                   "os.W_OK)\nprint('WRITABLE', WRITABLE)\n")
# In bubblewrap every write of a student to its folder or /tmp meets the read-only bind or the
# bounded tmpfs, so one grading a mode carries them all: the probe first, then both swaps of its
# own file, the 1500-deep tree and the /tmp filler (each prints its own line, and each test below
# asserts on what it is about: nothing in the folder changes, /tmp has a size, full marks).
BWRAP_WRITES = ("replace_with_fifo", "replace_with_dev_zero", "deep_tree", "fill_tmp")


def bwrap_writes(tmp_path_factory, mode):
    assert mode not in PLAIN
    snippets = [READ_ONLY_PROBE] + [(ATTACKS / f"{name}.py").read_text(encoding="utf-8")
                                    for name in BWRAP_WRITES]
    return shared_grade(tmp_path_factory, "bwrap-writes", inject(at_import="\n".join(snippets)),
                        mode)


# A plain worker may write its folder: there the 1500-deep tree is made and the file swapped for a
# copy without the library call, in one grading a plain mode (the tree prints its DEPTH line and
# costs nothing; the swap costs the library check alone, which reads the judge's copy).  The
# swaps that block or flood are graded alone (test_replacing_its_own_file_...).
PLAIN_WRITES = ("deep_tree", "replace_with_clean_file")
SWAP_COSTS = {"module.no_library_attention"}  # the library call the swapped copy hides


def plain_writes(tmp_path_factory, mode):
    assert mode in PLAIN
    snippets = [(ATTACKS / f"{name}.py").read_text(encoding="utf-8") for name in PLAIN_WRITES]
    return shared_grade(tmp_path_factory, "plain-writes", inject(at_import="\n".join(snippets)),
                        mode)


# -- the submission's own files -------------------------------------------------------------------
# A cold plain worker that swaps its file for a link to /dev/zero meets what the FIFO meets there
# (the judge's own copy; its restarts bounded by the one budget, test_import_time_and_restarts_...)
# and the judge's reader refuses such a link (test_the_judge_refuses_what_is_not_a_regular_file):
# it is graded forked (the zygote's copy of the file) and, in bubblewrap, with the other writes.
REPLACE_CASES = [(name, mode) for name in ("replace_with_fifo", "replace_with_dev_zero")
                 for mode in MODES if (name, mode) != ("replace_with_dev_zero", "process")]


@pytest.mark.parametrize("name,mode", REPLACE_CASES)
def test_replacing_its_own_file_cannot_block_or_flood_the_judge(tmp_path, tmp_path_factory,
                                                                 mode, name):
    if mode not in PLAIN:  # the read-only bind refuses the swap: full marks, the folder unchanged
        g = bwrap_writes(tmp_path_factory, mode)
        assert "WRITABLE False" in g.output, g.output
        assert g.data["score"] == MAX, g.output
        return
    # A plain subprocess as root blocks its own worker (below): its calls, and its restart's
    # import, wait out their limits, so there they are short (the generous ones, 10 s a call and
    # the kit's 60 s a start, are for honest code to pass in time on a busy machine).
    blocked = ROOT
    limits = Limits(call_seconds=2.0, submission_seconds=120.0) if blocked else LIMITS
    g = grade(tmp_path, attack(name), mode, limits, startup_seconds=30.0 if blocked else None)
    # It ends: the judge read its own copy, once.
    if blocked:
        # A plain subprocess as root can replace its file: it then blocks its own worker (a
        # traceback reads the file) and its restarts; that costs only its own points.
        assert g.data["metadata"]["worker_starts"] <= 3
    else:
        assert g.data["score"] == MAX, g.output


# Cold bubblewrap's read-only folder refuses the swap before the judge's copy matters
# (test_the_work_folder_is_read_only_to_the_worker_in_bubblewrap); the forked one, cheap, stays.
@pytest.mark.parametrize("mode", [m for m in MODES if m not in COLD_BWRAP])
def test_the_static_check_reads_the_judges_copy_not_the_swapped_file(tmp_path, tmp_path_factory,
                                                                     mode):
    g = plain_writes(tmp_path_factory, mode) if mode in PLAIN \
        else grade(tmp_path, attack("replace_with_clean_file"), mode)
    assert g.statuses["module.no_library_attention"] == "failed"
    assert g.keys["module.no_library_attention"] == ["forbidden"]
    g.assert_honest_parts_pass()


@pytest.mark.parametrize("mode", MODES)
def test_a_1500_deep_tree_is_cleaned_up(tmp_path_factory, mode):
    # grade(): the scratch folder is empty after
    if mode in PLAIN:  # full marks but for the check the swap beside it costs
        g = plain_writes(tmp_path_factory, mode)
        assert {c for c, status in g.statuses.items() if status != "passed"} == SWAP_COSTS
        assert g.data["score"] == MAX - sum(c.points for c in RUBRIC.checks if c.id in SWAP_COSTS)
    else:
        g = bwrap_writes(tmp_path_factory, mode)
        assert g.data["score"] == MAX
    made = re.search(r"DEPTH (\d+)", g.output).group(1)
    # Only where the worker may write its folder (a plain subprocess as its own user or root).
    assert made == "0" or mode in PLAIN, made


def test_the_work_folder_is_read_only_to_the_worker_in_bubblewrap(tmp_path_factory):
    if not COLD_BWRAP:
        pytest.skip("no bubblewrap here")
    for mode in ["bubblewrap"] + FORK_BWRAP:
        g = bwrap_writes(tmp_path_factory, mode)
        assert "WRITABLE False" in g.output, (mode, g.output)


def test_cleanup_never_raises_nor_follows_links(tmp_path):
    from grader import safefs

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    top = tmp_path / "tree"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.symlink(outside, "link", dir_fd=fd)
    os.mkfifo("fifo", dir_fd=fd)
    os.close(fd)
    assert safefs.remove_tree(str(top)) is True
    assert not top.exists() and (outside / "keep").read_text() == "x"
    assert safefs.remove_tree(str(top)) is True  # already gone: still no exception


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder"])
def test_the_judge_refuses_what_is_not_a_regular_file(tmp_path, kind):
    path = tmp_path / "attention.py"
    {"fifo": lambda: os.mkfifo(path), "dev_zero": lambda: os.symlink("/dev/zero", path),
     "folder": lambda: path.mkdir()}[kind]()
    with pytest.raises(submission.SubmissionError):
        submission.load_file(str(path), str(path))
    zipped = tmp_path / "x.zip"
    os.mkfifo(zipped)
    with pytest.raises(submission.SubmissionError, match="not a regular file|not a readable"):
        submission.load(str(zipped))


# -- limits that cannot be stepped around --------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_tmp_has_a_size(tmp_path_factory, mode):
    if mode in PLAIN:
        pytest.skip("fallback cannot defend: a plain subprocess writes to the machine's /tmp "
                    "(RLIMIT_FSIZE bounds one file, not the folder)")
    g = bwrap_writes(tmp_path_factory, mode)
    wrote = int(re.search(r"TMP_WROTE (\d+)", g.output).group(1))
    assert wrote <= LIMITS.tmp_bytes, wrote
    assert g.data["score"] == MAX


def key_users():
    """{uid: keys} of every uid that holds kernel keys (/proc/key-users)."""
    with open("/proc/key-users") as handle:
        return {int(line.split(":")[0]): int(line.split()[1]) for line in handle}


@pytest.mark.parametrize("mode", WORKER_SIDE)
def test_kernel_state_that_would_outlive_the_worker_is_refused(tmp_path, mode):
    """System V memory and queues, memfds, kernel keys: the syscall filter refuses them in every mode
    (grader/sandbox/runtime/syscalls.py); grade() also asserts no segment is left.  The worker's
    audit hook and filter are the same code in both cold modes: one cold mode, both forked ones."""
    keys_before = key_users()
    g = grade(tmp_path, attack("shm_leftover"), mode)
    made = re.search(r"SHM_ID (-?\d+) MSG_ID (-?\d+) KEYS (-?\d+) (-?\d+) (-?\d+) MEMFD (-?\d+)",
                     g.output)
    assert made and set(made.groups()) == {"-1"}, g.output[-500:]
    pool = range(uidpool.FIRST_UID, uidpool.FIRST_UID + uidpool.SLOTS)
    more = {uid: n for uid, n in key_users().items() if uid in pool and n > keys_before.get(uid, 0)}
    assert more == {}, "a worker's uid holds kernel keys after it"
    # ctypes in the source is reaching into the process for the judge-side scan, which costs the
    # checks it guards; every other check is the reference's.
    scanned = {"module.no_library_attention", "module.param_count", "module.mask_buffer"}
    assert all(c["status"] == "passed" for c in g.data["checks"] if c["id"] not in scanned)


def test_the_syscall_filter_refuses_kernel_state_on_its_own():
    """The filter alone, without the worker's audit hook (which refuses ctypes before it): the
    same calls as shm_leftover's, in a process that installed only the filter."""
    from grader.sandbox.runtime import syscalls

    if syscalls.program() is None:
        pytest.skip("no syscall filter for this machine")
    script = ("import sys; sys.path.insert(0, 'grader/sandbox/runtime'); import syscalls; "
              "syscalls.install(unix_sockets=False); import ctypes, os; "
              "libc = ctypes.CDLL(None, use_errno=True); "
              "print(libc.shmget(0, 1 << 20, 0o1000 | 0o666), libc.msgget(0, 0o1000 | 0o666), "
              "libc.syscall(248 if os.uname().machine == 'x86_64' else 217, b'user', b'k', "
              "b'secret', ctypes.c_size_t(6), ctypes.c_long(-4)))")
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, timeout=60)
    assert done.stdout.split() == ["-1", "-1", "-1"], done.stderr


def test_the_syscall_filter_is_well_formed():
    from grader.sandbox.runtime import syscalls

    for machine in ("x86_64", "aarch64"):
        raw = syscalls.program(machine)
        # load arch, check it, load nr, [x32 check], one jump per call, allow, deny: 8 bytes each
        assert len(raw) == 8 * (len(syscalls.DENIED) + 5 + (machine == "x86_64"))
        # with unix sockets let through: socket leaves the list, 3 ops ask its domain
        raw = syscalls.program(machine, unix_sockets=True)
        assert len(raw) == 8 * (len(syscalls.DENIED) - 1 + 3 + 5 + (machine == "x86_64"))
    assert syscalls.program("sparc") is None
    assert {"add_key", "keyctl", "shmget", "msgget", "mq_open", "ptrace", "memfd_create",
            "socket", "socketpair"} <= set(syscalls.DENIED)


SOCKETS = """
import os, socket, sys
sys.path.insert(0, sys.argv[1])
import syscalls
assert syscalls.install(unix_sockets=sys.argv[2] == "unix") is None
made = []
for family, kind in ((socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_STREAM),
                     (socket.AF_INET6, socket.SOCK_DGRAM), (socket.AF_NETLINK, socket.SOCK_RAW)):
    try:
        socket.socket(family, kind).close()
        made.append(family.name)
    except OSError:
        pass
for call in (socket.socketpair, lambda: os.memfd_create("m")):
    try:
        call()
        made.append("other")
    except OSError:
        pass
print(" ".join(made))
"""


@pytest.mark.parametrize("unix,made", [("none", []), ("unix", ["AF_UNIX"])])
def test_a_gpu_machines_filter_lets_unix_sockets_alone_through(unix, made):
    """Where the machine has a GPU the worker's filter lets socket(AF_UNIX) through (CUDA's driver
    opens one as it starts); every other domain, socketpair and memfd_create stay refused."""
    import subprocess
    import sys

    from grader.sandbox.runtime import syscalls

    if syscalls.program() is None:
        pytest.skip("no seccomp filter for this machine's architecture")
    runtime = str(Path(__file__).resolve().parent.parent / "grader" / "sandbox" / "runtime")
    proc = subprocess.run([sys.executable, "-I", "-c", SOCKETS, runtime, unix],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == made


MEET = """
import socket, time
TOKEN = {token!r}
def _tcp_listen():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", {port}))
    s.listen()
    return s
def _unix_listen():
    s = socket.socket(socket.AF_UNIX)
    s.bind("\\0attn-meet-" + TOKEN)
    s.listen()
    return s
def _try(make):
    try:
        return make(), "ok"
    except OSError as exc:
        return None, type(exc).__name__
def _tcp_connect():
    return socket.create_connection(("127.0.0.1", {port}), timeout=2)
def _unix_connect():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect("\\0attn-meet-" + TOKEN)
    return s
if {listen}:
    _held = [_try(_tcp_listen), _try(_unix_listen)]
    MET = {{"tcp": _held[0][1], "unix": _held[1][1]}}
else:
    MET = {{"tcp": _try(_tcp_connect)[1], "unix": _try(_unix_connect)[1]}}
"""


def _meeting_student(tmp_path, name, mode, listen, token, port):
    from grader.judge.student import Student

    folder = tmp_path / name
    folder.mkdir()
    (folder / "attention.py").write_text(MEET.format(token=token, port=port, listen=listen))
    server = zygotes.server(mode[len("fork-"):]) if mode.startswith("fork-") else None
    return Student(str(folder), limits=LIMITS, isolation=server.isolation if server else mode,
                   workers=forked(server) if server else None).start()


def _may_unshare_network():
    """Whether a plain worker gets a network namespace here (root with CAP_SYS_ADMIN)."""
    import ctypes

    unshare = ctypes.CDLL(None).unshare  # resolved before the fork: a child only calls it
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest, whatever happens
        try:
            os._exit(0 if unshare(CLONE_NEWNET) == 0 else 1)
        finally:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


@pytest.mark.parametrize("mode", WORKER_SIDE)
def test_two_workers_alive_at_once_cannot_meet(tmp_path, mode):
    """One worker listens on a loopback TCP port and an abstract unix socket; another, started
    while the first is alive, tries both: no worker may make a socket (syscalls.py) and each has
    its own network namespace.  The filter, the first wall, is the worker's own code, the same in
    both cold modes: one cold mode (two cold workers), and both forked ones (a plain zygote's
    children and bubblewrap's, each in namespaces of its own)."""
    from grader.sandbox.runtime import syscalls

    if mode in PLAIN and not (_may_unshare_network() or syscalls.program()):
        pytest.skip("fallback cannot defend: no syscall filter for this machine, and as an "
                    "ordinary user a plain subprocess shares the grader's network namespace")
    import secrets

    token, port = secrets.token_hex(8), 20000 + secrets.randbelow(20000)
    host = _meeting_student(tmp_path, "host", mode, True, token, port)
    guest = None
    try:
        hosted = host.constants(["MET"])["MET"]  # the host's sockets are bound and listening now
        guest = _meeting_student(tmp_path, "guest", mode, False, token, port)
        met = guest.constants(["MET"])["MET"]
        assert host.worker.proc.poll() is None, "the host must still be alive"
    finally:
        host.close()
        if guest is not None:
            guest.close()
    # Two walls: the syscall filter refuses new sockets, and were it off, each worker's network
    # namespace is its own (without both, the two met over TCP and the abstract socket).
    assert met["tcp"] != "ok" and met["unix"] != "ok", (hosted, met)


@pytest.mark.parametrize("mode", MODES)
def test_a_fork_flood_cannot_starve_another_students_worker(tmp_path, mode):
    if mode in PLAIN:
        pytest.skip("fallback cannot defend: plain workers share one uid (and as root "
                    "RLIMIT_NPROC does not bind at all)")
    if not ROOT:
        pytest.skip("a uid per worker needs root; as an ordinary user workers share its limit")
    limits = Limits(call_seconds=10.0, submission_seconds=120.0)
    flood_dir, honest_dir = tmp_path / "flood", tmp_path / "honest"
    for folder, source in ((flood_dir, attack("fork_flood")), (honest_dir, REFERENCE)):
        folder.mkdir()
        (folder / "attention.py").write_text(source, encoding="utf-8")
    server = zygotes.server(mode[len("fork-"):]) if mode.startswith("fork-") else None
    workers = forked(server) if server else None
    sub, flood = grading.start(str(flood_dir), "bubblewrap", limits, workers)
    try:
        assert flood.constants(["FORKED"])["FORKED"] > 0  # its children hold its limit now
        honest = service.grade(str(honest_dir), isolation="bubblewrap", limits=limits) \
            if not server else grading.finish(*grading.start(str(honest_dir), "bubblewrap",
                                                             limits, workers))
        assert honest["score"] == MAX, [c["id"] for c in honest["checks"] if c["status"] != "passed"]
    finally:
        flood.close()
        sub.cleanup()
    # the uids this process's gradings claimed: another test worker's grading left to init is
    # not this flood's
    assert eventually(lambda: pool_processes(CLAIMED) == []), "the flood outlived its worker"


def test_uid_slots_are_distinct_and_freed():
    a, b = uidpool.claim(), uidpool.claim()
    assert a.uid != b.uid
    a.release()
    b.release()


# The budget is the judge's clock, the same whatever the sandbox: one cold mode and the forked ones
# (a forked restart is a fork of the zygote, not a cold start).
@pytest.mark.parametrize("mode", WORKER_SIDE)
def test_import_time_and_restarts_count_against_one_budget(tmp_path, mode):
    source = inject(at_import="import time\ntime.sleep(3)",
                    in_attend=(ATTACKS / "sleep_then_crash.py").read_text())
    limits = Limits(call_seconds=2.5, submission_seconds=10.0)
    g = grade(tmp_path, source, mode, limits)
    # Each start costs at least 3 s of the 10 s budget: a handful of starts, not 30 (MAX_STARTS).
    assert g.data["metadata"]["worker_starts"] <= 6, g.data["metadata"]["worker_starts"]
    budget = [c for c, keys in g.keys.items() if "budget" in keys]
    assert budget, "the budget ran out and said so"
    assert all(g.statuses[c] != "passed" for c in budget)
