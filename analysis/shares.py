"""The runs that learn per dt (a score at least the environment's line: analysis/scores.py's LEARNS): exact binomial
intervals of each dt's share (Clopper-Pearson) and the exact test that every dt has the same share (Freeman-Halton),
which analysis/robustness.py's every_step reports beside the mean's intervals.
"""

import functools

import numpy as np
from scipy import special, stats


def share_intervals(learned, level):
    """Clopper-Pearson intervals (exact binomial) of each dt's share that learns, at `level`."""
    return tuple(clopper_pearson(k, n, level) for k, n in learned)


@functools.cache  # the calibrations' thousands of grids draw the same few counts
def clopper_pearson(k, n, level):
    tail = (1 - level) / 2
    return (float(stats.beta.ppf(tail, k, n - k + 1)) if k > 0 else 0.0,
            float(stats.beta.isf(tail, k + 1, n - k)) if k < n else 1.0)  # fmt: skip


def share_test(learned):
    """The p-value of the exact test that every dt has the same chance to learn, from (runs that learn, runs) per dt
    (Freeman and Halton, Biometrika 38, 1951: Fisher's exact test of a 2 x dt table; each table with the observed
    margins has its hypergeometric probability, and p is the total probability of those no more likely than the
    one observed). Every table is counted, each half of the dt enumerated apart and the halves met by their sums."""
    return exact_share_test(tuple((int(k), int(n)) for k, n in learned))


@functools.cache  # the calibrations' thousands of grids draw the same tables again and again
def exact_share_test(learned):
    counts = np.array([k for k, _ in learned])
    runs = np.array([n for _, n in learned])
    total = int(counts.sum())
    if len(runs) < 2 or total in (0, int(runs.sum())):
        return 1.0
    ways = [np.arange(n + 1) for n in runs]  # the runs that learn that each dt can have
    log_choose = [
        special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
        for n, k in zip(runs, ways, strict=True)
    ]
    observed = sum(column[k] for column, k in zip(log_choose, counts, strict=True))
    observed += 1e-7 * abs(observed) + 1e-12  # ties within rounding count as no more likely

    def half(columns):
        """Every table of these dt alone: its runs that learn, and the log of its product of binomial weights."""
        sums, log_p = np.zeros(1, dtype=int), np.zeros(1)
        for column in columns:
            sums = np.add.outer(sums, np.arange(len(column))).ravel()
            log_p = np.add.outer(log_p, column).ravel()
        return sums, log_p

    middle = len(runs) // 2
    sums_a, log_a = half(log_choose[:middle])
    sums_b, log_b = half(log_choose[middle:])
    order = np.lexsort((log_b, sums_b))  # by sum, then by weight
    sums_b, log_b = sums_b[order], log_b[order]
    shift = log_a.max() + log_b.max()
    as_extreme = everything = 0.0
    for learners in np.unique(sums_a):
        first, last = np.searchsorted(sums_b, [total - learners, total - learners + 1])
        if first == last:
            continue
        block = log_b[first:last]  # the other half's tables that complete these to the observed margins
        cumulative = np.concatenate([[0.0], np.cumsum(np.exp(block + log_a.max() - shift))])
        weights = np.exp(log_a[sums_a == learners] - log_a.max())
        as_extreme += weights @ cumulative[np.searchsorted(block, observed - log_a[sums_a == learners], "right")]
        everything += weights.sum() * cumulative[-1]
    return float(min(1.0, as_extreme / everything))
