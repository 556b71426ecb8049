"""Steps per second of the training envs in one process and split over worker processes (--env-workers).

    python tests/benchmark_env_workers.py [--env-id HalfCheetah-v4] [--dt 0.005] [--workers 1 2] [--repeats 3]

Each measurement steps the scripts' 256 training envs (harness.envs.make_vector_env, SAME_STEP autoreset) with
random actions in the box for --steps vector steps, timed after a reset; the worker counts alternate, --repeats
times, and the medians are printed with their ratio to the first count. Env stepping alone: no networks, no
replay, no updates. On a machine with fewer idle cores than workers the workers only share the same cores.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

# The checkout's root, for a checkout whose packages are not installed (`pip install -e .` makes it unnecessary).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.envs import make_vector_env  # noqa: E402


def steps_per_second(env_id, dt, workers, steps, num_envs=256, seed=1):
    envs = make_vector_env(SimpleNamespace(env_id=env_id, time_limit=None), dt, num_envs, seed, workers)
    envs.reset(seed=seed)
    space = envs.single_action_space
    actions = np.random.default_rng(seed).uniform(space.low, space.high, (steps, num_envs, *space.shape))
    actions = actions.astype(space.dtype)
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    elapsed = time.perf_counter() - start
    envs.close()
    return steps * num_envs / elapsed


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", default="HalfCheetah-v4")
    parser.add_argument("--dt", type=float, default=0.005)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    rates = {workers: [] for workers in options.workers}
    for _ in range(options.repeats):
        for workers in options.workers:
            rates[workers].append(steps_per_second(options.env_id, options.dt, workers, options.steps))
            print(f"{workers} worker(s): {rates[workers][-1]:,.0f} env steps/s", flush=True)
    first = statistics.median(rates[options.workers[0]])
    for workers, values in rates.items():
        median = statistics.median(values)
        print(f"{options.env_id} dt {options.dt}, 256 envs, {workers} worker(s): median {median:,.0f} env steps/s "
              f"(min {min(values):,.0f}, max {max(values):,.0f}), {median / first:.2f}x the first")  # fmt: skip
