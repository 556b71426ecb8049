"""The invariance statistic (analysis/plot.py's invariance, analysis/invariance.py): its arithmetic, its calibration
on synthetic grids with CartPole's spreads, and the command's one line per env and algorithm."""

import functools
import re
import subprocess
import sys

import invariance
import numpy as np
import plot
import pytest
import robustness
from helpers import ROOT

LINE = re.compile(r"invariance (\S+) (\S+) fine/coarse (\S+) \[(\S+), (\S+)\] slope (\S+) \[(\S+), (\S+)\] seeds (\d+)")
STEP = r"[\d.]+: (?:\S+ \[\S+, \S+\]|\S+), \d+/\d+"
DEPARTS = r"(?:none|—|dt \S+ (?:above|below)(?:, dt \S+ (?:above|below))*)"
EVERY = re.compile(rf"every-step (\S+) (\S+) {STEP}(?:; {STEP})*; departs: {DEPARTS}; seeds \d+")


def test_fine_over_coarse_pools_the_two_finest_and_the_two_coarsest_dt():
    five = [np.array(values) for values in ([1.0, 1.0], [0.8, 0.8], [5.0, 5.0], [0.3, 0.5], [0.5, 0.5])]
    assert robustness.fine_over_coarse(*five) == pytest.approx(
        (0.4 + 0.5) / 2 / ((1.0 + 0.8) / 2)
    )  # the middle dt unused
    three = [np.array(values) for values in ([2.0], [9.0], [1.0])]
    assert robustness.fine_over_coarse(*three) == pytest.approx(0.5)  # finest over coarsest
    assert np.isnan(robustness.fine_over_coarse(np.array([-0.1]), np.array([0.5])))  # nothing learned at the coarse end


def test_the_slope_is_per_halving_of_dt():
    dts = [0.01, 0.005, 0.0025, 0.00125]
    scores = {dt: np.full(3, 1.0 - 0.1 * halvings) for halvings, dt in enumerate(dts)}
    result = robustness.invariance(scores, resamples=200)
    assert result.slope == pytest.approx(-0.1) and result.ratio == pytest.approx((0.8 + 0.7) / (1.0 + 0.9))
    assert result.seeds == 3 and result.slope_interval == pytest.approx((-0.1, -0.1))  # no spread, no width


@pytest.mark.parametrize("bimodal", [False, True], ids=["normal", "bimodal"])
def test_an_invariant_methods_interval_covers_1_at_10_seeds(bimodal):
    """200 synthetic grids of an invariant method with CartPole's spreads (SD 64, or runs that balance or stall):
    the 95% interval of fine/coarse covers 1, and the slope's covers 0, in at least 90% of them."""
    ratio_coverage, slope_coverage = robustness.calibration(10, 1.0, bimodal)
    assert ratio_coverage >= 0.9 and slope_coverage >= 0.9, (ratio_coverage, slope_coverage)


def test_a_method_30_percent_worse_at_its_finest_dt_is_told_apart_at_10_seeds():
    """With the coarse-step spread (SD 64), the interval excludes 1 in at least 80% of 200 grids."""
    ratio_coverage, slope_coverage = robustness.calibration(10, 0.7, bimodal=False)
    assert 1 - ratio_coverage >= 0.8 and 1 - slope_coverage >= 0.8, (ratio_coverage, slope_coverage)


def test_the_power_test_fails_for_an_interval_that_does_not_resample_within_dt():
    """The calibration can fail: an interval that resamples the runs of all dt together (the dt labels shuffled)
    centres on 1 whatever the method does, and the power test above would reject it."""

    def pooled(scores, resamples, rng):
        dts = sorted(scores, reverse=True)
        runs = np.concatenate([scores[dt] for dt in dts])
        sizes = np.cumsum([len(scores[dt]) for dt in dts])[:-1]
        generator = np.random.default_rng(rng)
        ratios = [
            robustness.fine_over_coarse(*np.split(generator.choice(runs, len(runs)), sizes)) for _ in range(resamples)
        ]
        return robustness.Invariance(None, tuple(np.percentile(ratios, [2.5, 97.5])), 0.0, (0.0, 0.0), 10)  # slope unused

    ratio_coverage, _ = robustness.calibration(10, 0.7, bimodal=False, grids=50, resamples=300, statistic=pooled)
    assert 1 - ratio_coverage < 0.8


def test_every_step_sets_each_dt_against_the_mean_of_all_and_counts_the_runs_that_learn():
    """Each dt's mean score over the mean of the dt's means; without spread the intervals are the points, and a dt
    below the others departs below 1 (the others, above it, above 1); a run learns at a score of 0.5 or more."""
    scores = {0.01: [1.0, 1.0], 0.005: [1.0, 1.0], 0.002: [0.5, 0.5], 0.001: [1.0, 1.0], 0.0005: [0.0, 1.0]}
    result = robustness.every_step(scores, resamples=200)
    level = (1.0 + 1.0 + 0.5 + 1.0 + 0.5) / 5
    assert result.relative == pytest.approx((1 / level, 1 / level, 0.5 / level, 1 / level, 0.5 / level))
    assert result.learned == ((2, 2), (2, 2), (2, 2), (2, 2), (1, 2)) and result.seeds == 2
    flat = robustness.every_step({dt: [0.8, 0.8, 0.8] for dt in robustness.DTS}, resamples=200)
    assert flat.relative == pytest.approx((1.0,) * 5) and flat.departures() == []
    dipped = robustness.every_step({dt: [0.4 if dt == 0.002 else 0.8] * 3 for dt in robustness.DTS}, resamples=200)
    assert dipped.departures() == [(0.01, "above"), (0.005, "above"), (0.002, "below"), (0.001, "above"),
                                   (0.0005, "above")]  # fmt: skip
    assert robustness.every_step({0.01: [-0.1], 0.001: [0.0]}).relative is None  # nothing learned on average: no level


