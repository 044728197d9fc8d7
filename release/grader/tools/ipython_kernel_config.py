"""IPython's configuration for the kit's kernels: `make setup` (`make notebook-setup` in the
student bundle) copies this file into the venv's etc/ipython/, which IPython reads as each
kernel of that venv starts.

A kernel started beside the kit (the exercise's notebook in JupyterLab, whose kernel runs in
the notebook's folder, next to grader/) starts the kit's judge here, while IPython is still
starting, instead of at the notebook's first cell (`%load_ext grader.notebook`).  The kernel's
own start (~0.5 s) keeps one core busy; the judge's and its fork server's torch imports now use
the other meanwhile, and the first `%check` waits on them less (`make bench`, the notebook).
The first cell finds this judge running: notebook.kernel_judge() is one per kernel.

Nothing happens anywhere else: in a folder without the kit's grader/, where another `grader`
was imported already, or when the file is imported as a module rather than read by IPython.
What fails here is said on stderr (the kernel's log) and the kernel starts as it would have:
the first cell then starts the judge as before.
"""


def _start_the_kits_judge():
    import os
    import sys

    here = os.getcwd()
    if not os.path.isfile(os.path.join(here, "grader", "tools", "kernel_judge.py")):
        return
    # ipykernel keeps the kernel's folder off sys.path until its shell is set up (then the
    # notebook's `import grader` finds this same folder first): put it back for this import only.
    sys.path.insert(0, here)
    try:
        from grader.tools import notebook

        if os.path.dirname(os.path.dirname(os.path.abspath(notebook.__file__))) == \
                os.path.join(here, "grader"):  # not a `grader` imported from elsewhere before
            notebook.kernel_judge().start()
    except Exception as exc:  # never the reason a kernel does not start
        print(f"the exercise kit's judge did not start with the kernel ({type(exc).__name__}: "
              f"{exc}); the notebook's first cell starts it", file=sys.stderr)
    finally:
        if sys.path[:1] == [here]:
            del sys.path[0]


# IPython runs its config files with get_config() in their namespace; an import has none.
if "get_config" in globals():
    _start_the_kits_judge()
