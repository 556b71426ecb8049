"""Our kept runs drawn in the layout of the paper's results figure, to set beside it.

    python -m analysis.paper_layout   # docs/figures/paper_layout.png from docs/results, docs/results/cartpole_12600

The paper's figure (`docs/imgs/full_results_unscaled.png` in the authors' repository,
https://github.com/ctallec/continuous-rl/blob/master/docs/imgs/full_results_unscaled.png; analysis/paper_figure.py
reads it) has five panels, Pendulum, Bipedal Walker, Cartpole, Ant and Cheetah: scaled return against physical
hours (summed over the parallel environments), DAU in red shades and the unscaled baseline in blue, each curve's
colour its dt on a log scale (two colour bars, 5e-4 to 5e-2), a mean line over a translucent band. This draws
ours the same way: the paper scripts' default runs (harness/archive.py's labels DAU, DDPG-unscaled and
DQN-unscaled), per dt the mean over seeds with the 95% bootstrap interval of that mean as its band (the paper's
band is a smoothed spread over time), colours as the authors' plotting code sets them (matplotlib's Reds and
Blues over log dt, normalised over log 5e-4 - 3 to log 5e-2 + 0.1), the finest dt drawn first as theirs. Each panel
ends at our budget, and says the paper's axis beside it: CartPole's runs come from `--cartpole` (12600 s, the
paper's 3.5 h), the others from `--results` (the top-level grids).
"""

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import matplotlib
import numpy as np
import tyro

from analysis.plot import mean_curve
from analysis.scores import load_runs
from harness.archive import RefusedRuns

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DT_RANGE = (5e-4, 5e-2)  # the colour bars' ends, the paper's
LABELS = ("DAU", "DDPG-unscaled", "DQN-unscaled")  # the paper scripts' default runs
# A DDPG grid made before issue 84 changed the unscaled actor's default rate is labelled with its old rate; a panel
# without a DDPG-unscaled grid draws it in that place, and its note says so.
OLD_ACTOR = re.compile(r"DDPG-unscaled\+policy_learning_rate=([\d.]+)")  # that label and no other option


class Panel(NamedTuple):
    """One panel of the paper's figure: the environment we run for it, its title there, and its x axis (hours)."""

    env_id: str
    title: str
    paper_hours: float


PANELS = (
    Panel("Pendulum-v1", "Pendulum", 1.7),
    Panel("BipedalWalker-v3", "Bipedal Walker", 17.0),
    Panel("CartPole-v1", "Cartpole", 3.5),
    Panel("Ant-v4", "Ant", 140.0),
    Panel("HalfCheetah-v4", "Cheetah", 140.0),
)


@dataclass
class Options:
    results: Path = Path("docs/results")
    """the folder of the kept grids (every panel's runs but CartPole's)"""
    cartpole: Path = Path("docs/results/cartpole_12600")
    """the folder of CartPole's runs (the longest budget kept: the paper's 3.5 h)"""
    out: Path = Path("docs/figures/paper_layout.png")
    """where to write the figure (PNG)"""
    dpi: int = 85
    """the figure's resolution"""


def colour(algorithm, dt):
    """A curve's colour as the authors' code gives it: Reds for DAU, Blues for a baseline, at log dt."""
    norm = matplotlib.colors.Normalize(vmin=np.log(DT_RANGE[0]) - 3, vmax=np.log(DT_RANGE[1]) + 0.1)
    return matplotlib.colormaps["Reds" if algorithm == "DAU" else "Blues"](norm(np.log(dt)))


def kept_runs(results, cartpole):
    """[(Panel, {label: {dt: [Curve, one per seed]}})] of the paper's five panels, the labels of LABELS only; and
    the labels found but not drawn, {env_id: [label]}."""
    panels, left_out = [], {}
    for panel in PANELS:
        folder = cartpole if panel.env_id == "CartPole-v1" else results
        runs = load_runs(folder, [panel.env_id], need_lines=False).get(panel.env_id, {})
        drawn = [label for label in runs if label in LABELS or (OLD_ACTOR.fullmatch(label) and LABELS[1] not in runs)]
        panels.append((panel, {label: runs[label] for label in sorted(drawn)}))
        left_out[panel.env_id] = sorted(label for label in runs if label not in drawn)
    return panels, left_out


def budget_hours(runs):
    """The longest budget of a panel's runs ({label: {dt: [Curve]}}), in hours; None without runs."""
    budgets = [curve.total_time for by_dt in runs.values() for curves in by_dt.values() for curve in curves]
    return max(budgets) / 3600 if budgets else None


