"""What a checkpoint costs: its size and the seconds to write and read it, at the end of a run (replay memory full).

    python tests/benchmark_checkpoint.py                # the cases in CASES, one after another
    python tests/benchmark_checkpoint.py --cases 0 2    # some of them

Each case runs the script for real (its defaults and the given dt and budget) and stops it with SIGTERM after its
first evaluation, which gives a checkpoint of the real shape (every env's state, the networks, the optimizer).
Its replay memory is then filled to the rows the whole run would hold (buffer_rows: the budget or --buffer-time,
whichever is smaller), and that checkpoint is written with the scripts' save_checkpoint (atomic, fsync) and read
back as --resume reads it. Writing goes to the disk of the working directory.
"""

import importlib
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import tyro

# The checkout's root, for a checkout whose packages are not installed (`pip install -e .` makes it unnecessary).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helpers import start_and_signal  # noqa: E402

from harness.args import buffer_rows  # noqa: E402
from harness.checkpoint import CHECKPOINT, load_checkpoint  # noqa: E402
from harness.files import save_checkpoint  # noqa: E402

# script, env, dt (None: native), budget in physical seconds (None: the env's default)
CASES = [
    ("dau_continuous.py", "Pendulum-v1", None, None),
    ("dau_continuous.py", "Pendulum-v1", 0.0005, 1800),
    ("dau_discrete.py", "CartPole-v1", None, None),
    ("dau_discrete.py", "CartPole-v1", 0.0005, 12600),
    ("dau_continuous.py", "HalfCheetah-v4", 0.005, None),
    ("dau_continuous.py", "BipedalWalker-v3", 0.01, None),
    ("dau_continuous.py", "BipedalWalker-v3", 0.002, None),
]


@dataclass
class Options:
    cases: tuple[int, ...] = ()
    """indices into CASES; empty: all"""


def measure(script, env_id, dt, total_time, folder):
    args = ["--env-id", env_id, *(["--dt", str(dt)] if dt else [])]
    args += ["--total-time", str(total_time)] if total_time else []
    env = {"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    returncode, _, stderr = start_and_signal(script, *args, cwd=folder, signum=signal.SIGTERM, rows=2, env=env)
    assert returncode == 0, stderr[-2000:]
    (run_dir,) = (folder / "runs").iterdir()
    state = load_checkpoint(str(run_dir), script).saved  # the checkpoint's dict, as written
    module = importlib.import_module(script[: -len(".py")])
    resolved_dt = json.loads((run_dir / "run.json").read_text())["dt"]  # the native step where --dt was left out
    rows = buffer_rows(module.Args(**state["args"]), resolved_dt)
    replay = state["state"]["replay"]
    replay["fields"] = [torch.randn(rows, field.shape[1]) for field in replay["fields"]]
    replay["size"] = replay["capacity"] = rows
    path = run_dir / CHECKPOINT
    start = time.perf_counter()
    save_checkpoint(state, str(path))
    written = time.perf_counter() - start
    start = time.perf_counter()
    load_checkpoint(str(run_dir), script)
    read = time.perf_counter() - start
    return rows, path.stat().st_size, written, read


if __name__ == "__main__":
    options = tyro.cli(Options)
    print("| script | env | dt | budget (s) | transitions | checkpoint | write | read |")
    print("|---|---|---|---|---|---|---|---|")
    for index in options.cases or range(len(CASES)):
        script, env_id, dt, total_time = CASES[index]
        with tempfile.TemporaryDirectory(dir=os.getcwd()) as folder:
            rows, size, written, read = measure(script, env_id, dt, total_time, Path(folder))
        print(
            f"| {script} | {env_id} | {dt or 'native'} | {total_time or 'default'} | {rows:,} | {size / 1e6:,.1f} MB "
            f"| {written:.2f} s | {read:.2f} s |",
            flush=True,
        )
