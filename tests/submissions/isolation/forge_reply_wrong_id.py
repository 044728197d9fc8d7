# where: attend
# Write a reply for a request the judge has not made yet, with a payload of tensors.
import json, sys, os
_frame = sys._getframe()
while _frame is not None and "channel" not in _frame.f_locals:
    _frame = _frame.f_back
_request, _channel = _frame.f_locals["request"], _frame.f_locals["channel"]
_n = 1024 * 1024
_span = {"$tensor": [0, 4 * _n], "dtype": "float32", "shape": [_n]}
_header = json.dumps({"id": (_request.get("id") or 0) + 7, "ok": [_span]}).encode()
_wire = sys.modules["wire"]
_data = _wire.PREFIX.pack(_wire.MAGIC, len(_header), 4 * _n) + _header + bytes(4 * _n)
_view = memoryview(_data)
while _view:
    _view = _view[os.write(_channel.fd, _view):]
