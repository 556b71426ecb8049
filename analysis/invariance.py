"""The invariance statistic: does a method give the same result at every time step? One line per environment and
algorithm label, in this form (other tools read it):

    python analysis/invariance.py --runs docs/results
    invariance CartPole-v1 DAU fine/coarse 0.59 [0.47, 0.73] slope -0.116 [-0.149, -0.081] seeds 15

    python analysis/invariance.py --runs docs/results docs/results/cartpole_value_lr_grid   # variants on one scale
    python analysis/invariance.py --runs docs/results --seeds-for 0.1   # seeds per dt for an interval of +-0.1
    python analysis/invariance.py --runs docs/results docs/results/bipedal_horizon_grid --dts 0.01 0.005  # shared
    python analysis/invariance.py --calibrate   # coverage and power on synthetic grids
    python analysis/invariance.py --runs docs/results/cartpole_horizon_grid --power-at 15 30   # seeds a dip needs

Then one line per environment and label that sees every step, not only the two ends (issues 64 and 71):

    every-step CartPole-v1 DAU 0.01: 1.45 [1.20, 1.73], 15/15 [0.70, 1.00]; 0.005: 1.13 [0.87, 1.40], 12/15 \\
        [0.44, 0.98]; 0.002: 0.90 [0.65, 1.15], 8/15 [0.21, 0.84]; 0.001: 0.85 [0.56, 1.14], 10/15 [0.31, 0.92]; \\
        0.0005: 0.67 [0.42, 0.95], 6/15 [0.12, 0.74]; departs: dt 0.01 above, dt 0.0005 below; share departs: dt \\
        0.01 above (p 0.002); seeds 15

each dt's mean score over the mean of all its dt's mean scores, with 95% intervals that hold for every dt at once
(robustness.every_step: each dt's own runs resampled, their spread floored at the pooled within-dt spread,
Bonferroni over the dt), then the runs that learn there (score at least 0.5) with their share's interval (exact
binomial, Bonferroni), the dt whose mean's interval excludes 1, and the dt whose share that learns departs, with the
p of the exact test that every dt has the same share (a dt departs only where that test finds a difference, p <
0.05, and Fisher's test of its runs against the other dt's does at 0.05 / number of dt). A split can leave the mean
where it was and move the share: the line says which of the two departs. An option is more robust than the paper's
DAU only where it does no worse at every step and better at some (compare.py's every-step verdict, on the same
intervals).

Each run's score is the mean of its evaluations over the second half of its training time, on the environment's
normalised scale (0: untrained, 1: the best mean of any algorithm and dt among the runs read); fine/coarse is the
mean score of the two finest dt over that of the two coarsest (one each with three dt or fewer), the slope the
score's change per halving of dt, each with a 95% bootstrap interval, the runs of each dt resampled within it; seeds
is the fewest seeds of any dt. An invariant method has 1 and 0. One implementation: analysis/plot.py's invariance(),
which its tables and compare.py print too. A label has "@<budget>s" where the runs read have it at several budgets.
"""

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plot
import robustness
import tyro
from archive import RefusedRuns
from robustness import COARSE_SD, DEPARTURES, EQUAL_SHARES, NULLS, calibration, every_step_calibration


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
    power_at: tuple[int, ...] = ()
    """also print, per env and label, how often the every-step interval of its worst dt would lie below 1 at these
    seeds per dt, its runs redrawn with replacement from its own runs at each dt (200 grids): the seeds a departure
    of the size and spread seen needs"""
    seeds: tuple[int, ...] = ()
    """only the runs of these seeds (two grids read at the same seeds); empty: all"""
    calibrate: bool = False
    """print the coverage and power of the intervals on synthetic grids (200 each): fine/coarse and the slope at 5, 10
    and 15 seeds; every step at 5 to 30 seeds on robustness.NULLS and DEPARTURES, beside the two intervals it
    replaced at 10 and 15; and exit"""


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
    rows = [(seeds, "floored") for seeds in (5, 10, 15, 20, 30)]
    rows += [(seeds, method) for method in ("pooled", "within") for seeds in (10, 15)]
    names = {
        "floored": "each dt's own, spread floored (every_step)",
        "pooled": "all dt's deviations pooled (before)",
        "within": "each dt's own alone",
    }
    coverage = [
        "",
        "Every step, invariant grids: the share of grids whose mean intervals all cover 1 (in brackets, where every "
        "dt has the same share that learns: whose share departs nowhere)",
        "",
        "| seeds per dt | intervals | " + " | ".join(NULLS) + " |",
        "|---" * (len(NULLS) + 2) + "|",
    ]
    power = [
        "",
        "Every step, one dt departs: the share of grids where it is found below, by the mean's interval (the dip); by "
        "the mean / by the share that learns / by either (the split)",
        "",
        "| seeds per dt | intervals | dt 0.002 at 0.57 of the others, normal | the same, bimodal | half the runs "
        "stall at dt 0.01, normal | the same, bimodal |",
        "|---|---|---|---|---|---|",
    ]
    departures = [(departure, spread) for departure in DEPARTURES for spread in ("normal, SD 64", "bimodal, 22% stall")]
    for seeds, method in rows:
        cells = []
        for spread in NULLS:
            result = every_step_calibration(seeds, spread, method=method)
            cells.append(f"{result.mean:.3f}" + (f" ({result.share:.3f})" if spread in EQUAL_SHARES else ""))
        coverage.append(f"| {seeds} | {names[method]} | " + " | ".join(cells) + " |")
        cells = []
        for departure, spread in departures:
            result = every_step_calibration(seeds, spread, departure, method=method)
            both = f" / {result.share:.3f} / {result.either:.3f}" if departure == "split" else ""
            cells.append(f"{result.mean:.3f}{both}")
        power.append(f"| {seeds} | {names[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines + coverage + power)


def seeds_for(by_dt, half_width):
    """Seeds per dt for a fine/coarse interval of +-half_width, at these runs' own per-dt means and SDs: the delta
    method's variance of a ratio of means, var(F) / C^2 + F^2 var(C) / C^4, each end the mean of its dt's means."""
    dts = sorted(by_dt, reverse=True)
    ends = robustness.pooled_ends(dts)
    coarse, fine = dts[:ends], dts[-ends:]
    mean_c = np.mean([np.mean(by_dt[dt]) for dt in coarse])
    mean_f = np.mean([np.mean(by_dt[dt]) for dt in fine])
    if mean_c <= 0:
        return None
    var_c = sum(np.var(by_dt[dt], ddof=1) for dt in coarse) / ends**2  # times 1 / n
    var_f = sum(np.var(by_dt[dt], ddof=1) for dt in fine) / ends**2
    per_seed = var_f / mean_c**2 + mean_f**2 * var_c / mean_c**4
    return max(2, math.ceil(1.96**2 * per_seed / half_width**2))


def departure_power(by_dt, seeds, grids=200, resamples=2000):
    """The share of `grids` grids of `seeds` runs per dt, drawn with replacement from each dt's own runs `by_dt`
    (normalised scores), whose every-step interval at the worst dt of `by_dt` lies below 1, and that dt."""
    worst = robustness.every_step(by_dt, resamples=2)
    if worst.relative is None:
        return None, None
    step = worst.dts[int(np.argmin(worst.relative))]
    rng = np.random.default_rng(seeds)
    below = 0
    for index in range(grids):
        grid = {dt: rng.choice(np.asarray(values), seeds) for dt, values in by_dt.items()}
        below += (step, "below") in robustness.every_step(grid, resamples=resamples, rng=index).departures()
    return step, below / grids


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
    runs = plot.load_runs(options.runs, options.env_ids, options.seeds)
    if options.dts:
        runs = at_steps(runs, options.dts)
    if not runs:
        steps = f" at --dts {' '.join(f'{dt:g}' for dt in options.dts)}" if options.dts else ""
        sys.exit(f"error: no finished runs{steps} in {' '.join(map(str, options.runs))}")
    for line in plot.invariance_lines(runs) + plot.invariance_lines(runs, robustness.every_step, plot.every_step_line):
        print(line)
    for env_id, algorithms in runs.items() if options.power_at else ():
        returns, untrained, best = plot.env_scores(algorithms)
        for algorithm in sorted(algorithms, key=lambda name: (name != "DAU", name)):
            scores = plot.normalised(returns[algorithm], untrained, best)
            shares = [(seeds, *departure_power(scores, seeds)) for seeds in options.power_at]
            if shares[0][1] is not None:
                found = ", ".join(f"{share:.2f} at {seeds} seeds" for seeds, _, share in shares)
                print(f"power {env_id} {algorithm} worst dt {shares[0][1]:g} below 1: {found}")
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
