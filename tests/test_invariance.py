"""The statistics of robustness across time steps (analysis/robustness.py) and analysis/invariance.py: their arithmetic,
their calibration on synthetic grids with CartPole's spreads (analysis/calibration.py), the line for "learns", the
verdict's words, and the command's lines."""

import math
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT
from scipy import special, stats

from analysis import calibration, invariance, robustness, scores, shares, tables
from analysis.variances import fieller_bounds, moderated, prior, quantile, satterthwaite, t_bounds

LINE = re.compile(r"invariance (\S+) (\S+) fine/coarse (\S+) \[(\S+), (\S+)\] slope (\S+) \[(\S+), (\S+)\] seeds (\d+)")
STEP = r"[\d.]+: (?:\S+ \[\S+, \S+\]|\S+), \d+/\d+ \[\S+, \S+\]"
DEPARTS = r"(?:none|—|dt \S+ (?:above|below)(?:, dt \S+ (?:above|below))*)"
SHARE = r"(?:none|dt \S+ (?:above|below)(?:, dt \S+ (?:above|below))*) \(p (?:< 0\.001|[01]\.\d{3})\)"
EVERY = re.compile(
    rf"every-step (\S+) (\S+) {STEP}(?:; {STEP})*; departs: {DEPARTS}; share departs: {SHARE}; seeds \d+"
)
VERDICT = re.compile(r"verdict (\S+) (\S+): (.+)")
DTS = calibration.DTS


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
    scores_ = {dt: np.full(3, 1.0 - 0.1 * halvings) for halvings, dt in enumerate(dts)}
    result = robustness.invariance(scores_)
    assert result.slope == pytest.approx(-0.1) and result.ratio == pytest.approx((0.8 + 0.7) / (1.0 + 0.9))
    assert result.seeds == 3 and result.slope_interval == pytest.approx((-0.1, -0.1))  # no spread, no width
    assert result.ratio_interval == pytest.approx((result.ratio, result.ratio))


def test_the_prior_is_limmas_moment_fit_and_the_moderated_variance_its_posterior_floored_at_the_pooled():
    """prior() solves Smyth's moment equations (2004, section 6): the mean of log s^2 - digamma(d/2) + log(d/2) is
    log s0^2 - digamma(d0/2) + log(d0/2), its variance trigamma(d/2) + trigamma(d0/2); limma's posterior variance is
    (d0 s0^2 + d s^2) / (d0 + d), with d0 + d degrees of freedom (at most the pooled sum of d). Variances that spread
    no more than chance gives an infinite d0: every dt gets s0^2 with the pooled degrees of freedom. "moderated"
    floors the posterior at the pooled variance, which then stands with its own degrees of freedom."""
    variances, dfs = np.array([0.5, 1.0, 2.0, 4.0, 30.0]), np.full(5, 4.0)
    s0, d0 = prior(variances, dfs)
    e = np.log(variances) - special.digamma(2.0) + np.log(2.0)
    assert e.mean() == pytest.approx(np.log(s0) - special.digamma(d0 / 2) + np.log(d0 / 2))
    assert np.var(e, ddof=1) == pytest.approx(special.polygamma(1, 2.0) + special.polygamma(1, d0 / 2))
    samples = [np.array([-1.0, 1.0, 0.0, 0.0, 0.0]) * math.sqrt(2 * variance) for variance in variances]
    limma = moderated(samples, "limma")
    posterior = (d0 * s0 + 4 * variances) / (d0 + 4)
    assert limma.variances == pytest.approx(posterior) and limma.dfs == pytest.approx(np.minimum(d0 + 4, 20))
    assert limma.variances[-1] > 0.5 * variances[-1] and limma.variances[0] > variances[0]  # toward each other
    fit = moderated(samples)
    floored = posterior < variances.mean()
    assert floored.any() and not floored.all()
    assert fit.variances == pytest.approx(np.where(floored, variances.mean(), posterior))
    assert fit.dfs == pytest.approx(np.where(floored, 20, np.minimum(d0 + 4, 20)))
    alike = np.array([1.0, 1.1, 0.9, 1.05, 0.95])
    assert prior(alike, dfs)[1] == math.inf
    fit = moderated([np.array([-1.0, 1.0, 0.0, 0.0, 0.0]) * math.sqrt(2 * v) for v in alike], "limma")
    assert np.all(fit.dfs == 20) and np.ptp(fit.variances) == 0
    pooled = moderated(samples, "pooled")
    assert pooled.variances == pytest.approx(np.full(5, variances.mean())) and np.all(pooled.dfs == 20)
    within = moderated(samples, "within")
    assert within.variances == pytest.approx(variances) and np.all(within.dfs == 4)


