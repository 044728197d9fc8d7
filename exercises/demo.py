"""第 12 讲的演示，运行在你自己的 attention.py 上。
Lesson 12's demos, run on your own attention.py.

    python -m exercises.demo                       # exercises/attention.py
    python -m exercises.demo --submission PATH     # another file
    python -m exercises.demo --reference           # solutions/attention.py (for instructors)
    python -m exercises.demo --out DIR --lang zh|en

Part 1 (lesson 12, 「两个头会读到哪里」): two heads with fixed random projections read position 1.
Part 2 (the multi-head self-attention chapter, 「训练演示」): a tiny LM around CausalSelfAttention
learns the copy task (复制任务); loss curve and one attention heatmap per head.  Part 3: the same with 8
heads, heatmaps beside the 4-head run.

The heatmaps draw the student's weights as they are, the future (key after query) included:
weight where the causal mask forbids it is a leak, outlined in red with "!" as on the feedback
page, and the share of each row's weight that reads the future is printed.

Exit code: 0 every result matches the lesson, 3 a function is still a stub, 4 a result differs
from the lesson, 5 no such file (each said in words; `make demo` ends cleanly on all four: only a
crash, exit 1, is make's error).  The figures and a summary.json go to --out (default: out/).
Output in one language, --lang zh (the default) or en.
"""
import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path

import torch
from torch import nn

from grader.sandbox.runtime import copytask

ROOT = Path(__file__).resolve().parent.parent
SEED = 0                       # training seed for Parts 2 and 3
SHORT_ID, SHORT_T = 7, 8       # the heatmaps' input: id 7 repeated over 8 positions
LEAK = 1e-6                    # weight above this where the mask forbids reading is a leak
# Seed 000's published weights at position 1 (head 0, head 1), and the shapes it walks through.
LESSON_WEIGHTS = [[0.002978, 0.997022, 0.0], [0.999998, 0.000002, 0.0]]
LESSON_SHAPES = {"split": [1, 2, 3, 2], "scores": [1, 2, 3, 3], "context": [1, 2, 3, 2],
                 "output": [1, 3, 4]}
PART1_NEEDS = ["split_heads", "merge_heads", "attend"]
PART2_NEEDS = ["CausalSelfAttention"]
CJK_FONTS = ["Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "Microsoft YaHei", "SimHei", "PingFang SC", "Heiti SC",
             "Droid Sans Fallback", "AR PL UMing CN"]

LANG = "zh"
MATCHES, STUB, DIFFERS, NO_FILE = 0, 3, 4, 5  # exit codes (a crash is Python's own 1)


def t(zh, en):
    """Student-facing text in the one language chosen (--lang)."""
    return en if LANG == "en" else zh


class Stub(Exception):
    """The submission cannot run a part yet: `names` are the missing functions."""

    def __init__(self, names):
        self.names = names