@pytest.mark.parametrize("bimodal", [False, True], ids=["normal", "bimodal"])
def test_an_invariant_methods_every_step_intervals_all_cover_1_at_10_seeds(bimodal):
    """200 synthetic invariant grids: every dt's interval covers 1 at once in at least 90% of them, with CartPole's
    spreads (SD 64, or runs that balance or stall)."""
    assert robustness.every_step_calibration(10, bimodal) >= 0.9


def test_every_step_finds_the_dip_and_the_split_seen_on_cartpole():
    """Power, normal spread: the horizon's dip at dt 0.002 (0.57 of its other steps) is found below 1 in at least 90%
    of grids at 10 seeds; half the runs stalling at dt 0.01 in at least 80% at 15 seeds."""
    assert robustness.every_step_calibration(10, False, "dip") >= 0.9
    assert robustness.every_step_calibration(15, False, "split") >= 0.8


def test_every_steps_coverage_test_fails_for_intervals_not_made_simultaneous():
    """The coverage test can fail: plain 95% intervals at each of the five dt (no Bonferroni) all cover 1 in fewer
    than 90% of bimodal invariant grids at 15 seeds, so a method would be said to dip where it does not."""
    assert robustness.every_step_calibration(15, True, simultaneous=False) < 0.9


def test_the_power_at_more_seeds_is_drawn_from_the_runs_own_spread():
    """departure_power: runs redrawn from each dt's own; a clear dip (half the level, little spread) is found at
    every draw, the same dip hidden in a wide spread less often, and more often with more seeds."""
    rng = np.random.default_rng(1)
    clear = {dt: rng.normal(0.4 if dt == 0.002 else 0.8, 0.02, 10) for dt in robustness.DTS}
    assert invariance.departure_power(clear, 5, grids=50, resamples=500) == (0.002, 1.0)
    wide = {dt: np.repeat([0.1, 1.0], [6, 4] if dt == 0.002 else [3, 7]) for dt in robustness.DTS}  # stall or balance
    step, few = invariance.departure_power(wide, 5, grids=100, resamples=500)
    assert step == 0.002 and few < invariance.departure_power(wide, 40, grids=100, resamples=500)[1]
    assert few < 0.8


def test_the_seeds_needed_grow_with_the_spread_and_shrink_with_the_width():
    rng = np.random.default_rng(0)
    narrow = {dt: rng.normal(1.0, 0.1, 20) for dt in robustness.DTS}
    wide = {dt: rng.normal(1.0, 0.4, 20) for dt in robustness.DTS}
    assert invariance.seeds_for(narrow, 0.1) < invariance.seeds_for(wide, 0.1) < invariance.seeds_for(wide, 0.05)


def test_the_command_prints_one_line_per_env_and_label_of_the_archive():
    result = subprocess.run([sys.executable, "analysis/invariance.py", "--runs", "docs/results"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("invariance ")]
    every = [line for line in result.stdout.splitlines() if line.startswith("every-step ")]
    assert len(lines) + len(every) == len(result.stdout.splitlines())
    assert all(LINE.fullmatch(line) for line in lines), lines
    assert all(EVERY.fullmatch(line) for line in every), every
    found = {LINE.fullmatch(line).group(1, 2) for line in lines}
    runs = plot.load_runs(ROOT / "docs" / "results")
    assert found == {(env_id, label) for env_id, algorithms in runs.items() for label in algorithms}
    assert found == {EVERY.fullmatch(line).group(1, 2) for line in every}
    assert len(found) == len(lines) and ("CartPole-v1", "DQN-unscaled") in found and ("Pendulum-v1", "DAU") in found
    example = [line.strip() for line in invariance.__doc__.splitlines() if line.strip().startswith("invariance ")]
    assert example and set(example) <= set(lines), example  # the docstring's example is what the command prints
    every_example = invariance.__doc__.split("    every-step ")[1].split("\n\n")[0]
    assert "every-step " + " ".join(every_example.replace("\\\n", " ").split()) in every
    missing = subprocess.run([sys.executable, "analysis/invariance.py", "--runs", "no/such/folder"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode != 0 and "no/such/folder" in missing.stderr and "Traceback" not in missing.stderr


def test_dts_reads_only_the_runs_at_those_steps(capsys):
    """--dts: the statistic of the runs at the steps given, on their own scale, as if no other step had run; a step
    with no runs is refused."""
    grid = ROOT / "docs" / "results" / "pendulum_horizon_grid"  # five steps
    options = invariance.Options(runs=(grid,), dts=(0.01, 0.001))
    invariance.main(options)
    printed = capsys.readouterr().out.splitlines()
    runs = plot.load_runs(grid)
    shared = {env_id: {algorithm: {dt: by_dt[dt] for dt in (0.01, 0.001)} for algorithm, by_dt in algorithms.items()}
              for env_id, algorithms in runs.items()}  # fmt: skip
    every = functools.partial(plot.invariance_lines, statistic=robustness.every_step, line=plot.every_step_line)
    assert printed == plot.invariance_lines(shared) + every(shared) != plot.invariance_lines(runs) + every(runs)
    with pytest.raises(SystemExit, match="no finished runs at --dts 0.003"):
        invariance.main(invariance.Options(runs=options.runs, dts=(0.003,)))
