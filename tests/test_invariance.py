"""The invariance statistic (analysis/plot.py's invariance, analysis/invariance.py): its arithmetic, its calibration
on synthetic grids with CartPole's spreads, and the command's one line per env and algorithm."""

import functools
import math
import re
import subprocess
import sys

import invariance
import numpy as np
import plot
import pytest
import robustness
from helpers import ROOT
from scipy import stats

LINE = re.compile(r"invariance (\S+) (\S+) fine/coarse (\S+) \[(\S+), (\S+)\] slope (\S+) \[(\S+), (\S+)\] seeds (\d+)")
STEP = r"[\d.]+: (?:\S+ \[\S+, \S+\]|\S+), \d+/\d+ \[\S+, \S+\]"
DEPARTS = r"(?:none|—|dt \S+ (?:above|below)(?:, dt \S+ (?:above|below))*)"
SHARE = r"(?:none|dt \S+ (?:above|below)(?:, dt \S+ (?:above|below))*) \(p (?:< 0\.001|[01]\.\d{3})\)"
EVERY = re.compile(
    rf"every-step (\S+) (\S+) {STEP}(?:; {STEP})*; departs: {DEPARTS}; share departs: {SHARE}; seeds \d+"
)


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
        return robustness.Invariance(
            None, tuple(np.percentile(ratios, [2.5, 97.5])), 0.0, (0.0, 0.0), 10
        )  # slope unused

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


def test_a_dt_whose_runs_agree_gets_at_least_the_pooled_spread_and_a_wide_one_its_own():
    """The floor, ten runs a dt: at dt 0.01 runs that agree to within 0.04, beside steps whose runs spread over 0.8,
    get an interval about as wide as a middle step's (resampling their own runs alone gives less than half of that:
    "within", the other steps' spread still in it through the level); and a step whose runs spread over 1.2 among
    steps that agree keeps its own, wider interval (the residual bootstrap gives it the others' narrow spread:
    "pooled")."""
    tight, spread, wide = np.linspace(0.78, 0.82, 10), np.linspace(0.4, 1.2, 10), np.linspace(0.2, 1.4, 10)

    def width(scores, method, dt):
        low, high = robustness.every_step(scores, resamples=2000, method=method).intervals[robustness.DTS.index(dt)]
        return high - low

    agree = {dt: tight if dt == 0.01 else spread for dt in robustness.DTS}
    assert width(agree, "floored", 0.01) > 0.7 * width(agree, "floored", 0.002)
    assert width(agree, "floored", 0.01) > 2 * width(agree, "within", 0.01)
    alone = {dt: wide if dt == 0.002 else tight for dt in robustness.DTS}
    assert width(alone, "floored", 0.002) > 1.5 * width(alone, "pooled", 0.002)
    assert width(alone, "floored", 0.002) >= width(alone, "within", 0.002)  # a floor, never narrower


def test_the_share_that_learns_has_binomial_intervals_and_an_exact_test_across_dt():
    """Clopper-Pearson intervals of each dt's share (0 of n: [0, 1 - (a/2)^(1/n)]; n of n: [(a/2)^(1/n), 1]), the
    exact test across dt (Fisher's two-sided test for two dt), and the dt whose share departs: only where the test
    across dt finds the shares differ, and a dt's runs differ from the other dt's runs at 0.05 / number of dt."""
    tail = 0.05 / 5 / 2
    intervals = robustness.share_intervals(((0, 5), (5, 5)), 1 - 0.05 / 5)
    assert np.ravel(intervals) == pytest.approx([0.0, 1 - tail ** (1 / 5), tail ** (1 / 5), 1.0])
    table = ((3, 10), (9, 11))
    exact = stats.fisher_exact([[3, 7], [9, 2]]).pvalue
    assert robustness.share_test(table) == pytest.approx(exact) and 0.01 < exact < 0.05
    assert robustness.share_test(((4, 5), (4, 5), (4, 5))) == pytest.approx(1.0)
    assert robustness.share_test(((5, 5), (0, 5), (5, 5))) == pytest.approx(3 * 1 / math.comb(15, 10))  # 3 tables
    split = {dt: np.repeat([0.1, 0.9], [8, 7] if dt == 0.01 else [0, 15]) for dt in robustness.DTS}
    result = robustness.every_step(split, resamples=500)
    assert result.learned[0] == (7, 15) and result.share_p < 0.001 and result.share_departures() == [(0.01, "below")]
    assert result.shares[0][1] < 1 and result.shares[1] == pytest.approx((tail ** (1 / 15), 1.0))
    learns = dict(zip(robustness.DTS, (15, 15, 2, 7, 15), strict=True))  # Fisher's p against the rest: 0.008 at
    # the steps where all learn, 1e-7 at dt 0.002, 0.023 at dt 0.001: not resolved at 0.05 / 5
    two = robustness.every_step({dt: np.repeat([0.1, 0.9], [15 - k, k]) for dt, k in learns.items()}, resamples=500)
    assert two.share_departures() == [(0.01, "above"), (0.005, "above"), (0.002, "below"), (0.0005, "above")]
    learns = dict(zip(robustness.DTS, (0, 3, 3, 4, 4), strict=True))  # dt 0.01 against the rest: p 0.009
    gated = robustness.every_step({dt: np.repeat([0.1, 0.9], [5 - k, k]) for dt, k in learns.items()}, resamples=500)
    assert gated.share_p > 0.05 and gated.share_departures() == []  # the test across dt finds no difference
    few = robustness.every_step({dt: [0.1, 0.9, 0.9] if dt == 0.01 else [0.9] * 3 for dt in robustness.DTS})
    assert few.share_p > 0.05 and few.share_departures() == []  # one run of fifteen: no departure


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [10, 15])
def test_an_invariant_methods_every_step_intervals_all_cover_1_on_every_kind_of_grid(seeds):
    """200 synthetic invariant grids of each kind (robustness.NULLS: normal spreads; bimodal, stalls rare, CartPole's,
    common; one bimodal dt among tight ones; tight coarse dt and bimodal fine ones): every dt's interval covers 1 at
    once in at least 95% of them, and no dt's share that learns departs in 90% where every dt has the same share."""
    for spread in robustness.NULLS:
        calibrated = robustness.every_step_calibration(seeds, spread)
        assert calibrated.mean >= 0.95, (spread, calibrated)
        if spread in robustness.EQUAL_SHARES:  # in the others, the share that learns differs across dt
            assert calibrated.share >= 0.9, (spread, calibrated)


