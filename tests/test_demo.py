"""The lesson demo (`python -m exercises.demo`), run in a subprocess as a student would run it."""
import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "attention.py"
SHIPPED_STUB = ROOT / "exercises" / "attention.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SHORT_T = 8
LEAK = 1e-6  # exercises/demo.py's: a weight above it where the mask forbids reading is a leak
LESSON_WEIGHTS = [["0.002978", "0.997022", "0.000000"], ["0.999998", "0.000002", "0.000000"]]


def demo(*args, cwd=ROOT):
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "exercises.demo", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    return done, time.perf_counter() - start


def stubbed(tmp_path, names):
    """solutions/attention.py with the bodies of `names` (functions or Class.method) replaced by
    `raise NotImplementedError`, docstrings kept."""
    tree = ast.parse(SOLUTION.read_text(encoding="utf-8"))

    def visit(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.FunctionDef) and prefix + child.name in names:
                doc = child.body[:1] if ast.get_docstring(child) else []
                child.body = doc + [ast.parse("raise NotImplementedError").body[0]]

    visit(tree)
    path = tmp_path / "attention.py"
    path.write_text(ast.unparse(tree), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    done, seconds = demo("--reference", "--out", out)
    summary = json.loads((out / "summary.json").read_text())
    return done, seconds, summary, out


def test_reference_passes_and_reads_no_future(reference):
    done, seconds, summary, _ = reference
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"\nthe demo took {seconds:.1f} s (timed by make bench, not asserted here)")
    assert all(summary["checks"].values()), summary["checks"]
    assert summary["checks"]["causal"] and summary["leak_cells_drawn"] == 0
    assert summary["part2"]["future_share"] == [0.0] * 4
    assert "读到未来的权重（每行平均）" in done.stdout and "泄漏" in done.stdout


def test_a_leaking_mask_is_drawn_and_counted(tmp_path):
    """Masking with 0 instead of -inf: the future keeps weight.  The demo draws the student's
    real weights, marks every leaking cell and prints how much weight reads the future."""
    wrong = ROOT / "tests" / "submissions" / "wrong" / "mask_fill_zero.py"
    out = tmp_path / "out"
    done, _ = demo("--submission", wrong, "--out", out, "--lang", "en")
    assert done.returncode == 4, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["checks"]["causal"] is False
    # every head reads the future, one or more of them plainly (how much each head leaks is its
    # training's: a head can learn to give the unmasked future little weight)
    shares = summary["part2"]["future_share"]
    assert min(shares) > LEAK and max(shares) > 0.01, shares
    assert summary["leak_cells_drawn"] > 0
    assert "✗ the causal mask lets the future through" in done.stdout
    assert "Some results differ from the lesson" in done.stdout
    heatmap = done.stdout[done.stdout.index("head 0's attention"):]
    first_row = heatmap.splitlines()[3]
    assert first_row.strip().startswith("0 ") and first_row.count("!") == SHORT_T - 1, heatmap


def test_reference_missing_from_the_student_bundle_is_said_plainly(tmp_path):
    """The bundle has no solutions/: `make demo REFERENCE=1` says so instead of running
    something else."""
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(ROOT / "exercises", bundle / "exercises")
    shutil.copytree(ROOT / "grader", bundle / "grader")
    done = subprocess.run([sys.executable, "-m", "exercises.demo", "--reference", "--lang", "en"],
                          cwd=bundle, capture_output=True, text=True, timeout=300)
    assert done.returncode == 5 and "Traceback" not in done.stderr
    assert "not part of the student bundle" in done.stdout
    assert "running the demo on" not in done.stdout


def test_part1_reproduces_the_lesson_to_6_decimals(reference):
    done, _, summary, _ = reference
    assert [[f"{w:.6f}" for w in row] for row in summary["part1"]["weights_pos1"]] == LESSON_WEIGHTS
    for row in LESSON_WEIGHTS:
        assert f"[{', '.join(row)}]" in done.stdout
    assert summary["part1"]["shapes"] == {"split": [1, 2, 3, 2], "scores": [1, 2, 3, 3],
                                          "context": [1, 2, 3, 2], "output": [1, 3, 4]}
    assert summary["part1"]["batched_equals_loop"]


def test_training_learns_the_copy_task(reference):
    _, _, summary, _ = reference
    for part, heads in (("part2", 4), ("part3", 8)):
        run = summary[part]
        assert run["n_heads"] == heads
        assert run["losses"][0] > 3.5            # starts near ln 64 = 4.16
        assert run["losses"][-1] < 1.0
        assert len(run["weights"]) == heads      # [H,T,T]
        for rows in run["weights"]:
            for i, row in enumerate(rows):
                assert abs(sum(row) - 1) < 1e-5 and all(w == 0 for w in row[i + 1:])


def test_pngs_are_valid_images(reference):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image

    _, _, summary, out = reference
    assert sorted(Path(p).name for p in summary["pngs"]) == ["part2_loss_heads.png",
                                                             "part3_heads_4_vs_8.png"]
    for name in summary["pngs"]:
        path = Path(name)
        assert path.parent == out and path.read_bytes()[:8] == PNG_SIGNATURE
        height, width, _ = matplotlib.image.imread(path).shape
        assert height >= 400 and width >= 800


