"""What every long-lived judge process does with its standard streams (the batch's judges,
batch/judge.py; the notebook kernel's judge, tools/kernel_judge.py): stdout is kept for its
replies, one JSON line each, and anything else printed from then on (torch's warnings, a library's
prints) lands in the log on stderr, never inside a reply."""
import json
import os
import sys


def reply_channel():
    """A line-buffered text stream on the process's original stdout, for replies only."""
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


def reply(replies, message, **dumps):
    """Write one reply line; False where the reader is gone (the batch or the kernel was killed:
    what was written to disk stays, the next run picks it up)."""
    try:
        replies.write(json.dumps(message, **dumps) + "\n")
        replies.flush()
    except (BrokenPipeError, OSError):
        return False
    return True
