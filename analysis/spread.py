"""What one command gives, over every run of it on file: the distribution a user draws from.

    python -m analysis.spread --runs docs/results docs/results/card --env-id HalfCheetah-v4 --dt 0.005 \\
        --out docs/figures/headline.png --page docs/reproduce.md

Every finished run of one algorithm at one environment and dt, from each of the `--runs` folders (a folder's
run per seed, as in analysis/plot.py; the same seed in two folders counts twice: another thread count or
machine gives another run). The figure: one curve per run, scaled return against physical time, over the mean of
the runs and the 95% bootstrap interval of that mean. The table: one row per run (its folder, seed, torch threads
when run.json records them, wall time, last evaluation, final return as in the robustness tables, best
evaluation), then the mean final return with its interval, the median and range, and how many runs end above
each of `--thresholds`.
"""

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import tyro

from analysis import plot, robustness, scores, tables
from harness.archive import RefusedRuns, finished_runs

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Where --page puts the table (the reproduction page's headline section).
PAGE_MARKERS = ("<!-- the table of analysis/spread.py -->", "<!-- end of the spread -->")


@dataclass
class Options:
    runs: tuple[Path, ...] = (Path("runs"),)
    """folders holding runs (each <folder>/<run_name>/ with run.json and evals.csv)"""
    env_id: str = "HalfCheetah-v4"
    """the environment of the command"""
    dt: float = 0.005
    """its time step"""
    algorithm: str = "DAU"
    """its algorithm, as harness/archive.py labels it (DAU, DDPG-unscaled, ...)"""
    last: int = 3
    """evaluations at the end of each run averaged into its final return (as in the robustness tables)"""
    thresholds: tuple[float, ...] = (0.0, 1000.0, 2000.0)
    """final returns to count the runs above"""
    out: Path = Path("spread.png")
    """where to write the figure (PNG)"""
    page: Path | None = None
    """also write the table into this Markdown page, between its lines PAGE_MARKERS"""


def runs_of_command(options):
    """[(folder, seed, run.json, Curve)] of the command's finished runs, folder by folder (each folder once), by
    seed. Exits with what is wrong if a folder is missing or the runs differ in budget or evaluation interval."""
    runs, folders = [], []
    for folder in options.runs:
        if not folder.is_dir():
            sys.exit(f"error: --runs {folder} is not a folder")
        if folder.resolve() not in folders:
            folders.append(folder.resolve())
            for (_, algorithm, dt, seed), (run_dir, run) in finished_runs(folder, (options.env_id,)).items():
                if algorithm == options.algorithm and math.isclose(dt, options.dt):
                    runs.append((folder, seed, run, scores.read_curve(run_dir, run)))
    budgets = {scores.budget(run) for _, _, run, _ in runs}
    if len(budgets) > 1:
        sys.exit(f"error: these runs differ in (total_time, eval_every): {sorted(budgets)}; give --runs folders "
                 "of one budget")  # fmt: skip
    return runs


def spread_table(runs, last, thresholds):
    """Markdown: a row per run, then the distribution of the final returns."""
    lines = ["| folder | seed | torch threads | wall (min) | last evaluation | final (last "
             f"{last}) | best evaluation |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    finals = []
    for folder, seed, run, curve in runs:
        finals.append(scores.final_return(curve, last))
        threads = run.get("machine", {}).get("torch_threads", "—")
        lines.append(f"| {folder} | {seed} | {threads} | {curve.wall_time / 60:.1f} | {curve.returns[-1]:.0f} "
                     f"| {finals[-1]:.0f} | {curve.returns.max():.0f} |")  # fmt: skip
    finals = np.array(finals)
    bounds = robustness.interval((finals,), np.mean, vectorized=True)
    lines += ["", f"Final return over {len(finals)} runs: mean {finals.mean():.0f}{tables.bracket(bounds, '.0f')}, "
              f"median {np.median(finals):.0f}, from {finals.min():.0f} to {finals.max():.0f}. Runs that end above "
              + "; ".join(f"{threshold:g}: {np.sum(finals > threshold)} of {len(finals)}"
                          for threshold in thresholds) + "."]  # fmt: skip
    return "\n".join(lines) + "\n"


def draw(runs, options):
    """Each run's curve over the mean of the runs and its 95% interval."""
    figure, ax = plt.subplots(figsize=(7, 4))
    times, mean, low, high = plot.mean_curve([curve for *_, curve in runs])
    ax.fill_between(times, low, high, color="black", alpha=0.12, linewidth=0, label="mean, 95% interval")
    ax.plot(times, mean, color="black", linewidth=2)
    colors = plt.cm.tab20(np.arange(len(runs)) % 20)
    for (folder, seed, _, curve), color in zip(runs, colors, strict=True):
        ax.plot(curve.times, curve.returns, color=color, linewidth=1, label=f"{folder}, seed {seed}")
    ax.set_title(f"{options.env_id}, {options.algorithm}, dt {options.dt:g}: every run on file (n={len(runs)})")
    ax.set_xlabel("physical time (s)")
    ax.set_ylabel("scaled return")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    plot.save_figure(figure, options.out)


def main(options):
    if options.last < 1:
        sys.exit(f"error: --last must be at least 1, got {options.last}")
    if options.page:
        tables.check_page(options.page, PAGE_MARKERS)
    runs = runs_of_command(options)
    if not runs:
        sys.exit(f"error: no finished {options.algorithm} runs of {options.env_id} at dt {options.dt:g} in "
                 f"{', '.join(map(str, options.runs))}; check --env-id, --dt and --algorithm")  # fmt: skip
    draw(runs, options)
    table = spread_table(runs, options.last, options.thresholds)
    print(table)
    print(f"figure: {options.out}")
    if options.page:
        tables.write_page(options.page, table, PAGE_MARKERS)


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