def paper_note(panel, hours, seeds, labels=()):
    """The panel's note: our budget beside the paper's axis, the seeds per curve (their fewest and most), and a
    DDPG drawn at its old actor rate (OLD_ACTOR, one of `labels`)."""
    counts = f"{min(seeds)}" if min(seeds) == max(seeds) else f"{min(seeds)}-{max(seeds)}"
    seeds = f"{counts} seed" + ("" if max(seeds) == 1 else "s")
    if hours is None:
        return f"no kept runs; paper's axis {panel.paper_hours:g} h"
    if abs(hours - panel.paper_hours) <= 0.02 * panel.paper_hours:
        axis = f"paper's axis the same, {panel.paper_hours:g} h"
    else:
        axis = f"paper's axis {panel.paper_hours:g} h" + (" \u2192" if panel.paper_hours > hours else "")
    old = [match.group(1) for label in labels if (match := OLD_ACTOR.fullmatch(label))]
    return f"ours {hours:.2g} h, {seeds}; {axis}" + (f"\nDDPG's old actor rate, {old[0]} dt0" if old else "")


def draw_bars(figure, box):
    """The two colour bars in the paper's place (the lower right), the baseline's above DAU's, as its legend."""
    left, bottom, width, height = box
    cells = np.linspace(np.log(DT_RANGE[0]), np.log(DT_RANGE[1]), 50)
    for place, (algorithm, name) in enumerate((("DDPG", "DDPG / DQN"), ("DAU", "DAU"))):
        ax = figure.add_axes((left + 0.3 * width, bottom + height * (0.55 - 0.35 * place), 0.6 * width, height * 0.1))
        ax.imshow(np.array([colour(algorithm, np.exp(value)) for value in cells])[np.newaxis], aspect="auto")
        ax.set_xticks([0, len(cells) - 1], [f"{DT_RANGE[0]:.2e}", f"{DT_RANGE[1]:.2e}"], fontsize=7, color="dimgrey")
        ax.set_yticks([])
        ax.tick_params(length=0)
        ax.grid(False)
        ax.set_ylabel(name, rotation=0, ha="right", va="center", color="dimgrey")
        if place == 1:
            ax.set_xlabel("Time discretization (log scale)", fontsize=8, color="dimgrey")


def layout(panels):
    """The figure: panels [(Panel, {label: {dt: [Curve]}})] in the paper's places (two rows of three, the last
    place the colour bars), each panel's x axis our budget in hours with the paper's axis said in its note."""
    with plt.style.context("ggplot"):
        figure, axes = plt.subplots(2, 3, figsize=(11, 6.4))
        for ax, (panel, runs) in zip(axes.flat, panels, strict=False):
            curves = sorted(((dt, label, by_dt[dt]) for label, by_dt in runs.items() for dt in by_dt),
                            key=lambda item: (item[0], item[1]))  # fmt: skip
            for dt, label, group in curves:
                times, mean, low, high = mean_curve(group)
                hours = times / 3600
                ax.plot(hours, mean, color=colour(label, dt), linewidth=1)
                ax.fill_between(hours, low, high, facecolor=colour(label, dt), alpha=0.2, linewidth=0)
            hours = budget_hours(runs)
            if hours:
                ax.set_xlim(0, hours)
            seeds = [len(group) for _, _, group in curves] or [0]
            ax.text(0.98, 0.03, paper_note(panel, hours, seeds, runs), transform=ax.transAxes, ha="right",
                    va="bottom", fontsize=8, color="dimgrey")  # fmt: skip
            ax.set_title(panel.title, color="dimgrey")
            ax.set_xlabel("Physical time (hours)")
            if ax in axes[:, 0]:
                ax.set_ylabel("Scaled return")
        axes[1, 2].axis("off")
        figure.tight_layout()
        draw_bars(figure, axes[1, 2].get_position().bounds)
    return figure


def main(options):
    try:
        panels, left_out = kept_runs(options.results, options.cartpole)
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
    figure = layout(panels)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(options.out, dpi=options.dpi)
    for panel, runs in panels:
        hours = budget_hours(runs)
        drawn = "; ".join(f"{label} dt {', '.join(f'{dt:g}' for dt in sorted(by_dt, reverse=True))} "
                          f"({', '.join(str(len(by_dt[dt])) for dt in sorted(by_dt, reverse=True))} seeds)"
                          for label, by_dt in runs.items()) or "no runs"  # fmt: skip
        budget = "—" if hours is None else f"{hours:.2f} h"
        others = f"; not drawn: {', '.join(left_out[panel.env_id])}" if left_out[panel.env_id] else ""
        print(f"{panel.title}: ours {budget}, the paper's axis {panel.paper_hours:g} h: {drawn}{others}")
    print(f"figure: {options.out}")


if __name__ == "__main__":
    main(tyro.cli(Options))
