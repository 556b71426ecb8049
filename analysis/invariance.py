"""The invariance statistic: does a method give the same result at every time step? One line per environment and
algorithm label, in this form (other tools read it), run from the repository root:

    python -m analysis.invariance --runs docs/results
    invariance CartPole-v1 DAU fine/coarse 0.59 [0.47, 0.72] slope -0.116 [-0.152, -0.079] seeds 15

    python -m analysis.invariance --runs docs/results docs/results/cartpole_value_lr_grid   # variants on one scale
    python -m analysis.invariance --runs docs/results --seeds-for 0.1   # seeds per dt for an interval of +-0.1
    python -m analysis.invariance --runs docs/results docs/results/bipedal_horizon_grid --dts 0.01 0.005  # shared
    python -m analysis.invariance --calibrate   # coverage and power on synthetic grids
    python -m analysis.invariance --runs docs/results/cartpole_horizon_grid --power-at 15 30   # seeds a dip needs

Then one line per environment and label that sees every step, not only the two ends (issues 64 and 71):

    every-step CartPole-v1 DAU 0.01: 1.45 [1.23, 1.68], 15/15 [0.70, 1.00]; 0.005: 1.13 [0.90, 1.36], 12/15 \\
        [0.44, 0.98]; 0.002: 0.90 [0.67, 1.13], 7/15 [0.16, 0.79]; 0.001: 0.85 [0.58, 1.10], 10/15 [0.31, 0.92]; \\
        0.0005: 0.67 [0.44, 0.90], 6/15 [0.12, 0.74]; departs: dt 0.01 above, dt 0.0005 below; share departs: dt \\
        0.01 above (p 0.001); seeds 15

each dt's mean score over the mean of all its dt's mean scores, with 95% intervals that hold for every dt at once
(robustness.every_step: Fieller's interval from each dt's variance moderated toward the others', Bonferroni over the
dt), then the runs that learn there (a return at least the environment's fixed line, scores.LEARNS) with their
share's interval (exact binomial, Bonferroni), the dt whose mean's interval excludes 1, and the dt whose share that
learns departs, with the p of the exact test that every dt has the same share (a dt departs only where that test
finds a difference, p < 0.05, and Fisher's test of its runs against the other dt's does at 0.05 / number of dt). A
split can leave the mean where it was and move the share: the line says which of the two departs. Last, one line
per environment and label with the verdict's words (robustness.verdict: one rule from the two lines' numbers):

    verdict CartPole-v1 DAU: 28% to 53% lower at the finest steps

An option is more robust than the paper's DAU only where it does no worse at every step and better at some
(compare.py's every-step verdict, on the same intervals).

Each run's score is the mean of its evaluations over the second half of its training time, on the environment's
normalised scale (0: untrained, 1: the best mean of any algorithm and dt among the runs read); fine/coarse is the
mean score of the two finest dt over that of the two coarsest (one each with three dt or fewer), the slope the
score's change per halving of dt, each with a 95% interval (Fieller's and t, from the dt's moderated variances: no
resampling, so the lines are the same whatever number of resamples the tables' cells draw); seeds is the fewest seeds
of any dt. An invariant method has 1 and 0. One implementation: analysis/robustness.py's invariance(), which
analysis/tables.py's tables and compare.py print too. A label has "@<budget>s" where the runs read have it at
several budgets. The lines print without matplotlib (analysis/tables.py, analysis/scores.py).
"""

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from analysis import robustness
from analysis.calibration import calibration_table
from analysis.scores import env_scores, learns_score, load_runs, normalised
from analysis.tables import invariance_lines, ordered
from harness.archive import RefusedRuns


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
    """print the coverage and power of the intervals on synthetic grids (analysis/calibration.py; it takes minutes):
    fine/coarse and the slope at 5, 10 and 15 seeds and every step at 5 to 30 seeds on its NULLS and DEPARTURES, 1000
    grids a cell; beside them limma's variances alone, the pooled t and each dt's own variance at 5, 10 and 15, 200
    grids a cell; and exit"""


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


def departure_power(by_dt, seeds, line, grids=200):
    """The share of `grids` grids of `seeds` runs per dt, drawn with replacement from each dt's own runs `by_dt`
    (normalised scores), whose every-step interval at the worst dt of `by_dt` lies below 1, and that dt (`line`: the
    environment's line for "learns" on that scale)."""
    worst = robustness.every_step(by_dt, line)
    if worst.relative is None:
        return None, None
    step = worst.dts[int(np.argmin(worst.relative))]
    rng = np.random.default_rng(seeds)
    below = 0
    for _ in range(grids):
        grid = {dt: rng.choice(np.asarray(values), seeds) for dt, values in by_dt.items()}
        below += (step, "below") in robustness.every_step(grid, line).departures()
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
        for line in calibration_table():
            print(line, flush=True)
        return
    if options.seeds_for is not None and not options.seeds_for > 0:
        sys.exit(f"error: --seeds-for must be positive, got {options.seeds_for}")
    missing = [str(folder) for folder in options.runs if not folder.is_dir()]
    if missing:
        sys.exit(f"error: --runs {' '.join(missing)}: not a folder")
    runs = load_runs(options.runs, options.env_ids, options.seeds)
    if options.dts:
        runs = at_steps(runs, options.dts)
    if not runs:
        steps = f" at --dts {' '.join(f'{dt:g}' for dt in options.dts)}" if options.dts else ""
        sys.exit(f"error: no finished runs{steps} in {' '.join(map(str, options.runs))}")
    for line in invariance_lines(runs):
        print(line)
    for env_id, algorithms in runs.items() if options.power_at else ():
        returns, untrained, best = env_scores(algorithms)
        for algorithm in ordered(algorithms):
            scores = normalised(returns[algorithm], untrained, best)
            line = learns_score(env_id, untrained, best)
            shares = [(seeds, *departure_power(scores, seeds, line)) for seeds in options.power_at]
            if shares[0][1] is not None:
                found = ", ".join(f"{share:.2f} at {seeds} seeds" for seeds, _, share in shares)
                print(f"power {env_id} {algorithm} worst dt {shares[0][1]:g} below 1: {found}")
    if options.seeds_for is not None:
        for env_id, algorithms in runs.items():
            returns, untrained, best = env_scores(algorithms)
            for algorithm in ordered(algorithms):
                needed = seeds_for(normalised(returns[algorithm], untrained, best), options.seeds_for)
                print(f"seeds {env_id} {algorithm} +-{options.seeds_for:g}: {needed or 'nan'} per dt")


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
