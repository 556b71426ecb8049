#!/usr/bin/env bash
# How many runs at once a machine should hold (issue 73): the headline command (dau_continuous.py, HalfCheetah-v4,
# dt 0.005), cut to $TOTAL_TIME physical s, as 1, 2, 4 and 8 runs at once (seeds 1..N) through sweeps/run_local.py,
# the machine's cores split among them (each run's env workers: cores / N - 1, at most 8; none below 1: its envs
# step in its own process). Prints each
# count's wall time and runs per hour, and keeps each count's console and evals.csv under $OUT.
#   on the GPU machine: run: bash tests/gpu_check.sh grid      carry: [".whl"]   (its wheels first, as gpu_check.sh)
#   here, to check the script: COUNTS="1 2" TOTAL_TIME=25.6 bash tests/gpu_grid.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpu_grid}
counts=${COUNTS:-1 2 4 8}
total_time=${TOTAL_TIME:-6000}
cores=${CORES:-$(nproc)}
mkdir -p "$out"
export WANDB_MODE=disabled  # the sweep file passes --track
for count in $counts; do
  work=$(mktemp -d)  # a repository-like folder per count: its own runs/, so no point is found done
  for path in "$repo"/*.py "$repo/harness" "$repo/sweeps" "$repo/analysis"; do ln -s "$path" "$work/"; done
  workers=$((cores / count - 1))
  workers=$((workers > 8 ? 8 : workers))
  split=(); [ "$workers" -ge 1 ] && split=("env_workers=$workers") || workers=0
  seeds=$(seq -s, 1 "$count")
  start=$(date +%s)
  (cd "$work" && python3 -m sweeps.run_local sweeps/readme/halfcheetah_dau.yaml --workers "$count" --override \
    dt=0.005 "seed=$seeds" "total_time=$total_time" "${split[@]}" >"$out/grid_$count.txt" 2>&1)
  status=$?
  wall=$(($(date +%s) - start))
  finished=$(grep -l '"completed": true' "$work"/runs/*/run.json 2>/dev/null | wc -l)
  mkdir -p "$out/grid_$count"
  for run in "$work"/runs/HalfCheetah*; do [ -d "$run" ] && cp "$run/evals.csv" "$out/grid_$count/$(basename "$run").csv"; done
  python3 -c "print(f'$count at once ($workers env workers each): $finished finished, exit $status, wall $wall s, '
               f'{$finished * 3600 / max($wall, 1):.1f} runs per hour')"
  rm -rf "$work"
done
