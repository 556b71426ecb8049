"""The project's statistics of robustness across time steps, in one place: every line, table cell and verdict of
analysis/invariance.py, analysis/tables.py (plot.py's tables) and analysis/compare.py comes from these functions.

- moderated (analysis/variances.py): each dt's mean and the variance of its runs, moderated (limma's empirical Bayes,
  Smyth 2004), the one input of every interval below; t_bounds and fieller_bounds turn it into the interval of a
  contrast or a ratio of the dt's means;
- invariance: fine / coarse (the two finest dt's mean score over the two coarsest's) and the slope per halving of dt;
- every_step: each dt's mean score against the method's own level over all its dt, with simultaneous intervals;
- step_differences: per dt, one method's mean score minus another's (compare.py's verdict), simultaneous intervals;
- the share of runs that learn per dt, its exact binomial intervals and the exact test across dt (analysis/shares.py:
  share_intervals, share_test);
- verdict: a method's words from its fine / coarse, its every step and its runs that learn, by one rule;
- interval: a bootstrap interval of any statistic of runs (the tables' cells: a mean, P(X > Y), worst / best);
- probability_of_improvement: P(X > Y) between two samples of runs (Agarwal et al., NeurIPS 2021).

None of the intervals a verdict rests on resamples: each is a t (or Fieller) interval whose bounds are quantiles
of a distribution, the same at any number of bootstrap resamples the tables' cells use. Scores are normalised
(0: untrained, 1: the best mean of any algorithm and dt: analysis/scores.py's env_scores). The synthetic grids
that calibrate all this are in analysis/calibration.py.
"""

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from analysis.shares import share_intervals, share_test
from analysis.variances import fieller_bounds, moderated, quantile, satterthwaite, t_bounds

RESAMPLES = 10_000  # bootstrap resamples of a table cell's interval (interval)


def interval(samples, statistic, vectorized=False, axis=0, resamples=RESAMPLES):
    """The 95% bootstrap interval (low, high) of statistic(*samples), each sample resampled on its own (one per dt,
    or DAU's and a baseline's runs; Hesterberg's expanded percentile, expanded_level): the tables' cells, a mean, a
    P(X > Y), a worst / best; no verdict rests on it. None when a sample has a single run."""
    seeds = min(np.shape(sample)[axis] for sample in samples)
    if seeds < 2:
        return None
    result = stats.bootstrap(samples, statistic, n_resamples=resamples, method="percentile", vectorized=vectorized,
                             axis=axis, rng=np.random.default_rng(0),
                             confidence_level=expanded_level(seeds))  # fmt: skip
    return result.confidence_interval.low, result.confidence_interval.high


def expanded_level(seeds, level=0.95):
    """The percentile level that Hesterberg's expanded percentile interval uses for a 95% interval from `seeds` runs a
    sample (The American Statistician 69(4), 2015): z = sqrt(n / (n - 1)) t_{n-1}, the bootstrap's variance made
    unbiased and its tails Student's."""
    z = np.sqrt(seeds / (seeds - 1)) * stats.t.ppf(0.5 + level / 2, seeds - 1)
    return 1 - 2 * stats.norm.sf(z)


def robustness_ratio(*finals, untrained):
    """Worst dt over best dt on the score, from each dt's run scores (0 when the worst is no better than untrained;
    None when no dt is). A biased, low-power summary, kept as a column: the worst of several noisy means is low by
    construction, and it cannot tell an invariant method from a degrading one; invariance() is the statistic."""
    means = [np.mean(values) for values in finals]
    if max(means) <= untrained:
        return None
    return max(min(means) - untrained, 0) / (max(means) - untrained)


ROUNDING = 1e-9  # an interval's bound within this of a value holds it: the floats' rounding, not the runs' spread


def excludes(bounds, value=1.0):
    """ "below" where the interval (low, high) lies below `value`, "above" where above, else None. A bound within
    ROUNDING of the value holds it: identical runs at every dt have zero-width intervals at 1, which the floats put
    at 0.9999999999999999 or 1.0000000000000002 (they read as departing at every dt, beside "within 0%")."""
    low, high = bounds
    return "below" if high < value - ROUNDING else "above" if low > value + ROUNDING else None


# --- Fine / coarse and the slope --------------------------------------------------------------------------------


class Invariance(NamedTuple):
    """How a method's score moves with dt (invariance()): 1 and 0 for a method that does not move."""

    ratio: float | None  # fine / coarse: the two finest dt's mean score over the two coarsest's (None: coarse <= 0)
    ratio_interval: tuple[float, float] | None  # its 95% interval (Fieller; None: the coarse level not resolved)
    slope: float | None  # the score's change per halving of dt (least squares over the dt's means, each dt weighing
    # one); None, as the ratio, with a single dt
    slope_interval: tuple[float, float] | None
    seeds: int  # the fewest seeds of any dt


