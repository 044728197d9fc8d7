# where: attend
# Write a reply of our own on the worker's channel: 64 references to one 32 MiB span.
import json, struct, sys
_frame = sys._getframe()
while _frame is not None and "channel" not in _frame.f_locals:
    _frame = _frame.f_back
_request, _channel = _frame.f_locals["request"], _frame.f_locals["channel"]
_n = 8 * 1024 * 1024
_span = {"$tensor": [0, 4 * _n], "dtype": "float32", "shape": [_n]}
_header = json.dumps({"id": _request.get("id"), "ok": [_span] * 64}).encode()
_payload = bytes(4 * _n)
_wire = sys.modules["wire"]
import os
_data = _wire.PREFIX.pack(_wire.MAGIC, len(_header), len(_payload)) + _header + _payload
_view = memoryview(_data)
while _view:
    _view = _view[os.write(_channel.fd, _view):]
