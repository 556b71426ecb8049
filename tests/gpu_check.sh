#!/usr/bin/env bash
# Issue 26's checks on the GPU machine in one call (docs/common.md, "On a GPU"). Here, first: `bash
# tests/gpu_wheels.sh python` (the wheels the GPU machine lacks, into .whl/); then the device tool's
#   run: bash tests/gpu_check.sh      carry: [".whl"]
# It prints the card, the test suite on CUDA, the card's command cut to its first tenth (3000 s) run twice with
# the same seed (its wall time, its evaluations' share, and whether the two evals.csv agree), and the bare
# update's speed, eager and compiled; logs and the runs' small files under $OUT.
#   run: bash tests/gpu_check.sh seeds      the card's command for seeds 1-5 at once, its first 5 minutes (30-40% of
#                                           a run there), beside the CPU's to the same time
#   run: bash tests/gpu_check.sh profile    the card's command cut to 3000 s under cProfile: where a round's time goes
#   run: bash tests/gpu_check.sh workers    issue 66: the card's command whole at --env-workers 8, its evaluations in
#                                           the background and then at once, back to back (each one's wall time, the
#                                           same evals.csv; 238.5 s on the H200 before); needs only
#                                           `bash tests/gpu_wheels.sh python runs` (the repository grew)
#   run: bash tests/gpu_check.sh grid       issue 73: the headline command cut to 6000 s as 1, 2, 4 and 8 runs at once
#                                           through run_local.py, the cores split among them: runs per hour at each
#                                           count (tests/gpu_grid.sh; COUNTS="1 2" then COUNTS="4 8" to keep each call
#                                           under the 10-minute limit)
#   run: bash tests/gpu_check.sh suite      the GPU's name and the test suite on CUDA alone (about 4 minutes on the H200),
#                                           each test's outcome listed in $OUT/suite.txt, tests/test_gpu.py's here
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site MUJOCO_GL=disable PYTHONUNBUFFERED=1  # W&B stays as the suite sets it (offline)
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
repo=$PWD
if [ "${1:-}" = grid ]; then OUT=$out bash tests/gpu_grid.sh; exit; fi
runs_at=$(mktemp -d)  # this call's runs alone (a warm machine keeps the last call's runs/), copied to $OUT at the end
# The card's command, in $runs_at, stopped by Ctrl-C (at once, its evaluations so far kept) after $limit seconds.
card() { (cd "$runs_at" && timeout -s INT "${limit:-580}" python3 "$repo/dau_continuous.py" --env-id HalfCheetah-v4 \
  --dt 0.005 "$@"); }
if [ "${1:-}" = seeds ]; then
  # Does the GPU learn what the CPU learns? One process a seed (its 256 envs stepped on the CPU, its updates on the
  # one GPU), each stopped at 5 minutes: five at once reach 9000-12000 s of the 30000 by then (2026-11-26, H200; a
  # whole run takes about 12 minutes among five, more than a call may last), compared with the CPU to the same time.
  for seed in 1 2 3 4 5; do
    OMP_NUM_THREADS=2 limit=300 card --seed "$seed" >"$out/seed_$seed.txt" 2>&1 &
  done
  wait
  tar czf "$out/runs.tar.gz" --exclude='*.pt' -C "$runs_at" runs
  python3 - "$runs_at" <<'PY'
import csv, glob, statistics, sys
def evaluations(folder, seed):
    (evals,) = glob.glob(f"{folder}/HalfCheetah-v4__dau_continuous__dt0.005__{seed}__*/evals.csv")
    return [(float(row["physical_time"]), float(row["scaled_return"])) for row in csv.DictReader(open(evals))]
means = {"GPU": [], "CPU": []}
for seed in range(1, 6):
    try:
        gpu = evaluations(f"{sys.argv[1]}/runs", seed)
        cpu = [row for row in evaluations("docs/results", seed) if row[0] <= gpu[-1][0]]  # to the same time
        gpu_mean, cpu_mean = (statistics.mean(value for _, value in rows[-3:]) for rows in (gpu, cpu))
    except (ValueError, statistics.StatisticsError) as error:
        print(f"seed {seed}: no comparison ({error!r})")
        continue
    means["GPU"].append(gpu_mean), means["CPU"].append(cpu_mean)
    print(f"seed {seed}: to {gpu[-1][0]:.0f} s, last three GPU {gpu_mean:8.1f}  CPU {cpu_mean:8.1f}")
for device, values in means.items():
    if values:
        print(f"{device}: mean {statistics.mean(values):.1f}, from {min(values):.1f} to {max(values):.1f}")
PY
  exit 0