def test_fiellers_interval_holds_1_exactly_where_the_t_interval_of_the_difference_holds_0():
    """The every-step interval of a dt (its mean over the level) and the t test of its mean minus the level decide
    alike, at every level; Fieller's bounds are the roots where the ratio's t statistic meets its quantile."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        samples = [rng.normal(1.0 + 0.3 * rng.random(), 0.3, 5) for _ in range(5)]
        fit = moderated(samples)
        level = robustness.simultaneous_level(5)
        weights = np.full(5, 0.2)
        for index in range(5):
            unit = np.eye(5)[index]
            ratio = fieller_bounds(fit, unit, weights, level)
            low, high = t_bounds(fit, unit - weights, level)
            assert (ratio[0] <= 1 <= ratio[1]) == (low <= 0 <= high)
            for bound in ratio:
                terms = (unit - bound * weights) ** 2 * fit.variances / fit.runs
                statistic = (unit - bound * weights) @ fit.means / math.sqrt(terms.sum())
                contrast = (unit - weights) ** 2 * fit.variances / fit.runs
                q = quantile(level, satterthwaite(contrast, fit.dfs, 20))
                assert abs(statistic) == pytest.approx(q)


def test_the_intervals_a_verdict_rests_on_draw_no_resample(monkeypatch):
    """invariance(), every_step() and step_differences() use no bootstrap and no random generator: their bounds are
    quantiles, the same at any number of resamples (issue 77: at five seeds the bootstrap's bounds were its extreme
    draws, and a verdict moved with their count)."""

    def refused(*args, **kwargs):
        raise AssertionError("a resample drawn")

    monkeypatch.setattr(robustness.stats, "bootstrap", refused)
    monkeypatch.setattr(robustness.np.random, "default_rng", refused)
    grid, _ = calibration.synthetic_grid(np.random.Generator(np.random.PCG64(1)), 5, dip=(0.002, 0.5))
    steps = robustness.every_step(grid, calibration.LINE_SCORE)
    assert (0.002, "below") in steps.departures() and robustness.invariance(grid).ratio_interval
    assert robustness.step_differences(grid, {dt: values + 0.1 for dt, values in grid.items()})
    with pytest.raises(AssertionError, match="a resample drawn"):
        robustness.interval((grid[0.01],), np.mean)  # the tables' cells do draw them


@pytest.mark.parametrize("bimodal", [False, True], ids=["normal", "bimodal"])
def test_an_invariant_methods_interval_covers_1_at_10_seeds(bimodal):
    """200 synthetic grids of an invariant method with CartPole's spreads (SD 64, or runs that balance or stall):
    the 95% interval of fine/coarse covers 1, and the slope's covers 0, in at least 92% of them."""
    ratio_coverage, slope_coverage = calibration.calibration(10, 1.0, bimodal)
    assert ratio_coverage >= 0.92 and slope_coverage >= 0.92, (ratio_coverage, slope_coverage)


def test_a_method_30_percent_worse_at_its_finest_dt_is_told_apart_at_10_seeds():
    """With the coarse-step spread (SD 64), the interval excludes 1 in at least 80% of 200 grids."""
    ratio_coverage, slope_coverage = calibration.calibration(10, 0.7, bimodal=False)
    assert 1 - ratio_coverage >= 0.8 and 1 - slope_coverage >= 0.8, (ratio_coverage, slope_coverage)


