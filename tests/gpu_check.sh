#!/usr/bin/env bash
# Issue 26's checks on the GPU machine in one call (docs/common.md, "On a GPU"). Here, first: `bash
# tests/gpu_wheels.sh python` (the wheels the GPU machine lacks, into .whl/); then the device tool's
#   run: bash tests/gpu_check.sh      carry: [".whl"]
# It prints the card, the bare update's speed, the card's command cut to its first tenth (3000 s) run twice
# with the same seed (its wall time, its evaluations' share, and whether the two evals.csv agree), and the
# test suite on CUDA; logs under $OUT.
#   run: bash tests/gpu_check.sh seeds      the card's command, whole, for seeds 1-5 at once, beside the CPU's
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site MUJOCO_GL=disable PYTHONUNBUFFERED=1  # W&B stays as the suite sets it (offline)
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
if [ "${1:-}" = seeds ]; then
  # Does the GPU learn what the CPU learns? One process a seed (its 256 envs stepped on a core of its own, its
  # updates on the one GPU), each stopped by SIGTERM at 9 minutes if not done (its evaluations so far kept).
  for seed in 1 2 3 4 5; do
    OMP_NUM_THREADS=2 timeout -s TERM 540 python3 dau_continuous.py --env-id HalfCheetah-v4 --dt 0.005 \
      --seed "$seed" >"$out/seed_$seed.txt" 2>&1 &
  done
  wait
  python3 - <<'PY'
import csv, glob, statistics
def last_three(folder):
    (evals,) = glob.glob(f"{folder}/HalfCheetah-v4__dau_continuous__dt0.005__{seed}__*/evals.csv")
    rows = list(csv.DictReader(open(evals)))
    returns = [float(row["scaled_return"]) for row in rows]
    return statistics.mean(returns[-3:]), float(rows[-1]["physical_time"]), float(rows[-1]["wall_time"])
means = {"GPU": [], "CPU": []}
for seed in range(1, 6):
    gpu, cpu = last_three("runs"), last_three("docs/results")
    means["GPU"].append(gpu[0]), means["CPU"].append(cpu[0])
    print(f"seed {seed}: last three GPU {gpu[0]:8.1f} (at {gpu[1]:.0f} s, {gpu[2]:.0f} s wall)  CPU {cpu[0]:8.1f}")
for device, values in means.items():
    print(f"{device}: mean {statistics.mean(values):.1f}, from {min(values):.1f} to {max(values):.1f}")
PY
  exit 0
fi
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