def pooled_ends(dts):
    """How many dt each end of a grid pools: the two finest and the two coarsest from four dt on, else one each."""
    return 2 if len(dts) >= 4 else 1


def end_weights(count):
    """The weights of the dt's means (coarsest first) in the fine end's mean and in the coarse end's."""
    ends = pooled_ends(range(count))
    fine, coarse = np.zeros(count), np.zeros(count)
    fine[-ends:], coarse[:ends] = 1 / ends, 1 / ends
    return fine, coarse


def fine_over_coarse(*scores, axis=-1):
    """The fine/coarse ratio of per-dt scores given coarsest dt first (nan where the coarse mean is not above 0)."""
    means = np.stack([np.mean(values, axis=axis) for values in scores], axis=-1)
    fine, coarse = end_weights(len(scores))
    high, low = means @ fine, means @ coarse
    return np.where(low > 0, high / np.where(low > 0, low, 1), np.nan)


def halving_weights(dts):
    """The weights of the dt's means in the least-squares slope against log2(coarsest dt / dt)."""
    halvings = np.log2(max(dts) / np.asarray(dts))
    centred = halvings - halvings.mean()
    return centred / (centred**2).sum()


def slope_per_halving(*scores, dts, axis=-1):
    """The least-squares slope of the per-dt mean scores against the halvings of dt, log2(coarsest dt / dt)."""
    means = np.stack([np.mean(values, axis=axis) for values in scores], axis=-1)
    return means @ halving_weights(dts)


def invariance(scores, method="moderated"):
    """Invariance of {dt: [normalised score of each run]} (0: untrained): fine/coarse and the slope per halving, each
    with its 95% interval from the dt's moderated variances (moderated): Fieller's for the ratio (fieller_bounds), t
    for the slope (t_bounds). The dt are independent samples (seeds do not pair across dt: a seed's coarse and fine
    scores correlate +0.02 on CartPole). Calibrated on synthetic grids (analysis/calibration.py: coverage of an
    invariant method, power against one 30% worse at its two finest dt; `python -m analysis.invariance --calibrate`)."""
    dts = sorted(scores, reverse=True)
    samples = [np.asarray(scores[dt], dtype=float) for dt in dts]
    seeds = min(len(sample) for sample in samples)
    if len(dts) < 2:
        return Invariance(None, None, None, None, seeds)
    ratio = float(fine_over_coarse(*samples))
    slope = float(slope_per_halving(*samples, dts=dts))
    if seeds < 2:
        return Invariance(None if np.isnan(ratio) else ratio, None, slope, None, seeds)
    fit = moderated(samples, method)
    fine, coarse = end_weights(len(dts))
    ratio_bounds = fieller_bounds(fit, fine, coarse, 0.95) if not np.isnan(ratio) else None
    return Invariance(None if np.isnan(ratio) else ratio, ratio_bounds, slope,
                      t_bounds(fit, halving_weights(dts), 0.95), seeds)  # fmt: skip


# --- Every step ----------------------------------------------------------------------------------------------------


class EveryStep(NamedTuple):
    """Each dt against the method's own mean over its dt (every_step()): 1 at every dt for a method that does not move
    with dt; a dip or a split at one step shows there, where fine / coarse (the two ends pooled) cannot see it. The
    share of runs that learn is judged apart: a split can leave the mean where it was and move the share."""

    dts: tuple[float, ...]  # coarsest first
    relative: tuple[float, ...] | None  # each dt's mean score over the mean of the dt's mean scores (None: that <= 0)
    intervals: tuple[tuple[float, float], ...] | None  # simultaneous 95% intervals, one per dt (every_step)
    learned: tuple[tuple[int, int], ...]  # per dt: (runs whose score is at least the line, runs)
    seeds: int  # the fewest seeds of any dt
    shares: tuple[tuple[float, float], ...] = ()  # per dt, the share that learns: simultaneous 95% binomial intervals
    share_p: float = 1.0  # the exact test that every dt has the same share that learns (share_test)

    def departures(self):
        """The dt whose interval excludes 1 (by more than the floats' rounding: excludes), each with "below" or
        "above"."""
        sides = [(dt, excludes(bounds)) for dt, bounds in zip(self.dts, self.intervals or (), strict=False)]
        return [(dt, side) for dt, side in sides if side]

    def share_departures(self):
        """The dt whose share that learns departs, each with "below" or "above": none unless the test across dt finds
        that the shares differ (share_p < 0.05); then each dt whose runs differ from all the other dt's runs in
        Fisher's exact test at 0.05 / number of dt (Bonferroni)."""
        if self.share_p >= 0.05:
            return []
        departs = []
        for dt, (learned, runs) in zip(self.dts, self.learned, strict=True):
            others = sum(count for count, _ in self.learned) - learned, sum(n for _, n in self.learned) - runs
            table = [[learned, runs - learned], [others[0], others[1] - others[0]]]
            if stats.fisher_exact(table).pvalue < 0.05 / len(self.dts):
                departs.append((dt, "below" if learned / runs < others[0] / others[1] else "above"))
        return departs


