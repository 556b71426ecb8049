"""The invariance statistic: does a method give the same result at every time step? One line per environment and
algorithm label, in this form (other tools read it):

    python sweeps/invariance.py --runs docs/results
    invariance CartPole-v1 DAU fine/coarse 0.59 [0.47, 0.73] slope -0.116 [-0.149, -0.081] seeds 15

    python sweeps/invariance.py --runs docs/results docs/results/cartpole_value_lr_grid   # variants on one scale
    python sweeps/invariance.py --runs docs/results --seeds-for 0.1   # seeds per dt for an interval of +-0.1
    python sweeps/invariance.py --runs docs/results docs/results/bipedal_horizon_grid --dts 0.01 0.005   # shared steps
    python sweeps/invariance.py --calibrate   # coverage and power on synthetic grids

Each run's score is the mean of its evaluations over the second half of its training time, on the environment's
normalised scale (0: untrained, 1: the best mean of any algorithm and dt among the runs read); fine/coarse is the
mean score of the two finest dt over that of the two coarsest (one each with three dt or fewer), the slope the
score's change per halving of dt, each with a 95% bootstrap interval, the runs of each dt resampled within it; seeds
is the fewest seeds of any dt. An invariant method has 1 and 0. One implementation: sweeps/plot.py's invariance(),
which its tables and compare.py print too. A label has "@<budget>s" where the runs read have it at several budgets.
"""

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plot
import tyro
from archive import RefusedRuns

# CartPole's spreads (docs/results, the paper's DAU at 1800 s, returns): coarse-step runs about 400 with SD 64;
# bimodal grids of runs that balance (about 480) or stall (about 120), 78% balancing, SD about 150.
UNTRAINED, BEST, LEVEL, COARSE_SD = 29.0, 450.0, 400.0, 64.0
DTS = (0.01, 0.005, 0.002, 0.001, 0.0005)


@dataclass
class Options:
    runs: tuple[Path, ...] = (Path("runs"),)
    """folders of runs (each <folder>/<run_name>/run.json), read together: one scale per environment"""
    env_ids: tuple[str, ...] = ()
    """only these environments; empty: all"""
    dts: tuple[float, ...] = ()
    """only the runs at these steps (to set a grid that lacks a step beside one that has it, on the steps both
    have); empty: all"""
    seeds_for: float | None = None
    """also print, per env and algorithm, the seeds per dt its fine/coarse interval needs to be +-this wide at its
    own spread (the delta method on its per-dt means and SDs)"""
    calibrate: bool = False
    """print the coverage and power of the interval on synthetic grids (200 each) at 5, 10 and 15 seeds, and exit"""


def synthetic_grid(rng, seeds, fine_factor=1.0, bimodal=False, sd=COARSE_SD):
    """{dt: normalised scores} of a synthetic CartPole grid: normal runs around LEVEL with SD `sd`, or bimodal ones
    (balance or stall); the two finest dt's scores times fine_factor (0.7: a method 30% worse there)."""
    grid = {}
    for index, dt in enumerate(DTS):
        if bimodal:
            returns = np.where(rng.random(seeds) < 0.78, rng.normal(480, 20, seeds), rng.normal(120, 40, seeds))
        else:
            returns = rng.normal(LEVEL, sd, seeds)
        score = (returns - UNTRAINED) / (BEST - UNTRAINED)
        grid[dt] = score * (fine_factor if index >= len(DTS) - 2 else 1.0)
    return grid


def calibration(seeds, fine_factor, bimodal, grids=200, resamples=2000, statistic=plot.invariance):
    """The share of `grids` synthetic grids whose fine/coarse interval covers 1 (coverage for an invariant method,
    1 - power for one that is not), and the same for the slope's interval and 0."""
    rng = np.random.default_rng(seeds * 1000 + int(fine_factor * 100) + bimodal)
    ratio_covers = slope_covers = 0
    for index in range(grids):
        result = statistic(synthetic_grid(rng, seeds, fine_factor, bimodal), resamples=resamples, rng=index)
        ratio_covers += result.ratio_interval[0] <= 1 <= result.ratio_interval[1]
        slope_covers += result.slope_interval[0] <= 0 <= result.slope_interval[1]
    return ratio_covers / grids, slope_covers / grids


