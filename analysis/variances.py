"""The dt's moderated variances (limma's empirical Bayes, Smyth 2004), the one input of every interval that a verdict
of analysis/robustness.py rests on, and the intervals made of them: t_bounds for a contrast of the dt's means,
fieller_bounds for a ratio of two. Each interval's bounds are quantiles of a t distribution, not resamples.
"""

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, special

METHODS = ("moderated", "limma", "pooled", "within")  # the variances of moderated(): the one used, and three others


class Moderated(NamedTuple):
    """Per dt: the mean of its runs, the variance of one run (moderated), its degrees of freedom and the runs."""

    means: np.ndarray
    variances: np.ndarray
    dfs: np.ndarray
    runs: np.ndarray


def trigamma_inverse(value):
    """y with trigamma(y) = value (value > 0): trigamma falls from infinity to 0 on (0, infinity)."""
    low, high = 1e-8, 1.0
    while special.polygamma(1, high) > value:
        high *= 2
    return optimize.brentq(lambda y: special.polygamma(1, y) - value, low, high, xtol=1e-12, rtol=1e-12)


def prior(variances, dfs):
    """(prior variance s0^2, prior degrees of freedom d0) of sample variances with `dfs` degrees of freedom each:
    limma's fitFDist (Smyth, SAGMB 3, 2004, section 6), the moments of log s^2. Each s^2 is taken as s0^2 times an
    F(d, d0) draw: log s^2 - digamma(d / 2) + log(d / 2) has mean log s0^2 - digamma(d0 / 2) + log(d0 / 2) and variance
    trigamma(d / 2) + trigamma(d0 / 2); d0 is infinite where the log variances spread no more than their own chance
    alone makes them (one variance for every dt). Zero variances are offset to 1e-5 times the median, as limma does."""
    variances, dfs = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    variances, dfs = variances[dfs > 0], dfs[dfs > 0]
    if len(variances) == 0 or not np.any(variances > 0):
        return 0.0, math.inf
    if len(variances) == 1:
        return float(variances[0]), 0.0
    median = np.median(variances)
    offset = np.maximum(variances, 1e-5 * (median if median > 0 else 1.0))
    e = np.log(offset) - special.digamma(dfs / 2) + np.log(dfs / 2)
    excess = np.var(e, ddof=1) - np.mean(special.polygamma(1, dfs / 2))
    if excess <= 0:
        return float(np.exp(e.mean())), math.inf
    d0 = 2 * trigamma_inverse(excess)
    return float(np.exp(e.mean() + special.digamma(d0 / 2) - np.log(d0 / 2))), float(d0)


def moderated(samples, method="moderated"):
    """Each sample's (one per dt) mean and the variance of one run, with its degrees of freedom (Moderated):
    - "moderated": limma's posterior variance (Smyth 2004), (d0 s0^2 + d s^2) / (d0 + d) with d0 + d degrees of
      freedom (at most the pooled variance's sum of d, as limma caps them), s0^2 and d0 fitted to the dt's own
      variances (prior), then floored at the pooled within-dt variance. The moderation shrinks a dt's variance toward
      the others' only as far as the dt's variances agree: where one dt's runs spread far more (a bimodal dt among
      tight ones), d0 is small and it keeps about its own. The floor keeps a dt whose few runs agree from a narrow
      interval where the fit cannot tell chance from a tighter law: limma's model takes each variance for a normal
      sample's, and the runs' stall-or-balance laws spread sample variances far more than normal ones, so the fit
      reads their chance spread as dt that truly differ (d0 near 0, no shrinkage). Where a dt's runs truly spread less
      (tight coarse steps), the floor only widens its interval;
    - "limma": the posterior variance without the floor;
    - "pooled": the pooled within-dt variance for every dt, with the sum of the d (the classical pooled t);
    - "within": each dt's own variance, with its own d (Welch's t)."""
    samples = [np.asarray(sample, dtype=float) for sample in samples]
    means = np.array([sample.mean() for sample in samples])
    runs = np.array([len(sample) for sample in samples], dtype=float)
    dfs = runs - 1
    own = np.array([sample.var(ddof=1) if len(sample) > 1 else 0.0 for sample in samples])
    pooled_df = dfs.sum()
    pooled = float((own * dfs).sum() / pooled_df) if pooled_df else 0.0
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "within":
        return Moderated(means, own, dfs, runs)
    if method == "pooled":
        return Moderated(means, np.full(len(samples), pooled), np.full(len(samples), pooled_df), runs)
    s0, d0 = prior(own, dfs)
    if math.isinf(d0):
        variances, degrees = np.full(len(samples), s0), np.full(len(samples), pooled_df)
    else:
        variances, degrees = (d0 * s0 + dfs * own) / (d0 + dfs), np.minimum(d0 + dfs, pooled_df)
    if method == "limma":
        return Moderated(means, variances, degrees, runs)
    floored = variances < pooled  # the pooled variance, with its own degrees of freedom
    return Moderated(means, np.where(floored, pooled, variances), np.where(floored, pooled_df, degrees), runs)


