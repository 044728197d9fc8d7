"""docs/building.md's recipe for a new check and a new named mistake, followed in a copy of the kit
from the doc's own snippets: its edits, `make regen`, the tests it names; then the reference
keeps full marks with the new check and the wrong file is told the new mistake by name."""
import json
import os
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNIPPET = re.compile(r"^```\w+ recipe:(\S+)\n(.*?)^```", re.S | re.M)


def snippets():
    """[(target, text)] in the doc's order."""
    with open(os.path.join(ROOT, "docs", "building.md"), encoding="utf-8") as handle:
        return SNIPPET.findall(handle.read())


def kit_copy(folder):
    """The kit as a clone holds it (tracked and untracked-not-ignored files), .venv shared."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for rel in listed:
        source = os.path.join(ROOT, rel)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
            shutil.copy2(source, os.path.join(folder, rel))
    os.symlink(os.path.join(ROOT, ".venv"), os.path.join(folder, ".venv"))


def add_to_table(path, table, text):
    """`text` as the last entries of the dict literal `table = {...}` (its default stays first)."""
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    start = source.index(f"\n{table} = {{\n")
    end = source.index("\n}\n", start) + 1
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(source[:end] + text + source[end:])


def run(folder, *argv, timeout=900):
    done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_recipe_adds_a_check_and_a_named_mistake(tmp_path):
    kit = str(tmp_path / "kit")
    kit_copy(kit)
    variants = os.path.join(kit, "grader", "judge", "secret", "variants.py")
    wrong = os.path.join(kit, "tests", "submissions", "wrong", "context_transposed_weights.py")
    for target, text in snippets():
        if target in ("CONTEXTS", "ATTEND_VARIANTS"):
            add_to_table(variants, target, text)
        elif target == "header":
            with open(os.path.join(kit, "solutions", "attention.py"), encoding="utf-8") as handle:
                reference = handle.read()
            assert reference.count("context = weights @ v") == 1
            with open(wrong, "w", encoding="utf-8") as handle:
                handle.write(text + reference.replace("context = weights @ v",
                                                      "context = weights.transpose(-2, -1) @ v"))
        else:  # a check's file is named from the checks' folder
            path = os.path.join(kit, "grader", "judge", "checks", target) \
                if target.startswith(("public/", "hidden/")) else os.path.join(kit, target)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(("\n" if os.path.exists(path) else "") + text)
    run(kit, "make", "regen")
    python = os.path.join(kit, ".venv", "bin", "python")
    # test_kit's release and stub tests (the rest of it grades the reference, as below)
    run(kit, python, "-m", "pytest", "tests/test_rubric.py", "tests/test_variants.py",
        "tests/test_kit.py", "-q", "-p", "no:cacheprovider", "-k", "not test_kit or release or stub")
    run(kit, python, "-m", "pytest", "tests/test_corpus.py", "-q", "-p", "no:cacheprovider", "-k",
        "context_transposed_weights or proven or header or different_mistake")
    reference = json.loads(run(kit, python, "-m", "grader", "grade", "solutions/attention.py",
                               "--format", "json"))
    assert reference["score"] == reference["max_score"]
    assert "attend.five_d" in {c["id"] for c in reference["checks"]}
    graded = json.loads(run(kit, python, "-m", "grader", "grade", wrong, "--format", "json"))
    named = {c["id"]: c.get("misconception") for c in graded["checks"] if c["status"] != "passed"}
    assert named.get("attend.reference") == "context_transposed_weights", named
    assert named.get("attend.five_d") == "context_transposed_weights", named
