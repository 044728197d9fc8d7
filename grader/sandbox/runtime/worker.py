"""The worker: runs inside the sandbox, imports the student's module and serves calls.

It imports only the runtime's own modules and only returns what the student's code computed; the
judge trusts nothing it sends.  What the verdict relies on (the readers, the table of blocks, the
channel's send and receive, a wire.py of the worker's own, os.readv and os.write) is bound before
the student's import and kept only in the serving loop's locals and closures; the other runtime
modules are out of `sys.modules` by then.  The student's code runs on a thread of its own behind
an audit hook (isolation.py), and every frame after the first is signed with a key drawn before
the import (wire.py), so nothing the student's code writes on the channel passes for the worker's.

Usage: python -I worker.py CHANNEL_FD STUDENT_FILE [--wait-go]
(--wait-go: a spare, which imports torch and waits for one frame before importing STUDENT_FILE.)
"""
import builtins
import contextlib
import functools
import gc
import importlib.util
import os
import sys
from linecache import getline

# Names are looked up in a copy of the builtins taken now: rebinding builtins.getattr changes
# what the student's own code sees, not the serving loop.
__builtins__ = dict(vars(builtins))

RUNTIME = os.path.dirname(os.path.abspath(__file__))
# Out of sys.modules before the student's import (`wire` stays: it is not the one the worker
# speaks through, private_wire).
RUNTIME_MODULES = ("syscalls", "contract", "placement", "copytask", "limits", "worker",
                   "isolation", "devicerule")
sys.path.insert(0, RUNTIME)

import limits  # noqa: E402
import syscalls  # noqa: E402
import wire  # noqa: E402

# What prepare() made, handed once to serve() (which empties it before the student's import).
_PREPARED = {}
STUCK_REPORT_SECONDS = 0.5


def endpoints(fd, speaking=wire, key=None, read_into=os.readv, write=os.write):
    """(send, receive) on the channel `fd` through `speaking` (wire), bound to the functions they
    use as they are now; what is sent is signed with `key` where given."""
    encode, decode, read_frame = speaking.encode, speaking.decode, speaking.FrameReader().read_frame

    def fill(view):
        return read_into(fd, [view[:1 << 20]])

    def send(obj):
        view = memoryview(encode(obj, key))
        while view:
            view = view[write(fd, view):]

    def receive():
        return decode(*read_frame(fill))

    return send, receive


def describe_exception(exc, student_file, judging=None):
    """Type, message and the student's own line, never a traceback through the worker.  The
    message is asked first (the student's class may answer it), then the traceback is walked
    inside `judging` (the worker's own read of frames)."""
    message = str(exc)[:500]
    # the worker's own refusal (contract.py) is named with its module: a student's class of that
    # name stays theirs
    mro = [("contract." if cls.__module__ == "contract" else "") + cls.__name__
           for cls in type(exc).__mro__]
    line, tb = None, exc.__traceback__
    with judging if judging is not None else contextlib.nullcontext():
        while tb is not None:  # the innermost frame of the student's file is the one named
            if os.path.abspath(tb.tb_frame.f_code.co_filename) == student_file:
                line = tb.tb_lineno
            tb = tb.tb_next
    code = getline(student_file, line).strip() if line is not None else None
    if isinstance(exc, SyntaxError) and exc.filename and os.path.abspath(exc.filename) == student_file:
        line, code = exc.lineno, (exc.text or "").rstrip()
    return {"type": type(exc).__name__, "mro": mro, "message": message, "line": line,
            "code": (code or "")[:200]}


def student_runs(kit, send, student_file, judging):
    """The kit with every way into the student's code bound to the student's thread
    (isolation.runner, started now), which tells the judge where it is (telling_where)."""
    run = functools.partial(kit["runner"](), tick=STUCK_REPORT_SECONDS,
                            on_wait=telling_where(send, student_file, judging))
    readers = dict(kit["readers"], grads=functools.partial(kit["readers"]["grads"], run=run),
                   forward_on=functools.partial(kit["readers"]["forward_on"], run=run,
                                                rule=kit["rule"]))
    call_on = functools.partial(kit["call_on"], run=run, rule=kit["rule"])
    return dict(kit, run=run, readers=readers, call_on=call_on)