# -- loading the submission and finding stubs ------------------------------------------------
def load(path):
    spec = importlib.util.spec_from_file_location("student_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stub_name(error, path):
    """The innermost function of the student's file in the traceback, e.g. 'attend'."""
    names = [getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
             for frame, _ in traceback.walk_tb(error.__traceback__)
             if Path(frame.f_code.co_filename).resolve() == path]
    return names[-1] if names else None


PROBES = {
    "split_heads": lambda m: m.split_heads(torch.zeros(1, 3, 4), 2),
    "merge_heads": lambda m: m.merge_heads(torch.zeros(1, 2, 3, 2)),
    "attend": lambda m: m.attend(*torch.zeros(3, 1, 2, 3, 2), return_weights=True),
    "CausalSelfAttention": lambda m: m.CausalSelfAttention(8, 2)(torch.zeros(1, 3, 8),
                                                                 return_weights=True),
}


def find_stubs(module, path):
    """{contract name: [missing functions]} by calling each piece once on a tiny input.  Only
    NotImplementedError counts here; any other error is a real bug that the demo will show."""
    stubs = {}
    for name, probe in PROBES.items():
        if not hasattr(module, name):
            stubs[name] = [t(f"{name}（未定义）", f"{name} (not defined)")]
            continue
        try:
            probe(module)
        except NotImplementedError as error:
            stubs[name] = [stub_name(error, path) or name]
        except Exception:
            pass
    return stubs


def require(stubs, needs):
    """Stop before a part that needs a stub, naming every missing function known so far."""
    if any(need in stubs for need in needs):
        raise Stub(list(dict.fromkeys(n for names in stubs.values() for n in names)))


# -- Part 1 ----------------------------------------------------------------------------------
def part1(m):
    print("\n== " + t("第 1 部分：两个头会读到哪里", "Part 1: where do the two heads read") + " ==")
    x = torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)  # [B,T,D] = [1,3,4]
    torch.manual_seed(42)
    q_proj, k_proj, v_proj, out_proj = (nn.Linear(4, 4, bias=False) for _ in range(4))
    # float64 after a float32 init: the sixth decimal then does not depend on the CPU's float32
    # softmax kernel (head 1 is 0.99999755, and float32 here gives 0.9999975 -> "0.999997").
    x = x.double()
    for proj in (q_proj, k_proj, v_proj, out_proj):
        proj.double()
    with torch.no_grad():
        q, k, v = (m.split_heads(p(x), 2) for p in (q_proj, k_proj, v_proj))  # 3 x [1,2,3,2]
        context, weights = m.attend(q, k, v, return_weights=True)  # [1,2,3,2], [1,2,3,3]
        output = out_proj(m.merge_heads(context))  # [1,3,4]
        loop = torch.stack([m.attend(q[:, h], k[:, h], v[:, h]) for h in range(2)], dim=1)
    shapes = {"split": list(q.shape), "scores": list(weights.shape),
              "context": list(context.shape), "output": list(output.shape)}
    print(t("形状", "shapes") + ":")
    labels = {"split": t("分头后 Q/K/V", "Q/K/V after split_heads"),
              "scores": t("分数/比例", "scores / weights"),
              "context": t("各头汇总", "context per head"), "output": t("输出", "output")}
    for key, label in labels.items():
        ok = shapes[key] == LESSON_SHAPES[key]
        mark = "✓" if ok else f"✗ {t('应为', 'expected')} {LESSON_SHAPES[key]}"
        print(f"  {label}: {shapes[key]} {mark}")
    same = loop.shape == context.shape and torch.allclose(loop, context)
    print("  " + t("一次批量计算 = 逐头循环", "one batched call = the per-head loop") + ": "
          + ("✓" if same else "✗"))

    print(t("位置 1 的读取比例（读位置 0、1、2）", "weights at position 1 (reading positions 0, 1, 2)"))
    scores_ok = shapes["scores"] == LESSON_SHAPES["scores"]
    at_pos1 = weights[0, :, 1].tolist() if scores_ok else []  # [H,T]: each head at query 1
    figures_ok = len(at_pos1) == len(LESSON_WEIGHTS)
    for h, (row, lesson) in enumerate(zip(at_pos1, LESSON_WEIGHTS)):
        row, lesson = (", ".join(f"{w:.6f}" for w in r) for r in (row, lesson))
        figures_ok &= row == lesson
        mark = "✓" if row == lesson else f"✗ {t('讲义', 'lesson')} [{lesson}]"
        print(f"  {t('头', 'head')} {h}: [{row}]  {mark}")
    return {"weights_pos1": at_pos1, "shapes": shapes, "batched_equals_loop": bool(same),
            "checks": {"figures": figures_ok, "shapes": shapes == LESSON_SHAPES,
                       "batched": bool(same)}}