def test_the_power_test_fails_for_an_interval_of_the_runs_shuffled_across_dt():
    """The calibration can fail: fine / coarse of the runs with their dt shuffled (every dt drawn from all the runs
    together) centres on 1 whatever the method does, and the power test above would reject it."""

    def shuffled(scores_):
        dts = sorted(scores_, reverse=True)
        runs = np.random.default_rng(0).permutation(np.concatenate([scores_[dt] for dt in dts]))
        return robustness.invariance(dict(zip(dts, np.split(runs, len(dts)), strict=True)))

    ratio_coverage, _ = calibration.calibration(10, 0.7, bimodal=False, grids=50, statistic=shuffled)
    assert 1 - ratio_coverage < 0.8


def test_every_step_sets_each_dt_against_the_mean_of_all_and_counts_the_runs_that_learn():
    """Each dt's mean score over the mean of the dt's means; without spread the intervals are the points, and a dt
    below the others departs below 1 (the others, above it, above 1); a run learns at a score of the line or more."""
    scores_ = {0.01: [1.0, 1.0], 0.005: [1.0, 1.0], 0.002: [0.5, 0.5], 0.001: [1.0, 1.0], 0.0005: [0.0, 1.0]}
    result = robustness.every_step(scores_, 0.5)
    level = (1.0 + 1.0 + 0.5 + 1.0 + 0.5) / 5
    assert result.relative == pytest.approx((1 / level, 1 / level, 0.5 / level, 1 / level, 0.5 / level))
    assert result.learned == ((2, 2), (2, 2), (2, 2), (2, 2), (1, 2)) and result.seeds == 2
    assert robustness.every_step(scores_, 0.6).learned == ((2, 2), (2, 2), (0, 2), (2, 2), (1, 2))
    flat = robustness.every_step({dt: [0.8, 0.8, 0.8] for dt in DTS}, 0.5)
    assert flat.relative == pytest.approx((1.0,) * 5) and flat.departures() == []
    dipped = robustness.every_step({dt: [0.4 if dt == 0.002 else 0.8] * 3 for dt in DTS}, 0.5)
    assert dipped.intervals[2] == pytest.approx((0.4 / 0.72, 0.4 / 0.72))
    assert dipped.departures() == [(0.01, "above"), (0.005, "above"), (0.002, "below"), (0.001, "above"),
                                   (0.0005, "above")]  # fmt: skip
    assert robustness.every_step({0.01: [-0.1], 0.001: [0.0]}, 0.5).relative is None  # nothing learned: no level


def test_a_dt_that_spreads_far_more_keeps_its_own_spread_and_one_that_agrees_by_chance_is_pulled_up():
    """The moderation, ten runs a dt: a step whose runs spread over 1.2 among steps that agree keeps about its own,
    wide interval (the pooled t gives it the others' narrow spread); among steps whose spreads differ only by chance,
    the one whose runs happen to agree most gets a wider interval than its own runs alone give (Welch's)."""
    tight, wide = np.linspace(0.78, 0.82, 10), np.linspace(0.2, 1.4, 10)

    def width(scores_, method, dt):
        low, high = robustness.every_step(scores_, 0.5, method=method).intervals[DTS.index(dt)]
        return high - low

    alone = {dt: wide if dt == 0.002 else tight for dt in DTS}
    assert width(alone, "moderated", 0.002) > 1.5 * width(alone, "pooled", 0.002)
    assert width(alone, "moderated", 0.002) > 0.8 * width(alone, "within", 0.002)
    chance = dict(zip(DTS, (0.7, 1.0, 1.3, 0.9, 1.1), strict=True))  # SDs, each dt's runs normal
    normal = stats.norm.ppf((np.arange(10) + 0.5) / 10)
    alike = {dt: 0.8 + 0.1 * sd * normal for dt, sd in chance.items()}
    assert width(alike, "moderated", 0.01) > 1.2 * width(alike, "within", 0.01)
    assert width(alike, "moderated", 0.01) == pytest.approx(width(alike, "pooled", 0.01), rel=0.05)


