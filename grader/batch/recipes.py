"""`python -m grader recipes --shards N --out DIR`: a class graded on the job arrays courses
already have, not on a scheduler of ours.

Writes, filled in from grader/batch/recipe_templates/:
    github/grade-class.yml                       GitHub Actions: a matrix of N shards, then a merge
    slurm/slurm-grade-class.sbatch               Slurm: an array of N tasks (SLURM_ARRAY_TASK_ID)
    slurm/slurm-merge-class.sbatch, slurm/slurm-submit.sh   the merge, after every task
    kubernetes/k8s-grade-class.yaml              an Indexed Job (JOB_COMPLETION_INDEX, from 0)
    kubernetes/k8s-merge-class.yaml              the merge Job
Each shard runs `grader batch CLASS --out OUT/shard-K --shard K/N` into its own folder; the merge
runs `grader merge OUT/shard-* --out OUT/merged`.
"""
import os
import re
import stat

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recipe_templates")
RECIPES = {  # kind: [(template, written as)]
    "github": [("github-grade-class.yml", "grade-class.yml")],
    "slurm": [("slurm-grade-class.sbatch",) * 2, ("slurm-merge-class.sbatch",) * 2,
              ("slurm-submit.sh",) * 2],
    "kubernetes": [("k8s-grade-class.yaml",) * 2, ("k8s-merge-class.yaml",) * 2],
}


def render(template, shards, class_dir):
    with open(os.path.join(TEMPLATES, template), encoding="utf-8") as handle:
        text = handle.read()
    return (text.replace("@SHARD_LIST@", ", ".join(str(k) for k in range(1, shards + 1)))
            .replace("@SHARDS@", str(shards)).replace("@CLASS_DIR@", class_dir))


def write(out, shards, class_dir="submissions", kinds=tuple(RECIPES)):
    """The recipes of `kinds` under `out`/<kind>/; returns the paths written."""
    written = []
    for kind in kinds:
        os.makedirs(os.path.join(out, kind), exist_ok=True)
        for template, name in RECIPES[kind]:
            path = os.path.join(out, kind, name)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(render(template, shards, class_dir))
            if name.endswith((".sh", ".sbatch")):
                os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP)
            written.append(path)
    return written


def add_arguments(sub):
    p = sub.add_parser("recipes", help="GitHub Actions / Slurm / Kubernetes recipes that grade a "
                       "class in N shards and merge them (instructors)")
    p.add_argument("--shards", type=int, required=True, help="how many parts (machines)")
    p.add_argument("--out", default="grading-recipes", help="folder to write them to")
    p.add_argument("--class-dir", default="submissions",
                   help="the submissions folder as the jobs see it (relative to the kit)")
    p.add_argument("--kind", choices=sorted(RECIPES), action="append",
                   help="only this kind (repeatable; default: all)")
    from grader import options

    options.add_lang(p, help="language of the messages")


def main(args):
    from grader.batch.refusal import Refusal, refuse

    if not 1 <= args.shards <= 10000:
        return refuse(Refusal("shards_range", got=args.shards), args.lang)
    if not re.fullmatch(r"[\w./@+-]+", args.class_dir):
        return refuse(Refusal("class_dir_form"), args.lang)
    for path in write(args.out, args.shards, args.class_dir, args.kind or tuple(RECIPES)):
        print(path)
    return 0
