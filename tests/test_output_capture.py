"""What a worker prints is kept (launch.CappedReader): all of it up to the cap, the rest counted."""
import os

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


def test_the_end_of_the_pipe_ends_the_reader():
    reader, write_end = reader_on_a_pipe()
    write_all(write_end, b"printed at import\n")
    os.close(write_end)
    reader.join(5)
    assert not reader.is_alive() and reader.text() == "printed at import\n"


def test_only_the_cap_is_kept_and_the_rest_is_counted():
    reader, write_end = reader_on_a_pipe(cap=1000)
    write_all(write_end, b"a" * 5000)
    os.close(write_end)
    reader.join(5)
    assert bytes(reader.kept) == b"a" * 1000 and reader.dropped == 4000
    assert reader.text().endswith("[4000 more bytes dropped]")