def test_the_share_that_learns_has_binomial_intervals_and_an_exact_test_across_dt():
    """Clopper-Pearson intervals of each dt's share (0 of n: [0, 1 - (a/2)^(1/n)]; n of n: [(a/2)^(1/n), 1]), the
    exact test across dt (Fisher's two-sided test for two dt), and the dt whose share departs: only where the test
    across dt finds the shares differ, and a dt's runs differ from the other dt's runs at 0.05 / number of dt."""
    tail = 0.05 / 5 / 2
    intervals = shares.share_intervals(((0, 5), (5, 5)), 1 - 0.05 / 5)
    assert np.ravel(intervals) == pytest.approx([0.0, 1 - tail ** (1 / 5), tail ** (1 / 5), 1.0])
    table = ((3, 10), (9, 11))
    exact = stats.fisher_exact([[3, 7], [9, 2]]).pvalue
    assert shares.share_test(table) == pytest.approx(exact) and 0.01 < exact < 0.05
    assert shares.share_test(((4, 5), (4, 5), (4, 5))) == pytest.approx(1.0)
    assert shares.share_test(((5, 5), (0, 5), (5, 5))) == pytest.approx(3 * 1 / math.comb(15, 10))  # 3 tables
    split = {dt: np.repeat([0.1, 0.9], [8, 7] if dt == 0.01 else [0, 15]) for dt in DTS}
    result = robustness.every_step(split, 0.5)
    assert result.learned[0] == (7, 15) and result.share_p < 0.001 and result.share_departures() == [(0.01, "below")]
    assert result.shares[0][1] < 1 and result.shares[1] == pytest.approx((tail ** (1 / 15), 1.0))
    learns = dict(zip(DTS, (15, 15, 2, 7, 15), strict=True))  # Fisher's p against the rest: 0.008 at
    # the steps where all learn, 1e-7 at dt 0.002, 0.023 at dt 0.001: not resolved at 0.05 / 5
    two = robustness.every_step({dt: np.repeat([0.1, 0.9], [15 - k, k]) for dt, k in learns.items()}, 0.5)
    assert two.share_departures() == [(0.01, "above"), (0.005, "above"), (0.002, "below"), (0.0005, "above")]
    learns = dict(zip(DTS, (0, 3, 3, 4, 4), strict=True))  # dt 0.01 against the rest: p 0.009
    gated = robustness.every_step({dt: np.repeat([0.1, 0.9], [5 - k, k]) for dt, k in learns.items()}, 0.5)
    assert gated.share_p > 0.05 and gated.share_departures() == []  # the test across dt finds no difference
    few = robustness.every_step({dt: [0.1, 0.9, 0.9] if dt == 0.01 else [0.9] * 3 for dt in DTS}, 0.5)
    assert few.share_p > 0.05 and few.share_departures() == []  # one run of fifteen: no departure


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("score", [0.9, 0.7, 0.3, 1 / 3])
def test_identical_runs_depart_nowhere(count, score):
    """Every run the same score at every dt: each dt's interval has zero width at the level, 1 to the floats'
    rounding, and departs nowhere, as the verdict's "within 0% of one level at every step" says. At 5 dt and 0.9 the
    floats put it at 0.9999999999999999 and every dt read as a departure below (issue 86). One dt at another level,
    its runs identical too, departs there."""
    dts = [0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002][:count]
    steps = robustness.every_step({dt: [score] * 5 for dt in dts}, 0.5)
    assert steps.departures() == [], steps.intervals
    assert robustness.verdict(robustness.invariance({dt: [score] * 5 for dt in dts}), steps).startswith("within 0%")
    other = robustness.every_step({dt: [score] * 5 if dt != dts[-1] else [score / 2] * 5 for dt in dts}, 0.5)
    assert other.departures() == [(dt, "above") for dt in dts[:-1]] + [(dts[-1], "below")]


GRIDS = 1000  # synthetic grids a cell: a coverage of 0.95 estimated within 0.007 (one standard error)


def not_below_95(share, grids):
    """Whether a coverage estimated from `grids` grids is consistent with at least 0.95: the one-sided binomial test
    of "below 0.95" does not reject it at 5% (at 1000 grids: 939 covered or more). An exact 95% procedure covers
    95.05% of the normal grids (Bonferroni over five dt), so its estimates scatter about 0.95 itself: the pooled t
    covers 94.3% of the 1000 normal grids at 15 seeds."""
    return stats.binomtest(round(share * grids), grids, 0.95, alternative="less").pvalue >= 0.05


