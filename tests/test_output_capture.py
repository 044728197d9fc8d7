"""What a worker prints is kept (launch.CappedReader): all of it up to the cap, whether the pipe
ends or the judge stops reading once the worker is killed (finish(): a sandboxed worker's end of
the pipe closes only after the kernel has torn its memory down, which the judge does not wait
for)."""
import os
import threading

from grader.sandbox.launch import CappedReader


def reader_on_a_pipe(cap=1 << 20):
    read_end, write_end = os.pipe()
    reader = CappedReader(os.fdopen(read_end, "rb"), cap)
    reader.start()
    return reader, write_end


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def test_finish_keeps_all_that_was_written_before_it():
    """The writer's end stays open (a worker still being torn down): finish() returns with every
    byte written before it, even those written just before."""
    for size in (0, 1, 4096, 65536 + 7, 300_000):
        reader, write_end = reader_on_a_pipe()
        data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        write_all(write_end, data)  # the last bytes land just before finish()
        reader.finish()
        try:
            assert not reader.is_alive()
            assert bytes(reader.kept) == data
        finally:
            os.close(write_end)


def test_finish_while_a_writer_is_still_writing_keeps_a_prefix():
    """Bytes written after finish() began may be lost (the worker is being killed then), but what
    is kept is what was written, in order."""
    reader, write_end = reader_on_a_pipe()
    os.set_blocking(write_end, False)  # once nobody reads, the writer stops instead of blocking
    stop = threading.Event()

    def keep_writing():
        n = 0
        while not stop.is_set():
            try:
                os.write(write_end, b"%08d\n" % n)  # 9 bytes: a pipe write of them is atomic
            except (BlockingIOError, BrokenPipeError):  # full, or closed by the finished reader
                return
            n += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        reader.finish()
        assert not reader.is_alive()
    finally:
        stop.set()
        writer.join()
        os.close(write_end)
    lines = bytes(reader.kept).split(b"\n")[:-1]
    assert lines == [b"%08d" % n for n in range(len(lines))]


def test_the_end_of_the_pipe_ends_the_reader():
    reader, write_end = reader_on_a_pipe()
    write_all(write_end, b"printed at import\n")
    os.close(write_end)
    reader.join(5)
    assert not reader.is_alive() and reader.text() == "printed at import\n"
    reader.finish()  # after the end: nothing to do, no error


def test_only_the_cap_is_kept_and_the_rest_is_counted():
    reader, write_end = reader_on_a_pipe(cap=1000)
    write_all(write_end, b"a" * 5000)
    os.close(write_end)
    reader.join(5)
    assert bytes(reader.kept) == b"a" * 1000 and reader.dropped == 4000
    assert reader.text().endswith("[4000 more bytes dropped]")
