#!/usr/bin/env bash
# Issue 26's checks on the GPU machine in one call (docs/common.md, "On a GPU"). Here, first: `bash
# tests/gpu_wheels.sh python` (the wheels the GPU machine lacks, into .whl/); then the device tool's
#   run: bash tests/gpu_check.sh      carry: [".whl"]
# It prints the card, the bare update's speed, the card's command cut to its first tenth (3000 s) run twice
# with the same seed (its wall time, its evaluations' share, and whether the two evals.csv agree), and the
# test suite on CUDA; logs under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site MUJOCO_GL=disable PYTHONUNBUFFERED=1  # W&B stays as the suite sets it (offline)
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import os, torch; print('torch', torch.__version__, torch.cuda.get_device_name(), os.cpu_count(), 'cores')"
python3 tests/benchmark_update.py --gpu 2>&1 | tee "$out/benchmark_update.txt"
for run in 1 2; do
  python3 dau_continuous.py --env-id HalfCheetah-v4 --dt 0.005 --total-time 3000 >"$out/card_$run.txt" 2>&1
  tail -n 2 "$out/card_$run.txt"
done
python3 - "$out" <<'PY'
import csv, json, pathlib, sys
runs = sorted(pathlib.Path("runs").glob("HalfCheetah-v4__dau_continuous__*"))
rows = []
for run in runs:
    info = json.loads((run / "run.json").read_text())
    evals = list(csv.DictReader(open(run / "evals.csv")))
    rows.append([(e["physical_time"], e["scaled_return"]) for e in evals])
    print(run.name, info["device"] if "device" in info else "", f"wall {info['wall_time']:.1f} s",
          f"evaluating {info['eval_wall_time']:.1f} s", [e["scaled_return"] for e in evals])
print("same evals.csv (time, return):", len(rows) == 2 and rows[0] == rows[1])
PY
DAU_TEST_DEVICE=cuda timeout -s INT 390 python3 -m pytest -n 14 -q -rfEs -p no:cacheprovider --durations=12 2>&1 \
  | tee "$out/suite.txt" | tail -n 60