# The every-step coverage that docs/benchmarks.md gives below 0.95 (its table of invariant grids, 1000 a cell), by
# (seeds, kind of grid): one bimodal dt among tight ones at 5 seeds, whose bimodal dt's five runs all balance in 13% of
# grids, a sample no interval tells from a step that does better (calibration.NULLS' comment); 0.994 on the 879 grids
# where one of them stalls.
BELOW_95 = {(5, calibration.ALL_BALANCE): 0.874}


def binomial_tolerance(share, grids):
    """Three standard errors of a share estimated from `grids` grids: 0.031 at 0.874 and 1000 grids."""
    return 3 * math.sqrt(share * (1 - share) / grids)


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [5, 10, 15])
def test_an_invariant_methods_every_step_intervals_all_cover_1_on_every_kind_of_grid(seeds):
    """1000 synthetic invariant grids of each kind (calibration.NULLS: normal spreads; bimodal, stalls rare,
    CartPole's, common; one bimodal dt among tight ones; tight coarse dt and bimodal fine ones; log-normal, the spread
    growing as dt shrinks; one dt with Student's t, 3 df), every grid counted: every dt's interval covers 1 at once in
    at least 95% of them (not_below_95), but where docs/benchmarks.md gives less (BELOW_95), which holds its figure
    within the binomial error of 1000 grids and is truly below 0.95; on the normal grids at least as often as the
    pooled t, exact there; no dt's share that learns departs in 90% where every dt has the same share. The test left
    out the grids where the intervals fail (one bimodal dt among tight ones at 5 seeds: 0.994 on the 879 it kept,
    0.874 on all 1000; issue 86)."""
    for spread in calibration.NULLS:
        calibrated = calibration.every_step_calibration(seeds, spread, grids=GRIDS)
        documented = BELOW_95.get((seeds, spread))
        if documented is None:
            assert not_below_95(calibrated.mean, GRIDS), (spread, calibrated)
        else:
            assert documented < 0.95 and not not_below_95(documented, GRIDS)
            assert abs(calibrated.mean - documented) <= binomial_tolerance(documented, GRIDS), (spread, calibrated)
        if spread in calibration.EQUAL_SHARES:  # in the others, the share that learns differs across dt
            assert calibrated.share >= 0.9, (spread, calibrated)
    pooled = calibration.every_step_calibration(seeds, "normal, SD 64", grids=GRIDS, method="pooled").mean
    assert calibration.every_step_calibration(seeds, "normal, SD 64", grids=GRIDS).mean >= pooled


@pytest.mark.slow
def test_the_coverage_test_fails_for_limmas_variances_alone_the_pooled_t_and_each_dts_own_variance():
    """The coverage test above can fail, and does for the moderation without its floor (limma's posterior: CartPole's
    bimodal runs spread their sample variances far more than normal runs, and the fit keeps each dt's own), for the
    pooled t (one variance for every dt: one bimodal dt among tight ones) and for each dt's own variance alone
    (Welch: CartPole's bimodal grids, where a dt's few runs all balance by chance), at 10 seeds."""
    failing = {"limma": "bimodal, 22% stall", "pooled": calibration.ALL_BALANCE, "within": "bimodal, 22% stall"}
    for method, spread in failing.items():
        calibrated = calibration.every_step_calibration(10, spread, method=method)
        assert not not_below_95(calibrated.mean, 200), (method, calibrated)


