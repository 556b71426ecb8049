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

Where the rest goes: the script's own "s of it on evaluations" (those at t=0 and at the end) and the same
number of steps of the same 256 training envs (the scripts' make_vector_env, harness/envs.py), timed alone just after
the script. Updates at the bare rate, evaluations and env stepping are what a run cannot do without; their
share bounds the ratio from above (the "ceiling"): no change to the scripts' own code (acting, replay,
bookkeeping, "the rest") can lift the ratio past it without changing what the run computes.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # as the scripts set it: deterministic cuBLAS

ROOT = Path(__file__).resolve().parent.parent
# The checkout's root, for a checkout whose packages are not installed (`pip install -e .` makes it unnecessary).
sys.path.insert(0, str(ROOT))
import dau_continuous as dau  # noqa: E402
import ddpg_baseline as ddpg  # noqa: E402
import harness.envs  # noqa: E402
import harness.gpu  # noqa: E402


def bare_updates_per_second(
    script, seconds=10.0, obs_dim=3, action_dim=1, batch_size=256, dt=0.01, gamma=0.8, device="cpu", graph=False,
    profile=False, compiled=False,
):  # fmt: skip
    """`graph`: on CUDA, each round replayed as one CUDA graph, as the scripts run there (harness.gpu.graphed).
    `profile`: instead of a rate, one round op by op on CUDA under the profiler: its kernels and their summed
    device microseconds, each per update. `compiled`: the update through torch.compile (fused kernels; the
    scripts do not compile), compiled before anything is timed, profiled or captured."""
    device = torch.device(device)
    torch.use_deterministic_algorithms(True)  # as the scripts do
    torch.utils.deterministic.fill_uninitialized_memory = device.type == "cpu"
    batch = (torch.randn(batch_size, obs_dim), torch.rand(batch_size, action_dim) * 2 - 1, torch.randn(batch_size),
             torch.zeros(batch_size), torch.randn(batch_size, obs_dim))  # fmt: skip
    batch = [field.to(device) for field in batch]
    normalizer = dau.Normalizer(obs_dim)
    actor = dau.Actor(obs_dim, action_dim, 256, normalizer)
    if script == "dau_continuous.py":
        value, advantage = dau.Value(obs_dim, 256, normalizer), dau.Advantage(obs_dim, action_dim, 256, normalizer)
        critic_parameters, lr_scale = [*value.parameters(), *advantage.parameters()], dt
        for network in (value, advantage, actor):
            network.to(device)

        def update(optimizer):
            return dau.update(batch, value, advantage, actor, optimizer, dt, gamma)
    else:
        qf = ddpg.QNetwork(obs_dim, action_dim, 256, normalizer)
        target_qf, target_actor = (
            ddpg.QNetwork(obs_dim, action_dim, 256, normalizer),
            dau.Actor(obs_dim, action_dim, 256, normalizer),
        )
        critic_parameters, lr_scale = list(qf.parameters()), 0.01  # --ref-dt
        for network in (qf, target_qf, actor, target_actor):
            network.to(device)

        def update(optimizer):
            return ddpg.update(batch, qf, target_qf, actor, target_actor, optimizer, dt, gamma, lr_scale, 0.0)

    optimizer = torch.optim.RMSprop(
        [{"params": critic_parameters, "lr": 0.1 * lr_scale}, {"params": actor.parameters(), "lr": 0.03 * lr_scale}],
        alpha=1 - lr_scale, momentum=0, foreach=True, capturable=device.type == "cuda",
    )  # fmt: skip
    if compiled:
        update = torch.compile(update)
        update(optimizer)  # the compilation, untimed (one update more than the others: a rate, not a run)

    def train_round(batches):  # one round's updates, as the scripts run them (here on one fixed batch)
        return torch.stack([update(optimizer) for _ in range(50)])

    if profile:
        train_round(batch).cpu()  # the optimizer's lazy state, cuBLAS's handles: not in the count
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
            train_round(batch).cpu()
        kernels = [
            event
            for event in profiler.events()
            if event.device_type == torch.autograd.DeviceType.CUDA and not event.name.startswith("Memcpy DtoH")
        ]  # kernels, memsets, device copies; not the stats' copy back
        if not kernels:
            raise RuntimeError("the profiler saw no CUDA kernels (is CUPTI there?)")
        return len(kernels) / 50, sum(event.time_range.elapsed_us() for event in kernels) / 50
    if graph:
        train_round = harness.gpu.graphed(train_round, torch.device("cuda"))
        train_round(batch).cpu()  # the first round op by op and the capture, untimed
    count, start = 0, time.time()
    while time.time() - start < seconds:
        train_round(batch).cpu()
        count += 50
    return count / (time.time() - start)


