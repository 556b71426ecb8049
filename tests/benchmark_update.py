"""Updates per second of the real training loop against a bare loop of the same network work.

    python tests/benchmark_update.py [--dt 0.01] [--total-time 600] [--repeats 1]

The bare loop calls each script's own update() on a fixed batch of 256, with the script's networks and
optimizer settings (two RMSprop groups, foreach, deterministic algorithms on the CPU): the same forward
passes, the same two backward passes and the same optimizer (and, for DDPG, target) steps, with nothing
else: no replay, no environment, no evaluation, no bookkeeping. The training loop is the script itself,
run end to end (acting, replay and the evaluations at t=0 and at the end included). The bare loop is
timed just before and just after the script, and their mean is the reference, so that a change of load
on the machine during the measurement (other processes) biases the ratio less. The ratio loop / bare
says how close training runs to the network's own speed. On a shared machine (a VM whose host speed drifts
by tens of percent within minutes) one ratio is noisy: --repeats N alternates the scripts N times and ends with
the median ratio of each, the number to quote.
"""

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import dau_continuous as dau  # noqa: E402
import ddpg_baseline as ddpg  # noqa: E402


def bare_updates_per_second(script, seconds=10.0, obs_dim=3, action_dim=1, batch_size=256, dt=0.01, gamma=0.8):
    torch.use_deterministic_algorithms(True)  # as the scripts do on the CPU
    batch = (torch.randn(batch_size, obs_dim), torch.rand(batch_size, action_dim) * 2 - 1, torch.randn(batch_size),
             torch.zeros(batch_size), torch.randn(batch_size, obs_dim))  # fmt: skip
    normalizer = dau.Normalizer(obs_dim)
    actor = dau.Actor(obs_dim, action_dim, 256, normalizer)
    if script == "dau_continuous.py":
        value, advantage = dau.Value(obs_dim, 256, normalizer), dau.Advantage(obs_dim, action_dim, 256, normalizer)
        critic_parameters, lr_scale = [*value.parameters(), *advantage.parameters()], dt

        def update(optimizer):
            return dau.update(batch, value, advantage, actor, optimizer, dt, gamma)
    else:
        qf = ddpg.QNetwork(obs_dim, action_dim, 256, normalizer)
        target_qf, target_actor = (
            ddpg.QNetwork(obs_dim, action_dim, 256, normalizer),
            dau.Actor(obs_dim, action_dim, 256, normalizer),
        )
        critic_parameters, lr_scale = list(qf.parameters()), 0.01  # --ref-dt

        def update(optimizer):
            return ddpg.update(batch, qf, target_qf, actor, target_actor, optimizer, dt, gamma, lr_scale, 0.0)

    optimizer = torch.optim.RMSprop(
        [{"params": critic_parameters, "lr": 0.1 * lr_scale}, {"params": actor.parameters(), "lr": 0.03 * lr_scale}],
        alpha=1 - lr_scale, momentum=0, foreach=True,
    )  # fmt: skip
    count, start = 0, time.time()
    while time.time() - start < seconds:
        torch.stack([update(optimizer) for _ in range(50)]).cpu()  # one round's updates, as the scripts run them
        count += 50
    return count / (time.time() - start)


def loop_updates_per_second(script, dt, total_time):
    output = subprocess.run(
        [sys.executable, str(ROOT / script), "--dt", str(dt), "--total-time", str(total_time), "--eval-every", "1e9"],
        capture_output=True, text=True, check=True, cwd="/tmp",
    ).stdout  # fmt: skip
    updates, wall = re.search(r"(\d+) updates, ([\d.]+) s wall", output).groups()
    return int(updates) / float(wall)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--total-time", type=float, default=600.0)
    parser.add_argument("--repeats", type=int, default=1)
    options = parser.parse_args()
    ratios = {"dau_continuous.py": [], "ddpg_baseline.py": []}
    for _ in range(options.repeats):
        for script in ratios:
            before = bare_updates_per_second(script)
            loop = loop_updates_per_second(script, options.dt, options.total_time)
            after = bare_updates_per_second(script)
            bare = (before + after) / 2
            ratios[script].append(loop / bare)
            print(f"{script}: training loop {loop:.1f} updates/s, bare loop {bare:.1f} updates/s "
                  f"(before {before:.1f}, after {after:.1f}), ratio {loop / bare:.2f}", flush=True)  # fmt: skip
    if options.repeats > 1:
        for script, values in ratios.items():
            print(f"{script}: median ratio {statistics.median(values):.2f} over {len(values)} repeats "
                  f"(min {min(values):.2f}, max {max(values):.2f})")  # fmt: skip
