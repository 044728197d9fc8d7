"""Leave a command without the interpreter's teardown of torch (about 0.5 s here, and it changes
nothing): by then everything is written and every worker is gone."""
import os
import sys


def exit_now(code):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