# -- Parts 2 and 3 ---------------------------------------------------------------------------
class ProgressBar:
    """A tiny stand-in for tqdm: redraws on a terminal, prints the finished bar otherwise."""

    def __init__(self, total, label, width=30):
        self.total, self.label, self.width, self.done = total, label, width, 0
        self.live = sys.stdout.isatty()

    def __call__(self, loss):
        self.done += 1
        if self.live or self.done == self.total:
            filled = self.width * self.done // self.total
            sys.stdout.write(f"\r  {self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                             f"{self.done}/{self.total} {t('损失', 'loss')} {loss:.3f}")
            sys.stdout.write("\n" if self.done == self.total else "")
            sys.stdout.flush()


def train(m, n_heads):
    steps = []
    bar = ProgressBar(copytask.EPOCHS * copytask.STEPS_PER_EPOCH, f"H={n_heads}")
    model, losses = copytask.train(m.CausalSelfAttention, seed=SEED, n_heads=n_heads,
                                   on_step=lambda loss: (steps.append(loss), bar(loss)))
    ids = torch.full((1, SHORT_T), SHORT_ID)  # [1,T]: one id repeated, like a training row
    with torch.no_grad():
        _, weights = model(ids, return_weights=True)  # [1,H,T,T]
    print(f"  {t('第 1 步', 'step 1')}: {losses[0]:.4f}   "
          f"({t('随机水平', 'chance')} ln {copytask.VOCAB} = {copytask.chance_loss():.4f})")
    for epoch, loss in enumerate(losses[1:], 1):
        print(f"  {t(f'第 {epoch} 轮', f'epoch {epoch}')}: {loss:.4f}")
    return {"n_heads": n_heads, "losses": losses, "step_losses": steps,
            "weights": weights[0].tolist()}


def future_share(weights):
    """[T,T] weights -> the mean over query rows of the weight that reads a later position."""
    rows = [sum(row[i + 1:]) for i, row in enumerate(weights)]
    return sum(rows) / len(rows)


def leak_cells(weights):
    """(query, key) cells after the diagonal that hold weight: reading the future."""
    return [(i, j) for i, row in enumerate(weights) for j, w in enumerate(row) if j > i and w > LEAK]


def text_heatmap(weights, title):
    """A [T,T] map in characters: rows are query positions, columns key positions; a future
    cell is blank when it holds no weight, and '!' with the weight's mark when it leaks."""
    ramp = ".:-=+*#%@"  # weight 0 ... 1
    print(f"  {title}")
    print("    " + t("行 = 查询位置，列 = 键位置", "rows = query position, columns = key position"))
    print("       " + "".join(f"{j:<3d}" for j in range(len(weights))).rstrip())
    for i, row in enumerate(weights):
        cells = [ramp[round(w * 8)] * 2 if j <= i else ("!" + ramp[round(w * 8)] if w > LEAK else "  ")
                 for j, w in enumerate(row)]
        print(f"    {i:>2d} " + " ".join(cells).rstrip())
    print("    " + t("刻度", "scale") + ": '..' ≈ 0 … '@@' ≈ 1; "
          + t("空白 = 未来且没有权重；'!' = 读到了未来（泄漏）",
              "blank = future with no weight; '!' = reads the future (a leak)"))


def report_future(run):
    """Print (and return) how much weight reads the future, per head: 0 for a causal model."""
    shares = [future_share(rows) for rows in run["weights"]]
    worst = max(shares)
    print("  " + t("读到未来的权重（每行平均）", "weight that reads the future (mean per row)") + ": "
          + ", ".join(f"{t('头', 'head')} {h} {share:.1%}" for h, share in enumerate(shares))
          + ("  ✓" if worst <= LEAK else "  ✗ " + t("因果掩码没有挡住未来", "the causal mask lets the future through")))
    return shares


def head_summary(run):
    """Per head, the key position the last query reads most, with its weight."""
    parts = []
    for h, rows in enumerate(run["weights"]):
        top = max(range(len(rows[-1])), key=rows[-1].__getitem__)
        parts.append(f"{h}→{top} ({rows[-1][top]:.2f})")
    print("  " + t("最后一个位置各头读得最多的键（头→键）", "the last query's top key per head (head→key)")
          + ":\n    " + ", ".join(parts))


# -- figures ---------------------------------------------------------------------------------
def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager
    installed = {f.name for f in font_manager.fontManager.ttflist}
    cjk = next((name for name in CJK_FONTS if name in installed), None)
    if cjk:
        plt.rcParams["font.sans-serif"] = [cjk, "DejaVu Sans"]
        plt.rcParams["axes.unicode_minus"] = False
    return plt, cjk is not None


def heatmap(ax, weights, title, label):
    """The weights as they are; future cells hatched, and outlined in red with '!' where they
    hold weight (a leak).  Returns the image and the number of leaking cells drawn."""
    import numpy as np
    from matplotlib.patches import Rectangle

    w = np.array(weights)  # [T,T]
    image = ax.imshow(w, cmap="viridis", vmin=0, vmax=1)
    leaks = set(leak_cells(weights))
    for i in range(len(w)):
        for j in range(i + 1, len(w)):
            if (i, j) in leaks:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red",
                                       linewidth=2))
                ax.text(j + 0.3, i - 0.2, "!", color="red", fontsize=8, ha="right", va="top",
                        fontweight="bold")
            else:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                       edgecolor="0.6", linewidth=0))
    ticks = range(len(w))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.tick_params(labelsize=7)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(label("键位置", "key position"), fontsize=8)
    ax.set_ylabel(label("查询位置", "query position"), fontsize=8)
    return image, len(leaks)