fi
if [ "${1:-}" = workers ]; then
  # Issue 66: the card's command whole at --env-workers 8, its evaluations in the background (the default on a GPU)
  # and then at once, back to back on the same warm machine (238.5 s on the H200 at 16 workers before, 67 s of it
  # evaluating; 243.3 s at 8): each run's wall time, the time its evaluations took, and whether the two evals.csv
  # agree at every evaluation (time, steps, updates, return: all but the wall time). Each is stopped by Ctrl-C
  # at its limit, its evaluations kept.
  for run in "True 290" "False 290"; do  # --eval-in-background, wall-time limit (s)
    read -r background limit <<<"$run"
    mkdir -p "$runs_at/$background"
    (cd "$runs_at/$background" && timeout -s INT "$limit" python3 "$repo/dau_continuous.py" --env-id HalfCheetah-v4 \
      --dt 0.005 --env-workers 8 --eval-in-background "$background" >"$out/card_$background.txt" 2>&1)
    tail -n 1 "$out/card_$background.txt"
  done
  for background in True False; do cp "$runs_at"/$background/runs/*/evals.csv "$out/evals_$background.csv"; done
  python3 - "$out" <<'PY'
import csv, sys
background, at_once = (list(csv.DictReader(open(f"{sys.argv[1]}/evals_{name}.csv"))) for name in ("True", "False"))
keys = ("physical_time", "env_steps", "updates", "scaled_return")
same = len(background) == len(at_once) and all(all(a[k] == b[k] for k in keys) for a, b in zip(background, at_once))
print(f"{len(background)} and {len(at_once)} evaluations; the same evals.csv: {same}")
for name, rows in (("background", background), ("at once", at_once)):
    print(f"{name}: {rows[-1]['physical_time']} s in {rows[-1]['wall_time']} s wall (the last evaluation's row)")
PY
  exit 0
fi
if [ "${1:-}" = profile ]; then
  # Where a GPU round's CPU time goes (not yet profiled on the device: docs/common.md, "On a GPU"): the card's
  # command cut to 3000 s under cProfile, its functions by own time and the loop's parts by cumulative time. A
  # Tensor.cpu() waits for the GPU: the action's for the policy's forward pass, the round's statistics' for the
  # replayed graph (whose own launch, `replay`, returns at once).
  (cd "$runs_at" && python3 -m cProfile -o "$out/card.prof" "$repo/dau_continuous.py" --env-id HalfCheetah-v4 \
    --dt 0.005 --total-time 3000 >"$out/card_profiled.txt" 2>&1)
  tail -n 2 "$out/card_profiled.txt"
  python3 - "$out/card.prof" <<'PY' | tee "$out/profile.txt"
import pstats, sys
stats = pstats.Stats(sys.argv[1])
# One ReplayBuffer.sample a round on either device (on a GPU, train_round runs at the first round and the capture).
rounds = sum(entry[1] for (file, _, name), entry in stats.stats.items()
             if name == "sample" and file.endswith("dau_continuous.py"))
print(f"{rounds} rounds; per round, in ms (cumulative, own time in brackets):")
parts = [
    ("dau_continuous.py", "env_step", "env_step (stepping the 256 envs)"),
    ("dau_continuous.py", "evaluate", "evaluate (all evaluations)"),
    ("dau_continuous.py", "add", "ReplayBuffer.add"),
    ("dau_continuous.py", "sample", "ReplayBuffer.sample"),
    ("dau_continuous.py", "update", "Normalizer.update or update()"),
    ("dau_continuous.py", "step", "OUNoise.step"),
    ("dau_continuous.py", "forward", "networks' forward"),
    ("harness/gpu.py", "replay", "graph replay (launch)"),
    ("harness/env_workers.py", "step", "EnvWorkers.step (--env-workers)"),
    ("~", "<method 'cpu' of 'torch._C.TensorBase' objects>", "Tensor.cpu (GPU waits)"),
    ("~", "<method 'numpy' of 'torch._C.TensorBase' objects>", "Tensor.numpy"),
]
for (file, line, name), (_, calls, own, cumulative, _) in sorted(stats.stats.items(), key=lambda item: -item[1][3]):
    for part_file, part_name, label in parts:
        if file.endswith(part_file) and name == part_name:
            print(f"  {label:40s} {1000 * cumulative / rounds:8.2f} ({1000 * own / rounds:.2f}), {calls} calls, line {line}")
stats.sort_stats("tottime").print_stats(25)
PY
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import os, torch; print('torch', torch.__version__, torch.cuda.get_device_name(), os.cpu_count(), 'cores')"
# The suite first (it must come back whole), the benchmark last: its compilations take the longest to predict.
DAU_TEST_DEVICE=cuda timeout -s INT 420 python3 -m pytest -n 14 -q -rA -p no:cacheprovider --durations=12 2>&1 \
  >"$out/suite.txt"
grep -E "^(PASSED|FAILED|ERROR|SKIPPED).*test_gpu" "$out/suite.txt"  # the graph tests ran, not skipped
sed -n '/slowest 12 durations/,$p' "$out/suite.txt" | grep -vE "^(PASSED|SKIPPED)"
[ "${1:-}" = suite ] && exit 0
for run in 1 2; do
  card --total-time 3000 >"$out/card_$run.txt" 2>&1
  tail -n 2 "$out/card_$run.txt"
done
tar czf "$out/runs.tar.gz" --exclude='*.pt' -C "$runs_at" runs
python3 - "$runs_at" <<'PY'
import csv, json, pathlib, sys
rows = []
for run in sorted(pathlib.Path(sys.argv[1], "runs").glob("HalfCheetah-v4__dau_continuous__*")):
    info = json.loads((run / "run.json").read_text())
    evals = list(csv.DictReader(open(run / "evals.csv")))
    rows.append([(e["physical_time"], e["scaled_return"]) for e in evals])
    print(run.name, info.get("machine", {}).get("device"), f"wall {info['wall_time']:.1f} s",
          f"evaluating {info['eval_wall_time']:.1f} s, {info.get('eval_wait_time', float('nan')):.1f} s of the wall",
          [e["scaled_return"] for e in evals])
print("same evals.csv (time, return):", len(rows) == 2 and rows[0] == rows[1])
PY
python3 tests/benchmark_update.py --gpu 2>&1 | tee "$out/benchmark_update.txt"