def relative_to_mean(means):
    """Each dt's mean score over the mean of the dt's means, along the last axis (nan where that mean is not above
    0: a method that learns nothing on average has no level to depart from)."""
    level = means.mean(-1, keepdims=True)
    return np.where(level > 0, means / np.where(level > 0, level, 1), np.nan)


def simultaneous_level(count, simultaneous=True):
    """The level of each of `count` intervals that hold at once at 95% (Bonferroni); each 95% if not simultaneous."""
    return 1 - 0.05 / count if simultaneous else 0.95


def every_step(scores, line, simultaneous=True, method="moderated"):
    """Every dt against the method's own level: each dt's mean score over the mean of all its dt's mean scores (1
    everywhere for a method that does not move with dt), with 95% intervals that hold for all dt at once; per dt the
    runs that learn (score at least `line`, the environment's fixed line on the scores' scale: analysis/scores.py's
    LEARNS), with binomial intervals, and the exact test that the share that learns is the same at every dt.

    The intervals: Fieller's (fieller_bounds) for dt mean / level, at 1 - 0.05 / number of dt each (Bonferroni;
    simultaneous=False: plain 95% ones, which cover too little), from the dt's moderated variances (moderated: limma's
    empirical Bayes, Smyth 2004). A dt's interval holds 1 exactly where the t interval of its mean minus the level
    holds 0, with the variance of that difference from every dt's moderated variance and the t quantile at its
    Satterthwaite degrees of freedom. Why it holds:
    - it is the t test of a contrast of independent normal means, exact where each dt's runs are normal with the
      moderated variance's law; a moderated variance has, in limma's model, a scaled chi-square law with d0 + d degrees
      of freedom, and its t its t law. Its bounds are quantiles of that law, not resamples: the same at any number of
      bootstrap resamples, and no extreme draw sets them at five seeds;
    - each dt's variance is moderated toward the others' only as far as the dt's variances agree: a dt whose runs
      spread far more than the others' (a bimodal dt among tight ones) keeps about its own, wide one (the pooled t
      gives it the others' narrow one); a dt whose few runs happen to agree (all balancing where stalls are rare) is
      pulled up toward the others' (its own alone would give it a falsely narrow one). The prior's degrees of freedom
      are fitted to the grid's own variances, so no spread is assumed;
    - where every dt has the same normal spread, d0 is large and the intervals are about the pooled t's, with its
      power.
    How often they cover 1 on invariant synthetic grids, and find a departure, at 5 to 30 seeds: analysis/calibration.py
    (`python -m analysis.invariance --calibrate` prints the table).

    The share that learns: per dt a Clopper-Pearson interval at the same Bonferroni level, and the exact test of the
    2 x dt table across dt (share_test); a dt's share departs where that test finds that the shares differ (p < 0.05)
    and Fisher's test of its runs against the other dt's runs does at 0.05 / number of dt (share_departures)."""
    dts = tuple(sorted(scores, reverse=True))
    samples = [np.asarray(scores[dt], dtype=float) for dt in dts]
    seeds = min(len(sample) for sample in samples)
    learned = tuple((int((sample >= line).sum()), len(sample)) for sample in samples)
    level = simultaneous_level(len(dts), simultaneous)
    shares, share_p = share_intervals(learned, level), share_test(learned)
    means = np.array([sample.mean() for sample in samples])
    relative = relative_to_mean(means)
    if np.isnan(relative).any():
        return EveryStep(dts, None, None, learned, seeds, shares, share_p)
    intervals = None
    if len(dts) >= 2 and seeds >= 2:
        fit = moderated(samples, method)
        level_weights = np.full(len(dts), 1 / len(dts))
        bounds = [fieller_bounds(fit, np.eye(len(dts))[index], level_weights, level) for index in range(len(dts))]
        if all(bounds):
            intervals = tuple((float(low), float(high)) for low, high in bounds)
    return EveryStep(dts, tuple(float(value) for value in relative), intervals, learned, seeds, shares, share_p)