def legend_text(label):
    return label("斜线 = 未来（不可读）；红框 ! = 读到了未来（泄漏）",
                 "hatched = future (not to be read); red ! = reads the future (a leak)")


def input_text(label, run):
    """What the heatmaps were drawn on: one id repeated over T positions."""
    return label("输入", "input") + f": id {SHORT_ID} × {SHORT_T}, T={len(run['weights'][0])}"


def figures(out, run4, run8):
    """Both figures as PNGs in `out`; returns their paths and the number of leaking cells drawn."""
    plt, cjk = pyplot()

    def label(zh, en):
        return t(zh, en) if cjk else en

    out.mkdir(parents=True, exist_ok=True)
    part2, leaks2 = figure_part2(plt, label, out, run4)
    part3, leaks3 = figure_part3(plt, label, out, run4, run8)
    return [part2, part3], leaks2 + leaks3


def figure_part2(plt, label, out, run4):
    """The loss curve on top, one heatmap per head below."""
    fig = plt.figure(figsize=(12, 6.4), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.25])
    ax = top.subplots()
    steps = range(1, len(run4["step_losses"]) + 1)
    ax.plot(steps, run4["step_losses"], marker=".", label=label("每步损失", "loss per step"))
    per_epoch = copytask.STEPS_PER_EPOCH
    for epoch, loss in enumerate(run4["losses"][1:]):
        ax.hlines(loss, epoch * per_epoch + 1, (epoch + 1) * per_epoch, colors="C1",
                  label=label("每轮平均", "epoch mean") if epoch == 0 else None)
    ax.axhline(copytask.chance_loss(), color="0.5", linestyle="--",
               label=label("随机水平", "chance") + f" ln {copytask.VOCAB}")
    ax.set_xlabel(label("训练步", "training step"))
    ax.set_ylabel(label("交叉熵损失", "cross-entropy loss"))
    ax.set_title(label("复制任务上的损失", "Loss on the copy task")
                 + f" (H=4, D={copytask.D_MODEL}, " + label("训练长度", "training length")
                 + f" {copytask.CONTEXT}, " + label("词表", "vocab") + f" {copytask.VOCAB})")
    ax.legend()
    ax.grid(alpha=0.3)
    axes = bottom.subplots(1, 4)
    leaks = 0
    for h, (ax, weights) in enumerate(zip(axes, run4["weights"])):
        image, n = heatmap(ax, weights, label(f"头 {h}", f"head {h}"), label)
        leaks += n
    bottom.suptitle(label("训练后的注意力权重", "Attention weights after training")
                    + f" ({input_text(label, run4)})\n" + legend_text(label), fontsize=11)
    bottom.colorbar(image, ax=axes, shrink=0.8, label=label("注意力权重", "attention weight"))
    part2 = out / "part2_loss_heads.png"
    fig.savefig(part2, dpi=110)
    plt.close(fig)
    return part2, leaks


def figure_part3(plt, label, out, run4, run8):
    """4 heads (d_head 8) beside 8 heads (d_head 4)."""
    fig = plt.figure(figsize=(15, 5.6), layout="constrained")
    leaks = 0
    left, right = fig.subfigures(1, 2, width_ratios=[2, 4.4], wspace=0.02)
    left.set_facecolor("0.95")
    fig.suptitle(label("4 个头与 8 个头", "4 heads vs 8 heads") + f" (D={copytask.D_MODEL}, "
                 + input_text(label, run4) + ")\n" + legend_text(label), fontsize=11)
    for sub, run, cols in ((left, run4, 2), (right, run8, 4)):
        n = run["n_heads"]
        axes = sub.subplots(2, cols)
        for h, (ax, weights) in enumerate(zip(axes.flat, run["weights"])):
            image, drawn = heatmap(ax, weights, label(f"头 {h}", f"head {h}"), label)
            leaks += drawn
        sub.suptitle(f"H={n}, d_head={copytask.D_MODEL // n}, "
                     + label("最终损失", "final loss") + f" {run['losses'][-1]:.3f}")
    right.colorbar(image, ax=right.axes, shrink=0.8, label=label("注意力权重", "attention weight"))
    part3 = out / "part3_heads_4_vs_8.png"
    fig.savefig(part3, dpi=110)
    plt.close(fig)
    return part3, leaks


