"""The paper's robustness figure, and each folder's robustness tables, from finished runs (runs/*/run.json and
evals.csv). Run from the repository root:

    python -m analysis.plot --runs docs/results --env-ids Pendulum-v1 CartPole-v1 --out docs/figures/curves.png
    python -m analysis.plot --runs docs/results/cartpole_horizon_grid --page docs/benchmarks.md   # a folder's tables
    python -m analysis.plot --runs docs/results --algorithms DQN --out docs/figures/dqn_baseline.png  # one script's

Runs are read and labelled by harness/archive.py (DAU, DQN-unscaled, DAU+round_seconds=0.1...). One row of panels per
environment, one panel per algorithm, one curve per dt: scaled return against physical time, the mean over seeds
with the 95% bootstrap interval of that mean as a band, on the same axes for every dt and algorithm of an
environment. The tables (analysis/tables.py's robustness_table, printed, and written with --table or --page) give,
per dt, the mean over seeds of each run's score (analysis/scores.py's run_score: the mean of its evaluations over the
second half of its training time), and per algorithm the invariance statistic on the normalised score
(return - untrained) / (best - untrained), "untrained" the mean evaluation at physical time 0 over the environment's
runs and "best" the best mean run score of any algorithm and dt (1: the best seen, 0: no better than untrained):
- fine / coarse: the mean score of the two finest dt over that of the two coarsest (1: the same at every dt);
- slope per halving: the score's change each time dt halves (0: the same at every dt);
- worst / best dt: the worst dt's mean over the best's, a biased, low-power summary kept for the earlier tables.
A last row per baseline (or variant) gives, per dt, the probability that a DAU run scores above one of its runs
(Agarwal et al., NeurIPS 2021: P(X > Y) + P(X = Y) / 2 over all pairs of runs), with its interval. A second table
gives every step against the method's own level and the runs that learn (robustness.every_step; "learns": a return
of at least the environment's fixed line, scores.LEARNS). docs/benchmarks.md holds every kept grid's tables, each
between two lines that name its folder (--page), and says how to read them. Fine / coarse, the slope and every step
have t (Fieller) intervals from the dt's moderated variances (variances.moderated: no resampling); a mean's, a
probability's and worst / best's are bootstraps over runs, each dt's runs resampled on their own (scipy.stats.bootstrap,
robustness.RESAMPLES resamples, a fixed generator so that the tables redraw the same; Hesterberg's expanded
percentile interval); a cell of one run has none. analysis/invariance.py prints the lines alone, one per env and
algorithm. Under each table, the wall time of the runs per algorithm: summed over runs (a sweep with N workers
takes about 1/N of it) and per run, mean over seeds, for each dt.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import tyro

from analysis.robustness import interval
from analysis.scores import common_evaluations, load_runs
from analysis.tables import check_page, page_markers, robustness_table, shown, write_page
from harness.archive import RefusedRuns

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@dataclass
class Options:
    runs: Path = Path("runs")
    """the directory holding the runs (each runs/<run_name>/ with run.json and evals.csv)"""
    env_ids: tuple[str, ...] = ()
    """environments to show, in this order; empty: every environment found"""
    out: Path = Path("curves.png")
    """where to write the figure (PNG)"""
    table: Path | None = None
    """also write the robustness table (Markdown) here; it is always printed"""
    page: Path | None = None
    """also write the table into this Markdown page, in place of what is between its two lines that name the --runs
    folder (page_markers)"""
    algorithms: tuple[str, ...] = ()
    """show only these algorithms' panels and rows (DAU: with its variants; DQN, DDPG: either variant), as on each
    script's page; the scores are still those of the whole table. Empty: all"""


def mean_curve(curves):
    """Seeds' curves at the evaluations they all made (common_evaluations: the seeds of one dt evaluate at the same
    physical times, but a run may lack one): mean time, mean return, and the 95% bootstrap interval of the mean (the
    mean itself for a single run)."""
    rows = common_evaluations(curves)
    times = np.mean([curve.times[kept] for curve, kept in zip(curves, rows, strict=True)], axis=0)
    returns = np.array([curve.returns[kept] for curve, kept in zip(curves, rows, strict=True)])
    band = interval((returns,), np.mean, vectorized=True)
    low, high = band if band else (returns.mean(0), returns.mean(0))
    return times, returns.mean(0), low, high


def plot(runs, out, selected=()):
    runs = {env_id: {name: by_dt for name, by_dt in algorithms.items() if shown(name, selected)}
            for env_id, algorithms in runs.items()}  # fmt: skip
    runs = {env_id: algorithms for env_id, algorithms in runs.items() if algorithms}
    columns = max(len(algorithms) for algorithms in runs.values())
    figure, axes = plt.subplots(len(runs), columns, figsize=(5 * columns, 3.6 * len(runs)), squeeze=False)
    all_dts = sorted({dt for algorithms in runs.values() for by_dt in algorithms.values() for dt in by_dt})
    colors = dict(zip(all_dts, plt.cm.viridis(np.linspace(0, 0.9, len(all_dts))), strict=True))
    for row, (env_id, algorithms) in enumerate(runs.items()):
        for column, algorithm in enumerate(sorted(algorithms, key=lambda name: name != "DAU")):
            ax = axes[row, column]
            for dt, curves in sorted(algorithms[algorithm].items(), reverse=True):
                times, mean, low, high = mean_curve(curves)
                ax.plot(times, mean, color=colors[dt], label=f"dt {dt:g} (n={len(curves)})")
                ax.fill_between(times, low, high, color=colors[dt], alpha=0.15, linewidth=0)
            ax.set_title(f"{env_id}: {algorithm}")
            ax.set_xlabel("physical time (s)")
            ax.locator_params(axis="x", nbins=6)  # five-digit times: at most six ticks, or their labels touch
            ax.set_ylabel("scaled return")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
        row_axes = axes[row, : len(algorithms)]
        low = min(ax.get_ylim()[0] for ax in row_axes)
        high = max(ax.get_ylim()[1] for ax in row_axes)
        for ax in row_axes:  # the same axes for every algorithm of an environment
            ax.set_ylim(low, high)
        for ax in axes[row, len(algorithms) :]:
            ax.axis("off")
    save_figure(figure, out)


def save_figure(figure, out, dpi=110):
    """Lay the figure out and write it to `out` (PNG), making its folder."""
    figure.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=dpi)


def main(options):
    runs = load_runs(options.runs, options.env_ids)
    missing = [env_id for env_id in options.env_ids if env_id not in runs]
    if not runs or missing:
        sys.exit(f"error: no finished runs in {options.runs}/ for {', '.join(missing) or 'any environment'}")
    if options.page:
        check_page(options.page, page_markers(options.runs))
    if options.env_ids:
        runs = {env_id: runs[env_id] for env_id in options.env_ids}
    names = {name for algorithms in runs.values() for name in algorithms}
    if not any(shown(name, options.algorithms) for name in names):
        sys.exit(
            f"error: no runs of {', '.join(options.algorithms)} there; the algorithms are {', '.join(sorted(names))}"
        )
    plot(runs, options.out, options.algorithms)
    table = robustness_table(runs, options.algorithms)
    print(table)
    print(f"figure: {options.out}")
    if options.table:
        options.table.parent.mkdir(parents=True, exist_ok=True)
        options.table.write_text(table)
    if options.page:
        write_page(options.page, table, page_markers(options.runs))


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
