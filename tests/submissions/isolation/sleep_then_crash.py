# where: attend
# Every call of attend kills the worker; every restart sleeps first in its import (see
# test_hostile.py, which adds a sleep at import): without one budget it holds a judge for minutes.
import os
os._exit(3)