@pytest.mark.slow
def test_every_step_finds_the_dip_and_the_split_seen_on_cartpole():
    """Power: the horizon's dip at dt 0.002 (0.57 of its other steps) is found below 1 in at least 90% of grids at
    10 seeds with normal spreads and 15 with bimodal ones; half the runs stalling at dt 0.01, by the mean or the share
    that learns, in at least 90% at 10 seeds with normal spreads and 40% at 15 with bimodal ones (a split within
    bimodal runs needs about 30 seeds for 80%: invariance.py --calibrate)."""
    assert calibration.every_step_calibration(10, "normal, SD 64", "dip").mean >= 0.9
    assert calibration.every_step_calibration(15, "bimodal, 22% stall", "dip").mean >= 0.9
    split = calibration.every_step_calibration(10, "normal, SD 64", "split")
    assert split.either >= 0.9 and split.share > split.mean, split  # the share finds what the mean misses
    assert calibration.every_step_calibration(15, "bimodal, 22% stall", "split").either >= 0.4


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [5, 15])
def test_where_every_dt_spreads_alike_the_power_is_within_10_percent_of_the_pooled_t(seeds):
    """A dip of 25% at dt 0.002, every dt's runs normal with SD 64: the moderated intervals find it in at least 90%
    of the share of the same 1000 grids where the pooled t with Bonferroni does, the pooled t the exact test there."""
    moderated = calibration.every_step_calibration(seeds, "normal, SD 64", "dip 25%", grids=GRIDS).mean
    pooled = calibration.every_step_calibration(seeds, "normal, SD 64", "dip 25%", grids=GRIDS, method="pooled").mean
    assert moderated >= 0.9 * pooled and pooled > 0.3, (moderated, pooled)


def test_every_steps_coverage_test_fails_for_intervals_not_made_simultaneous():
    """The coverage test can fail: plain 95% intervals at each of the five dt (no Bonferroni) all cover 1 in fewer
    than 90% of normal invariant grids at 15 seeds, so a method would be said to dip where it does not."""
    assert calibration.every_step_calibration(15, "normal, SD 64", simultaneous=False).mean < 0.9


def test_compares_every_step_intervals_cover_0_for_a_variant_that_changes_nothing():
    """step_differences (compare.py's verdict): two methods whose runs come from one law, five seeds a dt, CartPole's
    bimodal spreads: in at least 95% of 200 pairs of grids no dt is judged worse or better; with normal spreads, a
    variant 0.4 lower at one dt (about 170 in return, 2.6 runs' SDs) is found worse there in at least 80%."""
    rng = np.random.default_rng(7)
    judged = found = 0
    for _ in range(200):
        pair = [calibration.synthetic_grid(rng, 5, bimodal=True)[0] for _ in range(2)]
        judged += any(not low <= 0 <= high for _, _, (low, high) in robustness.step_differences(*pair))
        pair = [calibration.synthetic_grid(rng, 5)[0] for _ in range(2)]
        pair[0][0.002] = pair[0][0.002] - 0.4
        found += [bounds[1] < 0 for dt, _, bounds in robustness.step_differences(*pair) if dt == 0.002][0]
    assert judged / 200 <= 0.05 and found / 200 >= 0.8, (judged, found)


def test_the_power_at_more_seeds_is_drawn_from_the_runs_own_spread():
    """departure_power: runs redrawn from each dt's own; a clear dip (half the level, little spread) is found at
    every draw, the same dip hidden in a wide spread less often, and more often with more seeds."""
    rng = np.random.default_rng(1)
    clear = {dt: rng.normal(0.4 if dt == 0.002 else 0.8, 0.02, 10) for dt in DTS}
    assert invariance.departure_power(clear, 5, 0.5, grids=50) == (0.002, 1.0)
    wide = {dt: np.repeat([0.1, 1.0], [6, 4] if dt == 0.002 else [3, 7]) for dt in DTS}  # stall or balance
    step, few = invariance.departure_power(wide, 5, 0.5, grids=100)
    assert step == 0.002 and few < invariance.departure_power(wide, 40, 0.5, grids=100)[1]
    assert few < 0.8


def test_the_seeds_needed_grow_with_the_spread_and_shrink_with_the_width():
    rng = np.random.default_rng(0)
    narrow = {dt: rng.normal(1.0, 0.1, 20) for dt in DTS}
    wide = {dt: rng.normal(1.0, 0.4, 20) for dt in DTS}
    assert invariance.seeds_for(narrow, 0.1) < invariance.seeds_for(wide, 0.1) < invariance.seeds_for(wide, 0.05)


# --- The words of a verdict ------------------------------------------------------------------------------------


def steps_of(learned, intervals=None):
    dts = DTS[: len(learned)]
    relative = None if intervals is None else tuple(1.0 for _ in dts)
    return robustness.EveryStep(dts, relative, intervals, tuple(learned), min(n for _, n in learned))