@pytest.fixture(scope="module")
def english(tmp_path_factory):
    """The student bundle's demo (release/, as `make demo` there runs it) on the reference's code,
    in English."""
    out = tmp_path_factory.mktemp("english")
    done, _ = demo("--submission", SOLUTION, "--out", out, "--lang", "en", cwd=ROOT / "release")
    return done, out


def test_one_language_at_a_time(reference, english):
    """Chinese by default, English with --lang en: every line in one language, the lesson's
    words (the copy task, 复制任务), and no "all checks pass" (the demo grades nothing)."""
    import words

    done, out = english
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Part 1" in done.stdout and "第 1 部分" not in done.stdout
    chinese = reference[0].stdout
    assert "第 1 部分" in chinese and "Part 1" not in chinese
    for text, lang in ((done.stdout, "en"), (chinese, "zh")):
        assert words.foreign_lines(text, lang) == [], lang
    assert "copy task" in done.stdout and "复制任务" in chinese
    assert "repeat" not in done.stdout and "重复任务" not in chinese
    assert "all checks pass" not in done.stdout and "make check" in done.stdout.splitlines()[-1]
    assert (out / "part2_loss_heads.png").read_bytes()[:8] == PNG_SIGNATURE


def test_make_demo_ends_cleanly_on_a_stub(tmp_path):
    """`make demo` on a file whose attend alone is a stub: the demo's own words, in the language
    asked, naming attend alone (the pieces before it are there), and make's exit 0 (no "make: ***
    ... Error" after a message that already said what to do).  (Chinese by default and the
    demo's own exit 3: assert_stops_cleanly's tests.)"""
    path = stubbed(tmp_path, {"attend"})
    done = subprocess.run(["make", "-s", "--no-print-directory", "-o", ".venv/.installed", "demo",
                           f"SUBMISSION={path}", "LANG_ARG=en"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not implemented yet" in done.stdout and "还没有实现" not in done.stdout
    assert "Error" not in done.stderr and "make:" not in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "  - attend\n" in done.stdout, done.stdout
    for name in ("split_heads", "merge_heads"):
        assert f"  - {name}\n" not in done.stdout, done.stdout


def assert_stops_cleanly(done, missing):
    text = done.stdout + done.stderr
    assert done.returncode == 3, text
    assert "Traceback" not in text
    assert "还没有实现" in text and "not implemented yet" not in text  # Chinese by default
    for name in missing:
        assert f"  - {name}\n" in done.stdout, text


def test_full_stub_names_every_missing_function(tmp_path):
    """The shipped stub (exercises/attention.py; where it is not there yet, the reference with
    every body stubbed) stops cleanly, naming every missing function.  (attend alone missing:
    test_make_demo_ends_cleanly_on_a_stub.)"""
    everything = ["split_heads", "merge_heads", "attend", "CausalSelfAttention.__init__"]
    path = SHIPPED_STUB if SHIPPED_STUB.is_file() else \
        stubbed(tmp_path, set(everything) | {"CausalSelfAttention.forward"})
    done, _ = demo("--submission", path, "--out", tmp_path / "out")
    assert_stops_cleanly(done, everything)
    assert "第 2 部分" not in done.stdout


def test_part1_runs_before_a_missing_block(tmp_path):
    path = stubbed(tmp_path, {"CausalSelfAttention.forward"})
    done, _ = demo("--submission", path, "--out", tmp_path / "out")
    assert_stops_cleanly(done, ["CausalSelfAttention.forward"])
    assert "[0.002978, 0.997022, 0.000000]" in done.stdout and "第 2 部分" not in done.stdout


def test_a_wrong_scale_is_flagged(tmp_path):
    """Part 1 holds attend to the lesson's numbers: a wrong scale is marked there.  The block is
    left a stub, so the demo stops after part 1 (the closing line of a whole run that differs from
    the lesson is test_a_leaking_mask_is_drawn_and_counted's)."""
    path = stubbed(tmp_path, {"CausalSelfAttention.forward"})
    text = path.read_text(encoding="utf-8")
    assert "/ math.sqrt(q.shape[-1])" in text
    path.write_text(text.replace("/ math.sqrt(q.shape[-1])", "/ math.sqrt(2 * q.shape[-1])"),
                    encoding="utf-8")
    done, _ = demo("--submission", path, "--out", tmp_path / "out", "--lang", "en")
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "not implemented yet" in done.stdout and "  - CausalSelfAttention.forward\n" in done.stdout
    assert "✗ lesson [0.002978, 0.997022, 0.000000]" in done.stdout


def test_missing_file(tmp_path):
    done, _ = demo("--submission", tmp_path / "nope.py", "--out", tmp_path / "out")
    assert done.returncode == 5 and "Traceback" not in done.stderr
    assert "找不到文件" in done.stdout


def test_release_bundle_computes_what_the_kit_computes(reference, english):
    """The student bundle ships the demo: its run on the reference's code (in another process and
    language) computes what the kit's own run computed, every figure of summary.json (so two
    runs compute the same: the demo is seeded)."""
    _, _, summary, out = reference
    done, bundle_out = english
    assert done.returncode == 0, done.stdout + done.stderr
    again = json.loads((bundle_out / "summary.json").read_text())
    assert json.dumps(again).replace(str(bundle_out), "OUT") == \
        json.dumps(summary).replace(str(out), "OUT")
    for head in LESSON_WEIGHTS:
        assert ", ".join(head) in done.stdout