def step_differences(variant, reference, method="moderated"):
    """Per dt of the reference (coarsest first), the difference of the two methods' mean scores, variant minus
    reference, and its interval that holds over all dt at once (1 - 0.05 / number of dt each, Bonferroni, as
    every_step's): t at the Satterthwaite degrees of freedom of the two variances, each method's moderated within
    its own dt (moderated). None for a dt where a method has a single run. compare.py's every-step verdict."""
    dts = sorted(reference, reverse=True)
    fits = [moderated([np.asarray(scores[dt], dtype=float) for dt in dts], method) for scores in (variant, reference)]
    level = simultaneous_level(len(dts))
    steps = []
    for index, dt in enumerate(dts):
        difference = float(fits[0].means[index] - fits[1].means[index])
        bounds = None
        if min(fit.runs[index] for fit in fits) >= 2:
            terms = [fit.variances[index] / fit.runs[index] for fit in fits]
            most = sum((fit.runs - 1).sum() for fit in fits)
            degrees = satterthwaite(terms, [fit.dfs[index] for fit in fits], most)
            half = quantile(level, degrees) * math.sqrt(sum(terms))
            bounds = (difference - half, difference + half)
        steps.append((dt, difference, bounds))
    return steps


# --- The words of a verdict ------------------------------------------------------------------------------------------

WITHIN = 0.10  # "within N% of one level at every step" where every step's interval lies within this of 1


def percent(share, outward):
    """A share as a whole percent, rounded away from the interval's inside ("up" for a far bound, "down" for a near
    one), so that the words' range holds the interval: 0.2651 to 0.5288 lower reads "26% to 53% lower"."""
    scaled = 100 * share
    return math.ceil(scaled - 1e-9) if outward == "up" else math.floor(scaled + 1e-9)


def verdict(result, steps):
    """A method's words, by one rule, from what invariance.py prints (an Invariance and an EveryStep), the first that
    applies; each percentage is the interval's bound rounded outward to a whole percent (percent), so that the words
    state a bound the interval supports:
    1. fine / coarse has an interval: "N% to M% lower at the finest steps" where it lies below 1, "N% to M% higher ..."
       where above, "within N% of one level at every step" where it holds 1 and every step's interval lies within
       WITHIN of 1 (N the farthest bound), else "undecided (N% lower to M% higher at the finest steps)";
    2. a fine / coarse ratio without an interval (its coarse level not resolved above untrained): "undecided (the
       coarse steps not resolved above untrained)";
    3. no ratio (the coarse steps no better than untrained): by the runs that learn, "learns at no step" where none
       does, else "learns at dt A and B only (k and l of n runs)" naming every dt where some run does, or "learns at
       every step (...)" where that is every dt."""
    if result.ratio is not None and result.ratio_interval is not None:
        low, high = result.ratio_interval
        if excludes(result.ratio_interval) == "below":
            return f"{percent(1 - high, 'down')}% to {percent(1 - low, 'up')}% lower at the finest steps"
        if excludes(result.ratio_interval) == "above":
            return f"{percent(low - 1, 'down')}% to {percent(high - 1, 'up')}% higher at the finest steps"
        if steps.intervals:
            farthest = max(max(1 - a, b - 1) for a, b in steps.intervals)
            if farthest <= WITHIN:
                return f"within {percent(farthest, 'up')}% of one level at every step"
        return f"undecided ({percent(1 - low, 'up')}% lower to {percent(high - 1, 'up')}% higher at the finest steps)"
    if result.ratio is not None:
        return "undecided (the coarse steps not resolved above untrained)"
    learning = [(dt, k, n) for dt, (k, n) in zip(steps.dts, steps.learned, strict=True) if k > 0]
    if not learning:
        return "learns at no step"
    where = " and ".join(", ".join(f"{dt:g}" for dt, _, _ in learning).rsplit(", ", 1))
    counts = " and ".join(", ".join(str(k) for _, k, _ in learning).rsplit(", ", 1))
    runs = {n for _, _, n in learning}
    of = f"of {runs.pop()}" if len(runs) == 1 else "of their"
    if len(learning) == len(steps.dts):
        return f"learns at every step ({counts} {of} runs)"
    return f"learns at dt {where} only ({counts} {of} runs)"


def probability_of_improvement(better, worse, axis=-1):
    """P(X > Y) + P(X = Y) / 2 for X a run of one sample and Y of the other, over all pairs; the samples along
    `axis` (the bootstrap passes a batch of resamples at once)."""
    better = np.moveaxis(np.asarray(better), axis, -1)[..., :, None]
    worse = np.moveaxis(np.asarray(worse), axis, -1)[..., None, :]
    return np.mean((better > worse) + 0.5 * (better == worse), axis=(-2, -1))