def test_a_verdicts_words_follow_from_the_numbers_by_one_rule():
    """robustness.verdict: the bound fine / coarse supports (lower, higher, or undecided with both bounds), each rounded
    outward to a whole percent so that the words hold the interval; "within N%" only where it holds 1 and every
    step's interval lies within 10% of the level (Pendulum's DAU: its farthest bound 9.05% away is "within 10%", not
    the 9% its printed 0.91 reads); where there is no ratio (the coarse steps no better than untrained) the runs that
    learn: none anywhere is "learns at no step" (Ant's unscaled DDPG, issue 77: not "learns at its native step
    only" with 0 of 5 there)."""
    five = [(0, 5)] * 4
    inside = ((0.95, 1.04), (0.91, 1.06), (0.97, 1.02), (0.99, 1.09))
    invariant = robustness.Invariance(1.0, (0.97, 1.03), 0.0, (-0.01, 0.01), 5)

    def words(ratio, interval, steps):
        return robustness.verdict(robustness.Invariance(ratio, interval, 0.0, (-0.1, 0.1), 5), steps)

    assert words(0.59, (0.4712, 0.7349), steps_of(five, inside)) == "26% to 53% lower at the finest steps"
    assert words(1.7, (1.14, 3.551), steps_of(five, inside)) == "14% to 256% higher at the finest steps"
    assert robustness.verdict(invariant, steps_of(five, inside)) == "within 9% of one level at every step"
    pendulum = ((0.9095, 1.036), (0.96, 1.04), (0.96, 1.04), (0.97, 1.05))
    assert robustness.verdict(invariant, steps_of(five, pendulum)) == "within 10% of one level at every step"
    wider = (*inside[:3], (0.99, 1.11))
    undecided = "undecided (3% lower to 3% higher at the finest steps)"
    assert robustness.verdict(invariant, steps_of(five, wider)) == undecided  # one step 11% above
    assert robustness.verdict(invariant, steps_of(five)) == undecided  # no every-step intervals
    assert words(1.41, None, steps_of(five)) == "undecided (the coarse steps not resolved above untrained)"
    assert words(None, None, steps_of(five)) == "learns at no step"
    assert words(None, None, steps_of([(3, 5), (0, 5), (0, 5), (0, 5)])) == "learns at dt 0.01 only (3 of 5 runs)"
    assert words(None, None, steps_of([(3, 5), (0, 5), (1, 5), (0, 5)])) == "learns at dt 0.01 and 0.002 only (3 " \
                                                                            "and 1 of 5 runs)"  # fmt: skip
    assert words(None, None, steps_of([(3, 5), (2, 5)])) == "learns at every step (3 and 2 of 5 runs)"


# --- The line for "learns" --------------------------------------------------------------------------------------


def test_each_environments_line_is_half_its_solved_return_or_pendulums_half_of_hanging():
    """scores.LEARNS: half of Gymnasium's reward_threshold (the return its registry calls solved), and for Pendulum,
    which has none, half of what a pendulum hanging at rest pays over its 200 steps (pi^2 a step)."""
    import gymnasium as gym

    for env_id, line in scores.LEARNS.items():
        threshold = gym.spec(env_id).reward_threshold
        expected = -(math.pi**2) * gym.spec(env_id).max_episode_steps / 2 if threshold is None else threshold / 2
        assert line == pytest.approx(expected), env_id
    assert set(scores.LEARNS) >= {path.name.split("__")[0] for path in (ROOT / "docs" / "results").glob("*__*")}


def learned_counts(*folders):
    runs = scores.load_runs(folders)
    return {(env_id, label): steps.learned for env_id, label, _, steps in tables.judged(runs)}


def test_adding_a_folder_changes_no_count_of_runs_that_learn():
    """The line is a return, not a share of the scale: read beside another folder (a better best, another untrained
    level), a grid's runs that learn are the same at every dt (issue 77: the line was 0.5 of a scale that moved with
    the folders read, a return of about 230 on CartPole)."""
    grid = ROOT / "docs" / "results" / "cartpole_horizon_grid"
    alone = learned_counts(grid)
    together = learned_counts(grid, ROOT / "docs" / "results" / "cartpole_12600")
    assert alone and all(together[key] == counts for key, counts in alone.items())
    runs = scores.load_runs([grid, ROOT / "docs" / "results" / "cartpole_12600"])["CartPole-v1"]
    assert scores.env_scores(runs)[1:] != scores.env_scores(scores.load_runs(grid)["CartPole-v1"])[1:]  # another scale


