# where: import
# Fill the process limit and hold it for a minute, hoping other students' workers cannot start.
import os
import time
_children = []
for _ in range(2000):
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        time.sleep(60)
        os._exit(0)
    _children.append(_pid)
FORKED = len(_children)
print("FORKED", FORKED, "PGID", os.getpgid(0), "UID", os.getuid())