@pytest.mark.slow
def test_the_coverage_test_fails_for_the_pooled_residual_bootstrap_and_for_each_dts_own_runs():
    """The coverage test above can fail, and does for the two intervals every_step had before: the residual bootstrap
    (one spread for every dt) covers 1 at every dt in fewer than 90% of bimodal grids with rare stalls and fewer than
    95% with one bimodal dt among tight ones, at 15 seeds; each dt's own runs resampled alone, in fewer than 90% of
    CartPole's bimodal grids at 10 seeds and of those with rare stalls at 15."""
    assert robustness.every_step_calibration(15, "bimodal, 5% stall", method="pooled").mean < 0.9
    assert robustness.every_step_calibration(15, "one bimodal dt among tight ones", method="pooled").mean < 0.95
    assert robustness.every_step_calibration(10, "bimodal, 22% stall", method="within").mean < 0.9
    assert robustness.every_step_calibration(15, "bimodal, 5% stall", method="within").mean < 0.9


@pytest.mark.slow
def test_every_step_finds_the_dip_and_the_split_seen_on_cartpole():
    """Power: the horizon's dip at dt 0.002 (0.57 of its other steps) is found below 1 in at least 90% of grids at
    10 seeds with normal spreads and 15 with bimodal ones; half the runs stalling at dt 0.01, by the mean or the share
    that learns, in at least 90% at 10 seeds with normal spreads and 40% at 15 with bimodal ones (a split within
    bimodal runs needs about 30 seeds for 80%: invariance.py --calibrate)."""
    assert robustness.every_step_calibration(10, "normal, SD 64", "dip").mean >= 0.9
    assert robustness.every_step_calibration(15, "bimodal, 22% stall", "dip").mean >= 0.9
    split = robustness.every_step_calibration(10, "normal, SD 64", "split")
    assert split.either >= 0.9 and split.share > split.mean, split  # the share finds what the mean misses
    assert robustness.every_step_calibration(15, "bimodal, 22% stall", "split").either >= 0.4


def test_every_steps_coverage_test_fails_for_intervals_not_made_simultaneous():
    """The coverage test can fail: plain 95% intervals at each of the five dt (no Bonferroni) all cover 1 in fewer
    than 90% of normal invariant grids at 15 seeds, so a method would be said to dip where it does not."""
    assert robustness.every_step_calibration(15, "normal, SD 64", simultaneous=False).mean < 0.9


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


def test_seeds_reads_only_the_runs_of_those_seeds(capsys):
    """--seeds: two grids read at the same seeds (the authors' five beside ours' fifteen), each line the statistic of
    those seeds' runs alone."""
    grid = ROOT / "docs" / "results" / "pendulum_horizon_grid"
    invariance.main(invariance.Options(runs=(grid,), seeds=(1, 2, 3)))
    printed = capsys.readouterr().out.splitlines()
    runs = plot.load_runs(grid, seeds=(1, 2, 3))
    every = functools.partial(plot.invariance_lines, statistic=robustness.every_step, line=plot.every_step_line)
    assert printed == plot.invariance_lines(runs) + every(runs) and all(line.endswith("seeds 3") for line in printed)


def test_compares_every_step_verdict_floors_each_methods_spread_as_every_step_does():
    """compare.step_verdict's intervals are every_step's: a step where both methods' ten runs happen to agree (0.10
    apart, each within 0.02), beside a step where they spread over 0.9, is not resolved by its narrow own spread;
    the residual of each method's runs pooled over its dt sets it."""
    import compare

    wide = list(np.linspace(0.1, 1.0, 10))
    reference = {0.01: list(np.linspace(0.79, 0.81, 10)), 0.001: wide}
    variant = {0.01: list(np.linspace(0.69, 0.71, 10)), 0.001: wide}
    verdict = compare.step_verdict(variant, reference, resamples=2000)
    assert verdict.startswith("dt 0.01 -0.10 [") and verdict.endswith(": undecided (no dt resolved)"), verdict
    low, high = map(float, verdict.split("[")[1].split("]")[0].split(", "))
    assert low < -0.2 and high > 0  # the pooled spread, about 0.2 a run
