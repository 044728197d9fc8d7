"""The student bundle's set-up (grader/tools/install.py through the bundle's Makefile): a Python
that already imports the pinned torch lends it to the bundle's .venv, so `make check` installs no
second torch and gives its first feedback at once."""
import os
import subprocess
import sys
import time

import pytest

from grader.authoring import release
from grader.tools import install

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_python_with_the_pinned_torch_lends_it_and_make_check_runs(tmp_path):
    """Issue 72's first `make check`, in a fresh bundle: the stub's report, its checks run (a
    lent torch outside the venv is seen inside the sandbox: launch._python_roots), at most 12
    lines.  What makes it quick is asserted (no torch and no pip of the venv's own); its seconds
    are printed, never asserted (about 30 s on an idle 2-core machine; times are make bench's)."""
    bundle = release.build_release(str(tmp_path / "bundle"))
    began = time.monotonic()
    done = subprocess.run(["make", "check", f"PYTHON={sys.executable}"], cwd=bundle,
                          capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - began
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "不再下载 torch" in out, out[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) <= 12 and sum(line.startswith("✗ ") for line in lines) == 5, lines
    assert "未运行" not in done.stdout and "Traceback" not in done.stdout, done.stdout
    print(f"\nfresh bundle, make check with a lent torch: {seconds:.1f} s to the first report")
    # The bundle's venv holds no torch of its own: it reads the one this Python has.
    site = install.site_packages(os.path.join(bundle, ".venv"))
    assert not os.path.exists(os.path.join(site, "torch"))
    assert not os.path.exists(os.path.join(site, "pip"))  # the lender's pip, no ensurepip (10 s)
    assert open(os.path.join(site, "student-torch.pth"), encoding="utf-8").read().strip() == \
        os.path.dirname(os.path.dirname(__import__("torch").__file__))
    # The first feedback: the untouched stub's one line per exercise.
    assert "split_heads" in done.stdout and "torch" not in done.stdout.split("\n")[0]


def test_a_python_without_the_pinned_torch_lends_nothing(tmp_path, monkeypatch):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==0.0.1\nnumpy==2.4.6\n", encoding="utf-8")
    assert install.pinned_torch(str(requirements)) == "0.0.1"
    assert install.torch_here("0.0.1") is None
    assert install.torch_here(install.pinned_torch(os.path.join(ROOT, "requirements.txt")))


@pytest.mark.parametrize("given, found, expected", [
    (["--index-url", "x"], None, ["--index-url", "x"]),  # the caller's arguments win
    ([], ("2.13.0", "/somewhere"), []),  # torch lent: nothing to fetch from PyTorch's index
])
def test_pytorchs_cpu_index_only_where_torch_is_to_be_installed(given, found, expected):
    assert install.cpu_wheels(given, found) == expected


@pytest.mark.parametrize("folder, targets", [
    (ROOT, ["setup", "sandbox", "browser", "batch"]),
    (os.path.join(ROOT, "release"), ["setup", "notebook-setup"])], ids=["kit", "student bundle"])
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_makefiles_own_messages_follow_lang_arg(folder, targets, lang):
    """Every echo of a Makefile's own (the first set-up's line, bubblewrap, usage) says one
    language, LANG_ARG's (Chinese unless en): issue 72's English-only `setting up .venv`."""
    import re

    import words

    said = []
    for target in targets:  # -n -B: every command of the target printed, none run
        done = subprocess.run(["make", "-n", "-B", target, f"LANG_ARG={lang}"], cwd=folder,
                              capture_output=True, text=True, timeout=60)
        said += re.findall(r'echo "([^"]*)"', done.stdout)
    assert said  # the bundle's set-up speaks through install.py, in --lang: tested there
    for text in said:
        text = text.replace("chromium", "`chromium`")  # a program's name is code, as bwrap's
        text = re.sub(r"make [^，。；]*", lambda m: f"`{m.group(0)}`", text)  # a command: code
        assert not words.foreign(text, lang), (text, words.foreign(text, lang))
        assert lang == "en" or words.chinese_characters(text), text