MISSING = object()  # a constant the student's module does not define


def strided(args, views):
    """The arguments with the judge's strided views re-created (a tensor crosses contiguous): a
    view is [index, dim0, dim1] (transpose) or [index, [dims]] (permute)."""
    args = list(args)
    for index, *spec in views:
        args[index] = (args[index].permute(*spec[0]) if isinstance(spec[0], list)
                       else args[index].transpose(*spec))
    return args


def operations(module, torch, kit):
    """{op: function(**args)} the judge may ask for; the student's blocks live in this closure,
    and every call into the student's code goes through kit["run"]."""
    readers, train, call_on, run = kit["readers"], kit["train"], kit["call_on"], kit["run"]
    handles, no_grad = {}, torch.no_grad

    def student_attr(name):
        return run(getattr, (module, name))  # a module's __getattr__ is the student's code too

    def op_call(fn, args=(), kwargs=None, views=()):
        return run(student_attr(fn), strided(args, views), kwargs)

    def op_call_on(fn, device, dtype=None, args=(), kwargs=None):
        """The student's function on the judge's arguments moved to another device or dtype."""
        return call_on(student_attr(fn), device, dtype, list(args), kwargs)

    def op_constants(names):
        values = {name: run(getattr, (module, name, MISSING)) for name in names}
        return {name: {"$missing": True} if value is MISSING else value
                for name, value in values.items()}

    def op_new(args=(), kwargs=None):
        handles[len(handles) + 1] = run(student_attr("CausalSelfAttention"), args, kwargs)
        return len(handles)

    def op_load(handle, state):
        block = handles[handle]
        for name, value in state.items():
            parameter = run(block.get_parameter, (name,))
            with no_grad():
                parameter.copy_(value)
        return True

    def op_forward(handle, x, return_weights=False):
        kwargs = {"return_weights": True} if return_weights else {}
        return run(handles[handle], (x,), kwargs, contexts=(no_grad(),))

    def op_train_copy(seed, n_heads):
        # losses and state are claims: the judge evaluates the state again (copytask.py)
        model, losses = run(train, (student_attr("CausalSelfAttention"),),
                            {"seed": seed, "n_heads": n_heads})
        return {"losses": losses, "state": {n: p.detach() for n, p in model.named_parameters()}}

    def op_contract(handle, action, **args):  # through the contract's names, never its word
        return readers[action](handles[handle], **args)

    return {"call": op_call, "devices": kit["devices"], "call_on": op_call_on,
            "constants": op_constants, "new": op_new, "load": op_load, "forward": op_forward,
            "train_copy": op_train_copy, "contract": op_contract}


def prepare():
    """Before any student: torch on one thread, seeded, its fused attention disabled
    (contract.py), meta's kernels loaded (later they would need the /tmp a student may have
    filled); the readers kept for serve().  The collector is held while they import: every
    object they make lives on, so its passes over them would find nothing.  What is alive is
    then frozen for the collector, so a collection in a fork never writes (and so copies)
    torch's shared pages, and it collects again before any student code runs."""
    gc.disable()
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    import contract

    contract.disable_library_attention(torch)
    import copytask
    import devicerule
    import isolation
    import placement

    placement.warm_meta()
    readers = dict(contract.ACTIONS)
    readers.update(placement.BLOCK_ACTIONS)
    _PREPARED.update(readers=readers, devices=placement.devices, train=copytask.train,
                     call_on=placement.call_on, rule=devicerule.device_rule,
                     wire=private_wire(), runner=isolation.runner, guard=isolation.guard)
    del sys.modules["contract"]
    gc.freeze()
    gc.enable()
    return torch


def private_wire():
    """A wire.py of the worker's own, armed: not the `wire` of sys.modules, which a student's
    code may patch."""
    spec = importlib.util.spec_from_file_location("_worker_wire", os.path.join(RUNTIME, "wire.py"))
    private = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(private)
    private.arm()
    return private