def satterthwaite(terms, dfs, most):
    """Welch-Satterthwaite degrees of freedom of a sum of variance terms, each with its own, at most `most`: the
    runs' own degrees of freedom in all, sum(n - 1). The cap matters where the terms share one estimate (the pooled
    variance, or moderated variances that share their prior), which the formula would count as independent ones."""
    terms, dfs = np.asarray(terms, dtype=float), np.asarray(dfs, dtype=float)
    total = terms.sum()
    parts = np.divide(terms**2, dfs, out=np.zeros_like(terms), where=np.isfinite(dfs) & (terms > 0))
    return float(most) if parts.sum() == 0 else float(min(total**2 / parts.sum(), most))


def quantile(level, df):
    """The two-sided t quantile of a `level` interval (the normal's at infinite degrees of freedom). stats.t.ppf's
    own function (the same bits), without its argument checks, most of its cost in the calibrations' grids."""
    return float(special.stdtrit(df, 0.5 + level / 2)) if df > 0 else math.nan


def t_bounds(fit, weights, level):
    """The `level` interval of sum(weights * means) (a contrast of the dt's means): Student's t at the Satterthwaite
    degrees of freedom of its moderated variance."""
    terms = np.asarray(weights) ** 2 * fit.variances / fit.runs
    estimate = float(np.dot(weights, fit.means))
    half = quantile(level, satterthwaite(terms, fit.dfs, (fit.runs - 1).sum())) * math.sqrt(terms.sum())
    return estimate - half, estimate + half


def fieller_bounds(fit, numerator, denominator, level):
    """The `level` interval of a ratio of two contrasts of the dt's means, a / b (Fieller, JRSS B 16, 1954): every r
    with (a - r b)^2 <= q^2 var(a - r b), q the t quantile at the Satterthwaite degrees of freedom of a - b. So it
    holds 1 exactly where the t interval of a - b holds 0 (one decision for the ratio and the difference). None where
    the set is not one bounded interval: b is not resolved away from 0 (b^2 <= q^2 var(b)), no level to divide by."""
    numerator, denominator = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    per_run = fit.variances / fit.runs
    a, b = float(np.dot(numerator, fit.means)), float(np.dot(denominator, fit.means))
    v_aa, v_bb = float(np.sum(numerator**2 * per_run)), float(np.sum(denominator**2 * per_run))
    v_ab = float(np.sum(numerator * denominator * per_run))
    q2 = quantile(level, satterthwaite((numerator - denominator) ** 2 * per_run, fit.dfs, (fit.runs - 1).sum())) ** 2
    lead, half, constant = b * b - q2 * v_bb, a * b - q2 * v_ab, a * a - q2 * v_aa
    if lead <= 0:
        return None
    root = math.sqrt(max(half * half - lead * constant, 0.0))
    return (half - root) / lead, (half + root) / lead
