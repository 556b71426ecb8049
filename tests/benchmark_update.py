"""Updates per second of the real training loop against a bare loop of the same network work.

    python tests/benchmark_update.py [--dt 0.01] [--total-time 600]

The bare loop runs, per update, the same forward passes as each script's update() (same networks,
batch 256), one backward and one RMSprop step, with nothing else: no replay, no environment, no
bookkeeping. The training loop is the script itself, run end to end (acting, replay, evaluation
included). The ratio loop / bare says how close training runs to the network's own speed.
"""

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import dau_continuous as dau  # noqa: E402
import ddpg_baseline as ddpg  # noqa: E402


def bare_updates_per_second(script, seconds=10.0, obs_dim=3, action_dim=1, batch_size=256):
    obs, next_obs = torch.randn(batch_size, obs_dim), torch.randn(batch_size, obs_dim)
    action = torch.rand(batch_size, action_dim) * 2 - 1
    normalizer = dau.Normalizer(obs_dim)
    actor = dau.Actor(obs_dim, action_dim, 256, normalizer)
    if script == "dau_continuous.py":
        value, advantage = dau.Value(obs_dim, 256, normalizer), dau.Advantage(obs_dim, action_dim, 256, normalizer)
        networks = [value, advantage, actor]

        def forward():  # V(s), Abar(s,a), Abar(s,pi(s)), V(s') as in update()
            with torch.no_grad():
                value(next_obs)
            return (value(obs) + advantage(obs, action) + advantage(obs, actor(obs))).sum()
    else:
        qf = ddpg.QNetwork(obs_dim, action_dim, 256, normalizer)
        target_qf = ddpg.QNetwork(obs_dim, action_dim, 256, normalizer)
        target_actor = dau.Actor(obs_dim, action_dim, 256, normalizer)
        networks = [qf, actor]

        def forward():  # Q(s,a), Q(s,pi(s)), Q'(s',pi'(s')) as in update()
            with torch.no_grad():
                target_qf(next_obs, target_actor(next_obs))
            return qf(obs, action).sum() + qf(obs, actor(obs)).sum()

    optimizer = torch.optim.RMSprop([p for n in networks for p in n.parameters()], lr=1e-4, alpha=0.99)
    count, start = 0, time.time()
    while time.time() - start < seconds:
        optimizer.zero_grad()
        forward().backward()
        optimizer.step()
        count += 1
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
    options = parser.parse_args()
    for script in ("dau_continuous.py", "ddpg_baseline.py"):
        bare = bare_updates_per_second(script)
        loop = loop_updates_per_second(script, options.dt, options.total_time)
        print(f"{script}: training loop {loop:.1f} updates/s, bare loop {bare:.1f} updates/s, ratio {loop / bare:.2f}")
