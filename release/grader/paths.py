"""Where the kit lies on disk: every module that needs a path of the kit takes it from here, so
moving a module never changes what a path points to."""
import os

GRADER = os.path.dirname(os.path.abspath(__file__))
KIT_ROOT = os.path.dirname(GRADER)
SOLUTION = os.path.join(KIT_ROOT, "solutions", "attention.py")
RUNTIME = os.path.join(GRADER, "sandbox", "runtime")
CHECKS = os.path.join(GRADER, "judge", "checks")
