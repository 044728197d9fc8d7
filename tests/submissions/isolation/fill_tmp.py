# where: import
# Write to /tmp until it is full (up to 512 MiB): a RAM-backed /tmp must have a size.
import os
_wrote = 0
try:
    with open("/tmp/fill", "wb") as _handle:
        for _ in range(512):
            _handle.write(b"\0" * (1 << 20))
            _handle.flush()
            _wrote += 1 << 20
except OSError:
    pass
print("TMP_WROTE", _wrote)
