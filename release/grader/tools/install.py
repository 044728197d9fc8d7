"""The student bundle's set-up: `.venv` with what requirements.txt pins.  Standard library only:
it runs under the student's Python, before the venv exists.

    python -m grader.tools.install VENV REQUIREMENTS [--lang zh|en] [pip arguments...]

Where this Python imports the pinned torch (a student has one from the earlier lessons), the venv
reads it through a .pth file and pip installs only what is missing; otherwise everything is
installed, after a line that says what and how large.  Never a CUDA build unasked: on Linux,
with no pip arguments given, pip is also pointed at PyTorch's CPU wheels where they can be reached.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import venv

from grader import words

CPU_WHEELS = "https://download.pytorch.org/whl/cpu"

SAID = words.table("install")


def pinned_torch(requirements):
    """The torch version requirements.txt pins ("2.13.0"), or None."""
    with open(requirements, encoding="utf-8") as handle:
        found = re.search(r"^torch==([\w.]+)\s*$", handle.read(), re.M)
    return found and found.group(1)


def torch_here(pinned):
    """(version, the folder holding the torch package) where this Python imports the pinned torch
    (a local label such as +cpu allowed), else None."""
    try:
        import torch
    except Exception:  # noqa: BLE001 (a broken torch is no torch to reuse)
        return None
    version = torch.__version__.split("+")[0]
    if version != pinned:
        return None
    return torch.__version__, os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))


def site_packages(folder):
    python = os.path.join(folder, "bin", "python")
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def planned(python, requirements, pip_args):
    """The names and versions pip would install, or None where it cannot say (an old pip)."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.json")
        done = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--quiet",
                               "--disable-pip-version-check", "--report", report, *pip_args,
                               "-r", requirements], capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(report):
            return None
        with open(report, encoding="utf-8") as handle:
            items = json.load(handle).get("install", [])
    return [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items]


def cpu_wheels(pip_args, found):
    """pip's arguments: PyTorch's CPU index added on Linux where torch is to be installed and the
    caller gave none, if the index answers within a few seconds (else pip's own indexes)."""
    if pip_args or found or not sys.platform.startswith("linux"):
        return pip_args
    try:
        urllib.request.urlopen(CPU_WHEELS + "/torch/", timeout=3).close()
    except OSError:
        return pip_args
    return ["--extra-index-url", CPU_WHEELS]


def main(argv):
    target, requirements, *rest = argv
    lang = "zh"
    if rest[:1] == ["--lang"]:
        lang, rest = rest[1], rest[2:]
    said = SAID["en" if lang == "en" else "zh"]
    found = torch_here(pinned_torch(requirements))
    pip_args = cpu_wheels(rest, found)
    if found:
        print(said["reuse"].format(version=found[0], where=found[1]), file=sys.stderr)
    # The folder lent for torch usually holds pip too, which the venv then runs through the same
    # .pth: ensurepip would take about half of the set-up.
    lent_pip = bool(found) and os.path.isdir(os.path.join(found[1], "pip"))
    venv.create(target, with_pip=not lent_pip, clear=True)
    if found:
        with open(os.path.join(site_packages(target), "student-torch.pth"), "w",
                  encoding="utf-8") as handle:
            handle.write(found[1] + "\n")
    python = os.path.join(target, "bin", "python")
    names = planned(python, requirements, pip_args)
    if names == []:
        print(said["nothing"], file=sys.stderr)
        return 0
    if names:
        print(said["plan"].format(count=len(names), names=", ".join(names)), file=sys.stderr)
    if names is None or any(n.lower().startswith("torch==") for n in names):
        print(said["torch_size"], file=sys.stderr)
    # Exactly what the dry run resolved (nothing already there is listed again), else the file.
    wanted = ["--no-deps", *names] if names else ["-r", requirements]
    code = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check",
                           "--progress-bar", "on", *pip_args, *wanted],
                          stdout=sys.stderr).returncode
    if code != 0:
        print(said["failed"].format(code=code), file=sys.stderr)
        return 3
    print(said["done"].format(venv=target), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