# -- main ------------------------------------------------------------------------------------
def run(path, out):
    module = load(path)
    stubs = find_stubs(module, path)
    summary = {"submission": str(path)}
    require(stubs, PART1_NEEDS)
    summary["part1"] = part1(module)
    require(stubs, PART2_NEEDS)

    print("\n== " + t("第 2 部分：在复制任务上训练（4 个头）",
                      "Part 2: training on the copy task (4 heads)") + " ==")
    run4 = train(module, 4)
    text_heatmap(run4["weights"][0], t(f"头 0 的注意力（训练后），输入 id {SHORT_ID} × {SHORT_T}",
                                       f"head 0's attention after training, input id {SHORT_ID} "
                                       f"× {SHORT_T}"))
    head_summary(run4)
    run4["future_share"] = report_future(run4)

    print("\n== " + t("第 3 部分：8 个头（每头宽度 4）", "Part 3: 8 heads (d_head 4)") + " ==")
    run8 = train(module, 8)
    head_summary(run8)
    run8["future_share"] = report_future(run8)
    summary["part2"], summary["part3"] = run4, run8
    summary["checks"] = dict(summary["part1"]["checks"],
                             loss4=run4["losses"][-1] < 1.0, loss8=run8["losses"][-1] < 1.0,
                             causal=max(run4["future_share"] + run8["future_share"]) <= LEAK)
    for name, ok in (("H=4", summary["checks"]["loss4"]), ("H=8", summary["checks"]["loss8"])):
        if not ok:
            print("  ✗ " + t(f"{name} 最终损失没有降到 1.0 以下", f"{name}: final loss is not below 1.0"))

    try:
        pngs, summary["leak_cells_drawn"] = figures(out, run4, run8)
        print("\n" + t("图已保存", "figures saved") + ":\n" + "\n".join(f"  {p}" for p in pngs))
        summary["pngs"] = [str(p) for p in pngs]
    except ImportError:
        print("\n" + t("没有安装 matplotlib，跳过作图", "matplotlib is not installed: no figures")
              + " (pip install matplotlib==3.10.7)")
        summary["pngs"] = []
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return all(summary["checks"].values())


def main(argv=None):
    global LANG
    parser = argparse.ArgumentParser(prog="python -m exercises.demo",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--submission", type=Path, default=ROOT / "exercises" / "attention.py")
    parser.add_argument("--reference", action="store_true", help="run solutions/attention.py")
    parser.add_argument("--out", type=Path, default=Path("out"))
    parser.add_argument("--lang", choices=["zh", "en"], default="zh")
    args = parser.parse_args(argv)
    LANG = args.lang
    path = (ROOT / "solutions" / "attention.py" if args.reference else args.submission).resolve()
    if args.reference and not path.is_file():
        print(t("参考答案不在学生版里，REFERENCE=1 只能在老师的完整版中运行；"
                "make demo 会在你自己的 attention.py 上运行演示。",
                "The reference solution is not part of the student bundle: REFERENCE=1 runs only "
                "in the instructor's kit; make demo runs the demos on your own attention.py."))
        return NO_FILE
    if not path.is_file():
        print(t(f"找不到文件 {path}", f"file not found: {path}"))
        return NO_FILE
    print(t("演示运行于", "running the demo on") + f": {path}")
    try:
        ok = run(path, args.out)
    except (Stub, NotImplementedError) as error:
        names = error.names if isinstance(error, Stub) else [stub_name(error, path) or "?"]
        print("\n" + t("还没有实现，演示到此停止", "not implemented yet, the demo stops here") + ":")
        for name in names:
            print(f"  - {name}")
        print(t(f"请在 {path.name} 中补全它们，再运行一次。", f"Fill them in in {path.name}, then run again."))
        return STUB
    if ok:
        print("\n" + t("演示的结果与讲义一致 ✓。演示不评分：make check 运行公开检查，"
                       "检查题的答案在老师评分时检查。",
                       "The demo's results match the lesson ✓. The demo is not grading: make check "
                       "runs the public checks, and the check-question answers are checked when "
                       "your instructor grades."))
        return MATCHES
    print("\n" + t("有些结果与讲义不一致 ✗（见上面标 ✗ 的行）；make check 会说明是哪里错了。",
                   "Some results differ from the lesson ✗ (the lines marked ✗ above); make check "
                   "says what is wrong."))
    return DIFFERS


if __name__ == "__main__":
    sys.exit(main())
