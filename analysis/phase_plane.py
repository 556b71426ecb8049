"""The paper's Pendulum phase-plane figures (its Fig. 1 and supplementary Figs. 1-3) from checkpoints.

    python -m analysis.phase_plane --times 0 300 600 1800 --out docs/figures/pendulum_value.png
    python -m analysis.phase_plane --show policy --out docs/figures/pendulum_policy.png

For every algorithm (DAU, DDPG) and dt, the learned value V(s) (DDPG: Q(s, pi(s))) or policy pi(s)
over the phase plane (angle, angular velocity), at several physical times of training. Reads the
checkpoints that `--checkpoint-every` writes (the Pendulum sweep files set it) of one seed.
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import matplotlib
import numpy as np
import torch
import tyro

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import dau_continuous  # noqa: E402  (the scripts define the networks: run from the repository root)
import ddpg_baseline  # noqa: E402
from analysis.plot import save_figure  # noqa: E402
from harness.archive import RefusedRuns, label, read_run  # noqa: E402


@dataclass
class Options:
    runs: Path = Path("runs")
    """the directory holding the runs"""
    env_id: str = "Pendulum-v1"
    """an environment whose observation is (cos angle, sin angle, angular velocity)"""
    seed: int = 1
    """which seed's runs to show"""
    times: tuple[float, ...] = (0.0, 300.0, 600.0, 900.0, 1800.0)
    """physical times to show (the nearest checkpoint is used)"""
    show: Literal["value", "policy"] = "value"
    """the value function or the policy"""
    out: Path = Path("phase_plane.png")
    """where to write the figure (PNG)"""


def phase_plane(resolution=101):
    """Observations on a grid of angle in [-pi, pi] (x) and angular velocity in [-8, 8] (y)."""
    angle, velocity = np.meshgrid(np.linspace(-np.pi, np.pi, resolution), np.linspace(-8, 8, resolution))
    obs = np.stack([np.cos(angle), np.sin(angle), velocity], -1).reshape(-1, 3)
    return torch.as_tensor(obs, dtype=torch.float32), angle.shape


def evaluate_checkpoint(path, show):
    """V(s) (DDPG: Q(s, pi(s))) or pi(s) of a checkpoint, on the phase-plane grid."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    module = dau_continuous if "value" in checkpoint else ddpg_baseline
    hidden_size = checkpoint["args"]["hidden_size"]
    normalizer = module.Normalizer(3)
    normalizer.load_state_dict(checkpoint["normalizer"])
    actor = module.Actor(3, 1, hidden_size, normalizer)
    actor.load_state_dict(checkpoint["actor"])
    obs, shape = phase_plane()
    with torch.no_grad():
        if show == "policy":
            return actor(obs).reshape(shape).numpy()
        if module is dau_continuous:
            value = module.Value(3, hidden_size, normalizer)
            value.load_state_dict(checkpoint["value"])
            return value(obs).reshape(shape).numpy()
        critic = module.QNetwork(3, 1, hidden_size, normalizer)
        critic.load_state_dict(checkpoint["qf"])
        return critic(obs, actor(obs)).reshape(shape).numpy()


def find_checkpoints(runs_dir, env_id, seed):
    """{algorithm: {dt: {physical time: checkpoint path}}} for the finished runs of one seed (the newest
    run where there are several)."""
    found = {}
    for path in sorted(Path(runs_dir).glob("*/run.json"), key=lambda path: path.stat().st_mtime):
        run = read_run(path)
        if run["args"]["env_id"] != env_id or run["args"]["seed"] != seed or not run.get("completed"):
            continue
        algorithm = label(run)  # DAU, DDPG-unscaled, DDPG-scaled
        checkpoints = {float(p.name[: -len("s.pt")]): p for p in (path.parent / "checkpoints").glob("*s.pt")}
        if checkpoints:
            found.setdefault(algorithm, {})[run["dt"]] = checkpoints
    return found


def main(options):
    found = find_checkpoints(options.runs, options.env_id, options.seed)
    if not found:
        sys.exit(f"error: no finished {options.env_id} runs with checkpoints, seed {options.seed}, in {options.runs}/")
    rows = [(algorithm, dt) for algorithm in sorted(found) for dt in sorted(found[algorithm], reverse=True)]
    figure, axes = plt.subplots(
        len(rows), len(options.times), figsize=(1.9 * len(options.times), 1.7 * len(rows)), squeeze=False
    )
    for row, (algorithm, dt) in enumerate(rows):
        checkpoints = found[algorithm][dt]
        for column, wanted in enumerate(options.times):
            time = min(checkpoints, key=lambda t: abs(t - wanted))
            image = evaluate_checkpoint(checkpoints[time], options.show)
            ax = axes[row, column]
            # Each image on its own color scale (lighter = higher), as in the paper's figures.
            ax.imshow(image, origin="lower", extent=(-np.pi, np.pi, -8, 8), aspect="auto", cmap="gray")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0 or rows[row - 1][0] != algorithm:
                ax.set_title(f"t = {time:.0f} s", fontsize=8)
            if column == 0:
                ax.set_ylabel(f"{algorithm}\ndt {dt:g}", fontsize=8)
    what = "value V(s)" if options.show == "value" else "policy pi(s)"
    figure.suptitle(f"{options.env_id}: learned {what}, lighter = higher\nx: angle in [-pi, pi], y: angular velocity "
                    "in [-8, 8]", fontsize=9)  # fmt: skip
    save_figure(figure, options.out, dpi=90)
    print(f"figure: {options.out}")


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