# --- The command ----------------------------------------------------------------------------------------------------


def test_the_command_prints_one_line_per_env_and_label_of_the_archive():
    result = subprocess.run([sys.executable, "-m", "analysis.invariance", "--runs", "docs/results"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    lines = [line for line in printed if line.startswith("invariance ")]
    every = [line for line in printed if line.startswith("every-step ")]
    verdicts = [line for line in printed if line.startswith("verdict ")]
    assert len(lines) + len(every) + len(verdicts) == len(printed) and len(lines) == len(every) == len(verdicts)
    assert all(LINE.fullmatch(line) for line in lines), lines
    assert all(EVERY.fullmatch(line) for line in every), every
    found = {LINE.fullmatch(line).group(1, 2) for line in lines}
    runs = scores.load_runs(ROOT / "docs" / "results")
    assert found == {(env_id, label) for env_id, algorithms in runs.items() for label in algorithms}
    assert found == {EVERY.fullmatch(line).group(1, 2) for line in every}
    assert found == {VERDICT.fullmatch(line).group(1, 2) for line in verdicts}
    assert len(found) == len(lines) and ("CartPole-v1", "DQN-unscaled") in found and ("Pendulum-v1", "DAU") in found
    example = [line.strip() for line in invariance.__doc__.splitlines() if line.strip().startswith("invariance ")]
    assert example and set(example) <= set(lines), example  # the docstring's example is what the command prints
    every_example = invariance.__doc__.split("    every-step ")[1].split("\n\n")[0]
    assert "every-step " + " ".join(every_example.replace("\\\n", " ").split()) in every
    verdict_example = [line.strip() for line in invariance.__doc__.splitlines() if line.strip().startswith("verdict ")]
    assert verdict_example and set(verdict_example) <= set(verdicts), verdict_example
    missing = subprocess.run([sys.executable, "-m", "analysis.invariance", "--runs", "no/such/folder"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode != 0 and "no/such/folder" in missing.stderr and "Traceback" not in missing.stderr
    assert "matplotlib" not in subprocess.run([sys.executable, "-c", "import sys, analysis.invariance; "
                                               "print(sorted(sys.modules))"], cwd=ROOT, capture_output=True,
                                              text=True, timeout=60).stdout  # fmt: skip


def test_dts_reads_only_the_runs_at_those_steps(capsys):
    """--dts: the statistic of the runs at the steps given, on their own scale, as if no other step had run; a step
    with no runs is refused."""
    grid = ROOT / "docs" / "results" / "pendulum_horizon_grid"  # five steps
    options = invariance.Options(runs=(grid,), dts=(0.01, 0.001))
    invariance.main(options)
    printed = capsys.readouterr().out.splitlines()
    runs = scores.load_runs(grid)
    shared = {env_id: {algorithm: {dt: by_dt[dt] for dt in (0.01, 0.001)} for algorithm, by_dt in algorithms.items()}
              for env_id, algorithms in runs.items()}  # fmt: skip
    assert printed == tables.invariance_lines(shared) != tables.invariance_lines(runs)
    with pytest.raises(SystemExit, match="no finished runs at --dts 0.003"):
        invariance.main(invariance.Options(runs=options.runs, dts=(0.003,)))


def test_seeds_reads_only_the_runs_of_those_seeds(capsys):
    """--seeds: two grids read at the same seeds (the authors' five beside ours' fifteen), each line the statistic of
    those seeds' runs alone."""
    grid = ROOT / "docs" / "results" / "pendulum_horizon_grid"
    invariance.main(invariance.Options(runs=(grid,), seeds=(1, 2, 3)))
    printed = capsys.readouterr().out.splitlines()
    runs = scores.load_runs(grid, seeds=(1, 2, 3))
    assert printed == tables.invariance_lines(runs)
    assert all(line.endswith("seeds 3") for line in printed if not line.startswith("verdict "))
