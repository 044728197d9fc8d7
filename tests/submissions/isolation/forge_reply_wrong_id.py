# where: attend
# Write a reply for a request the judge has not made yet on the channel found without frames
# (the process's one socket), signed with a key of our own: not the worker's, so refused.
import os, stat, sys
_channel = next(fd for fd in range(3, 256) if os.path.exists(f"/proc/self/fd/{fd}")
                and stat.S_ISSOCK(os.fstat(fd).st_mode))
_wire = sys.modules["wire"]
_data = _wire.encode({"id": 7, "ok": [0.0] * 16}, os.urandom(32))
_view = memoryview(_data)
while _view:
    _view = _view[os.write(_channel, _view):]