def telling_where(send, student_file, judging, frames=sys._current_frames):
    """on_wait(ident) for isolation.runner: tells the judge the line of the student's file that
    thread is at ({"stuck": line}), so a timeout can say where.  Read inside `judging`."""
    def tell(ident):
        with judging:
            frame, line = frames().get(ident), None
            while frame is not None and line is None:  # the innermost line of the student's file
                if os.path.abspath(frame.f_code.co_filename) == student_file:
                    line = frame.f_lineno
                frame = frame.f_back
        if line is not None:
            try:
                send({"stuck": line})
            except Exception:  # the judge has given up and closed the channel: nothing to tell
                pass

    return tell


def _seal():
    """Before the student's import: the runtime's modules (but wire) and folder leave sys.modules
    and sys.path, and this module no longer names wire, syscalls or limits."""
    for name in RUNTIME_MODULES:
        sys.modules.pop(name, None)
    while RUNTIME in sys.path:
        sys.path.remove(RUNTIME)
    for name in ("wire", "syscalls", "limits"):
        globals().pop(name, None)


def serve(fd, student_file, torch):
    """Import the student's file (on its own thread, behind the audit hook armed just before),
    greet the judge, answer requests on the channel `fd` until it closes."""
    kit = dict(_PREPARED)
    _PREPARED.clear()
    if "readers" not in kit:
        raise RuntimeError("worker.prepare() must run before serve()")
    # The key that signs every frame from now on; it lives only in the closures of send.
    key = os.urandom(32)
    endpoints(fd, kit["wire"])[0]({"key": key.hex()})
    send, receive = endpoints(fd, kit["wire"], key)
    del key
    protocol_error = kit["wire"].ProtocolError
    ops_of, make_answer, describe = operations, answering, describe_exception
    spec = importlib.util.spec_from_file_location("attention", student_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention"] = module
    _seal()
    judging, refused = kit["guard"]()
    kit = student_runs(kit, send, student_file, judging)
    try:
        kit["run"](spec.loader.exec_module, (module,))
    except BaseException as exc:  # SystemExit and KeyboardInterrupt at import are the student's too
        send({"hello": False, "error": describe(exc, student_file, judging), "refused": refused()})
        return
    send({"hello": True, "names": sorted(n for n in vars(module) if not n.startswith("__")),
          "refused": refused()})
    ops = ops_of(module, torch, kit)
    ops["refused"] = refused
    answer = make_answer(ops, send, protocol_error, student_file, judging)
    del kit
    while True:
        try:
            request = receive()
        except EOFError:
            return
        answer(request)


def answering(ops, send, protocol_error, student_file, judging, describe=describe_exception):
    """answer(request): its call made through `ops`, answered with `send`; looks nothing up in
    this module."""
    def answer(request):
        request = request if isinstance(request, dict) else {}
        reply_id, failed = request.get("id"), None
        try:
            op, args = request.get("op"), request.get("args", {})
            if op not in ops:
                raise ValueError(f"unknown op {op!r}")
            reply = {"id": reply_id, "ok": ops[op](**args)}
        except BaseException as exc:
            reply = {"id": reply_id, "error": describe(exc, student_file, judging)}
            failed = exc
        try:
            send(reply)
        except protocol_error as exc:
            send({"id": reply_id, "error": describe(exc, student_file, judging)})
        if failed is not None:
            # its traceback holds the student's frames (a memory hog's list): dropped now
            failed.__traceback__ = None

    return answer


def main():
    channel_fd, student_file = int(sys.argv[1]), os.path.abspath(sys.argv[2])
    # before torch starts a thread: every later thread inherits the filter
    syscalls.install(unix_sockets=bool(limits.accelerator_nodes()))
    send, receive = endpoints(channel_fd)
    torch = prepare()
    if sys.argv[3:] == ["--wait-go"]:
        try:
            receive()  # the go: the student's file is in place now
        except EOFError:
            return  # a spare that was never used
    else:
        send({"prepared": True})  # the judge starts the student's clock here
    serve(channel_fd, student_file, torch)


if __name__ == "__main__":
    main()