def env_stepping_seconds(dt, vector_steps, num_envs=dau.Args.num_envs, seed=1):
    """Seconds for `vector_steps` steps of the scripts' training envs (Pendulum, SAME_STEP autoreset) alone."""
    envs = harness.envs.make_vector_env(SimpleNamespace(env_id="Pendulum-v1", time_limit=None), dt, num_envs, seed)
    envs.reset(seed=seed)
    actions = np.random.default_rng(seed).uniform(-2, 2, (vector_steps, num_envs, 1)).astype(np.float32)
    start = time.time()
    for action in actions:
        envs.step(action)
    return time.time() - start


def time_script(script, dt, total_time):
    """Run the script end to end; return its updates, vector env steps, wall seconds and the seconds of them spent on
    evaluations (run.json's eval_wait_time: at once, as on the CPU by default, the evaluations' own time)."""
    output = subprocess.run(
        [sys.executable, str(ROOT / script), "--dt", str(dt), "--total-time", str(total_time), "--eval-every", "1e9"],
        capture_output=True, text=True, check=True, cwd="/tmp",
    ).stdout  # fmt: skip
    match = re.search(r"\((\d+) env steps, (\d+) updates, ([\d.]+) s wall, ([\d.]+) s of it on evaluations\)", output)
    env_steps, updates, wall, evaluating = match.groups()
    return int(updates), int(env_steps) // dau.Args.num_envs, float(wall), float(evaluating)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--total-time", type=float, default=600.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--gpu", action="store_true", help="the bare loop only, on CUDA (docs/common.md, On a GPU)")
    options = parser.parse_args()
    scripts = ("dau_continuous.py", "ddpg_baseline.py")
    if options.gpu:  # HalfCheetah's sizes (the headline command)
        # What bounds a graph: its kernels run one after another, so their summed device time is its least time per
        # update. Profiled before any graph is captured, and CUPTI kept loaded (PyTorch's own workaround for graphs
        # after a teardown). Then the same through torch.compile, after the scripts' own (which do not compile):
        # how many kernels fusion takes off.
        os.environ.setdefault("TEARDOWN_CUPTI", "0")

        def measure(script, compiled, **kind):
            """One measurement at HalfCheetah's sizes; a failed compilation is printed whole (a finding), not fatal."""
            try:
                return bare_updates_per_second(script, obs_dim=17, action_dim=6, dt=0.005, device="cuda",
                                               compiled=compiled, **kind)  # fmt: skip
            except Exception:
                if not compiled:
                    raise
                print(f"{script}, compiled, {kind}: {traceback.format_exc()}", flush=True)

        configurations = [(script, compiled) for compiled in (False, True) for script in scripts]
        profiles = {configuration: measure(*configuration, seconds=0, profile=True) for configuration in configurations}
        for (script, compiled), profile in profiles.items():
            name = f"{script}{', compiled' if compiled else ''} on {torch.cuda.get_device_name()}"
            if profile is None:
                continue  # its compilation failed, printed above
            kernels, microseconds = profile
            print(f"{name}: an update is {kernels:.0f} kernels, {microseconds:.0f} us of kernel time (so at most "
                  f"{1e6 / microseconds:.0f} updates/s as a graph)", flush=True)  # fmt: skip
            rates = {how: measure(script, compiled, seconds=5.0, graph=graph)
                     for how, graph in (("op by op", False), ("as CUDA graphs", True))}  # fmt: skip
            print(f"{name}: " + ", ".join(f"{rate:.0f} updates/s {how} ({1e6 / rate:.0f} us an update)"
                                          for how, rate in rates.items() if rate), flush=True)  # fmt: skip
        sys.exit(0)
    ratios = {script: [] for script in scripts}
    ceilings = {script: [] for script in ratios}
    for _ in range(options.repeats):
        for script in ratios:
            before = bare_updates_per_second(script)
            updates, vector_steps, wall, evaluating = time_script(script, options.dt, options.total_time)
            stepping = env_stepping_seconds(options.dt, vector_steps)
            after = bare_updates_per_second(script)
            bare = (before + after) / 2
            loop, updating = updates / wall, updates / bare  # updating: the updates' seconds at the bare rate
            ratios[script].append(loop / bare)
            ceilings[script].append(updating / (updating + evaluating + stepping))
            print(f"{script}: training loop {loop:.1f} updates/s, bare loop {bare:.1f} updates/s "
                  f"(before {before:.1f}, after {after:.1f}), ratio {loop / bare:.2f}\n"
                  f"  wall {wall:.1f} s = updates at the bare rate {updating:.1f} s ({updating / wall:.0%}) "
                  f"+ evaluations {evaluating:.1f} s ({evaluating / wall:.0%}) + env stepping alone {stepping:.1f} s "
                  f"({stepping / wall:.0%}) + the rest {wall - updating - evaluating - stepping:.1f} s; "
                  f"ceiling {ceilings[script][-1]:.2f}", flush=True)  # fmt: skip
    if options.repeats > 1:
        for script, values in ratios.items():
            print(f"{script}: median ratio {statistics.median(values):.2f} over {len(values)} repeats "
                  f"(min {min(values):.2f}, max {max(values):.2f}), median ceiling "
                  f"{statistics.median(ceilings[script]):.2f}")  # fmt: skip
