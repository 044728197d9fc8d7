"""The worker: runs inside the sandbox, imports the student's module and serves calls.

It imports nothing from the judge side (no checks, no reference, no variants): only `wire`,
`syscalls` and `copytask`, which are copied beside it into a private folder.  It never decides a verdict; it
only returns what the student's code computed.  Everything it sends is untrusted by the judge.

Usage: python -I worker.py CHANNEL_FD STUDENT_FILE [--wait-go]

With --wait-go (watch mode's spare workers) it imports torch, then waits for one frame (any
content: the "go") before importing STUDENT_FILE, which need not exist until then.
"""
import os
import sys
import threading
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import syscalls  # noqa: E402
import wire  # noqa: E402

CONTRACT = {}  # action -> a reader of contract.py or placement.py, filled by prepare()


class Channel:
    def __init__(self, fd):
        self.fd = fd

    def read_exact(self, n):
        parts, left = [], n
        while left:
            chunk = os.read(self.fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def send(self, obj):
        data = wire.encode(obj)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def receive(self):
        return wire.decode(*wire.read_frame(self.read_exact))


def describe_exception(exc, student_file):
    """Type, message and the student's own line: never a traceback through the worker."""
    line, code = None, None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == student_file:
            line, code = frame.lineno, frame.line
    if isinstance(exc, SyntaxError) and exc.filename and os.path.abspath(exc.filename) == student_file:
        line, code = exc.lineno, (exc.text or "").rstrip()
    return {
        "type": type(exc).__name__,
        "mro": [cls.__name__ for cls in type(exc).__mro__],
        "message": str(exc)[:500],
        "line": line,
        "code": (code or "")[:200],
    }


def import_student(student_file):
    import importlib.util

    spec = importlib.util.spec_from_file_location("attention", student_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention"] = module
    spec.loader.exec_module(module)
    return module


class Server:
    def __init__(self, module, student_file, torch):
        self.module, self.student_file, self.torch = module, student_file, torch
        self.handles = {}

    def handle(self, request):
        op = request.get("op")
        method = getattr(self, "op_" + str(op), None)
        if method is None:
            raise ValueError(f"unknown op {op!r}")
        return method(**request.get("args", {}))

    def op_call(self, fn, args=(), kwargs=None, views=()):
        args = list(args)
        # A tensor crosses the wire contiguous; `views` re-creates a strided view the judge asks for.
        for index, *spec in views:  # [index, dim0, dim1] transposes, [index, [dims]] permutes
            args[index] = (args[index].permute(*spec[0]) if isinstance(spec[0], list)
                           else args[index].transpose(*spec))
        return getattr(self.module, fn)(*args, **(kwargs or {}))

    def op_devices(self):
        import placement

        return placement.devices()

    def op_call_on(self, fn, device, dtype=None, args=(), kwargs=None):
        """The student's function on the judge's arguments moved to another device or dtype."""
        import placement

        return placement.call_on(self.module, fn, device, dtype, list(args), kwargs)

    def op_constants(self, names):
        missing = object()
        values = {}
        for name in names:
            value = getattr(self.module, name, missing)
            values[name] = {"$missing": True} if value is missing else value
        return values

    def op_new(self, args=(), kwargs=None):
        instance = self.module.CausalSelfAttention(*args, **(kwargs or {}))
        handle = len(self.handles) + 1
        self.handles[handle] = instance
        return handle

    def op_load(self, handle, state):
        module = self.handles[handle]
        with self.torch.no_grad():
            for name, value in state.items():
                module.get_parameter(name).copy_(value)
        return True

    def op_forward(self, handle, x, return_weights=False):
        module = self.handles[handle]
        with self.torch.no_grad():
            if return_weights:
                return module(x, return_weights=True)
            return module(x)

    def op_train_copy(self, seed, n_heads):
        import copytask

        model, losses = copytask.train(self.module.CausalSelfAttention, seed=seed, n_heads=n_heads)
        return {"losses": losses, "state": {n: p.detach() for n, p in model.named_parameters()}}

    def op_contract(self, handle, action, **args):
        """The block through the contract's attribute names (contract.py), never its own word."""
        return CONTRACT[action](self.handles[handle], **args)


def prepare():
    """What every worker does before it sees a student: torch on one thread, seeded, its fused
    attention disabled (contract.py), so a route through it breaks instead of passing, and meta's
    kernels loaded (placement.warm_meta): loaded later, they would need what the student's code
    may have spent (a /tmp it filled: torch._dynamo's cache dir is looked for there).

    The fork server (zygote.py) runs this once and forks; a cold worker runs it itself.
    """
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    import contract

    contract.disable_library_attention(torch)
    import placement

    placement.warm_meta()
    # The contract's readers are kept here only, not under a name in sys.modules: a name the
    # student's code builds at run time finds no module to patch (the judge's scan flags the
    # routes that remain: frames, gc, __main__).
    CONTRACT.update(contract.ACTIONS)
    CONTRACT.update(placement.BLOCK_ACTIONS)
    del sys.modules["contract"]
    return torch


STUCK_REPORT_SECONDS = 0.5


def student_line(frame, student_file):
    """The innermost line of the student's own file on a thread's stack, or None."""
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename) == student_file:
            return frame.f_lineno
        frame = frame.f_back
    return None


def import_telling_where(channel, student_file):
    """Import the student's file; while the import runs, each second the judge is told the line
    of the student's file it is at ({"stuck": line}), so a timeout can say where it was stuck
    (an endless loop at import would otherwise end with no line at all)."""
    done, main = threading.Event(), threading.get_ident()

    def tell():
        while not done.wait(STUCK_REPORT_SECONDS):
            line = student_line(sys._current_frames().get(main), student_file)
            if line is None:
                continue
            try:
                channel.send({"stuck": line})
            except Exception:  # the judge has given up and closed the channel: nothing to tell
                return

    teller = threading.Thread(target=tell, daemon=True)
    teller.start()
    try:
        return import_student(student_file)
    finally:
        done.set()
        teller.join()  # no frame of its own may interleave with the hello


def serve(channel, student_file, torch):
    """Import the student's file, greet the judge, answer requests until the channel closes."""
    try:
        module = import_telling_where(channel, student_file)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt at import are the student's too
        channel.send({"hello": False, "error": describe_exception(exc, student_file)})
        return
    channel.send({"hello": True, "names": sorted(n for n in vars(module) if not n.startswith("__"))})
    server = Server(module, student_file, torch)
    while True:
        try:
            request = channel.receive()
        except EOFError:
            return
        try:
            reply = {"id": request.get("id"), "ok": server.handle(request)}
        except BaseException as exc:
            reply = {"id": request.get("id"), "error": describe_exception(exc, student_file)}
        try:
            channel.send(reply)
        except wire.ProtocolError as exc:
            channel.send({"id": request.get("id"), "error": describe_exception(exc, student_file)})


def main():
    channel_fd, student_file = int(sys.argv[1]), os.path.abspath(sys.argv[2])
    syscalls.install()  # before torch starts a thread: every later thread inherits the filter
    channel = Channel(channel_fd)
    spare = sys.argv[3:] == ["--wait-go"]
    torch = prepare()
    if spare:
        try:
            channel.receive()  # the go: the student's file is in place now
        except EOFError:
            return  # a spare that was never used
    else:
        channel.send({"prepared": True})  # the judge starts the student's clock here
    serve(channel, student_file, torch)


if __name__ == "__main__":
    main()
