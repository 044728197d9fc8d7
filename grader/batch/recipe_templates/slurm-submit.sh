#!/bin/bash
# Submit the grading array, then the merge once every task has ended (afterany: a shard that
# failed is listed as "not graded" by the merge instead of blocking it).
set -euo pipefail
cd "$(dirname "$0")"
array=$(sbatch --parsable slurm-grade-class.sbatch)
sbatch --dependency="afterany:${array%%;*}" slurm-merge-class.sbatch
