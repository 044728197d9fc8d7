# where: attend
# Write a reply of our own on the worker's channel: 64 references to one 32 MiB span.  The
# channel is found without frames (its descriptor is the process's one socket); the reply cannot
# carry the worker's signature (wire.py), so the judge refuses it whatever its id.
import json, os, stat, sys
_channel = next(fd for fd in range(3, 256) if os.path.exists(f"/proc/self/fd/{fd}")
                and stat.S_ISSOCK(os.fstat(fd).st_mode))
_n = 8 * 1024 * 1024
_span = {"$tensor": [0, 4 * _n], "dtype": "float32", "shape": [_n]}
_header = json.dumps({"id": 1, "ok": [_span] * 64}).encode()
_payload = bytes(4 * _n)
_wire = sys.modules["wire"]
_data = _wire.PREFIX.pack(_wire.MAGIC, len(_header), len(_payload)) + _header + _payload
_view = memoryview(_data)
while _view:
    _view = _view[os.write(_channel, _view):]
