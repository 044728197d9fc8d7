# where: import
# 1500 nested folders in its own folder, if it can write there: shutil.rmtree recurses on them
# and raises RecursionError, which ignore_errors does not catch.
import os
_depth = 0
try:
    _fd = os.open(".", os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=_fd)
        _next = os.open("d", os.O_RDONLY, dir_fd=_fd)
        os.close(_fd)
        _fd = _next
        _depth += 1
    os.close(_fd)
except OSError:
    pass
print("DEPTH", _depth)