def seeds_for(by_dt, half_width):
    """Seeds per dt for a fine/coarse interval of +-half_width, at these runs' own per-dt means and SDs: the delta
    method's variance of a ratio of means, var(F) / C^2 + F^2 var(C) / C^4, each end the mean of its dt's means."""
    dts = sorted(by_dt, reverse=True)
    ends = plot.pooled_ends(dts)
    coarse, fine = dts[:ends], dts[-ends:]
    mean_c = np.mean([np.mean(by_dt[dt]) for dt in coarse])
    mean_f = np.mean([np.mean(by_dt[dt]) for dt in fine])
    if mean_c <= 0:
        return None
    var_c = sum(np.var(by_dt[dt], ddof=1) for dt in coarse) / ends**2  # times 1 / n
    var_f = sum(np.var(by_dt[dt], ddof=1) for dt in fine) / ends**2
    per_seed = var_f / mean_c**2 + mean_f**2 * var_c / mean_c**4
    return max(2, math.ceil(1.96**2 * per_seed / half_width**2))


def calibration_table():
    lines = ["| seeds per dt | spread | invariant: fine/coarse covers 1 | slope covers 0 | 30% worse at the two "
             "finest: fine/coarse excludes 1 | slope excludes 0 |", "|---|---|---|---|---|---|"]  # fmt: skip
    for seeds in (5, 10, 15):
        for bimodal in (False, True):
            covered = calibration(seeds, 1.0, bimodal)
            missed = calibration(seeds, 0.7, bimodal)
            spread = "bimodal (balance or stall)" if bimodal else f"normal, SD {COARSE_SD:g}"
            lines.append(f"| {seeds} | {spread} | {covered[0]:.3f} | {covered[1]:.3f} | {1 - missed[0]:.3f} | "
                         f"{1 - missed[1]:.3f} |")  # fmt: skip
    return "\n".join(lines)


def at_steps(runs, dts):
    """load_runs' {env_id: {algorithm: {dt: [Curve]}}} at these steps only; an algorithm with no run there is left
    out, and so is an environment with none."""
    kept = {}
    for env_id, algorithms in runs.items():
        for algorithm, by_dt in algorithms.items():
            at = {dt: curves for dt, curves in by_dt.items() if any(math.isclose(dt, step) for step in dts)}
            if at:
                kept.setdefault(env_id, {})[algorithm] = at
    return kept


def main(options):
    if options.calibrate:
        print(calibration_table())
        return
    if options.seeds_for is not None and not options.seeds_for > 0:
        sys.exit(f"error: --seeds-for must be positive, got {options.seeds_for}")
    missing = [str(folder) for folder in options.runs if not folder.is_dir()]
    if missing:
        sys.exit(f"error: --runs {' '.join(missing)}: not a folder")
    runs = plot.load_runs(options.runs, options.env_ids)
    if options.dts:
        runs = at_steps(runs, options.dts)
    if not runs:
        steps = f" at --dts {' '.join(f'{dt:g}' for dt in options.dts)}" if options.dts else ""
        sys.exit(f"error: no finished runs{steps} in {' '.join(map(str, options.runs))}")
    for line in plot.invariance_lines(runs):
        print(line)
    if options.seeds_for is not None:
        for env_id, algorithms in runs.items():
            returns, untrained, best = plot.env_scores(algorithms)
            for algorithm in sorted(algorithms, key=lambda name: (name != "DAU", name)):
                needed = seeds_for(plot.normalised(returns[algorithm], untrained, best), options.seeds_for)
                print(f"seeds {env_id} {algorithm} +-{options.seeds_for:g}: {needed or 'nan'} per dt")


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
