"""Finished runs read into numbers: each run's curve and score, an environment's normalised scale, and the fixed
return at which a run counts as one that learns. No plotting here: analysis/invariance.py prints its lines from this
module, analysis/robustness.py's statistics and analysis/tables.py's text without importing matplotlib.

A run's score is the mean of its evaluations over the second half of its training time (run_score). On an
environment's normalised scale, 0 is untrained (the mean first evaluation of its runs) and 1 the best mean of any
algorithm and dt among the runs read (env_scores): a scale that moves with the folders read, so the line for "learns"
is not drawn on it but fixed in return units, per environment (LEARNS).
"""

import csv
import math
import sys
from collections import defaultdict
from typing import NamedTuple

import numpy as np

from harness.archive import RefusedRuns, finished_runs

# The return at which a run learns, per environment (scaled return, the same at every dt), fixed in advance: half the
# return at which Gymnasium's registry calls the environment solved (its spec's reward_threshold); Pendulum, which
# has none, at half what a pendulum hanging at rest pays over an episode (pi^2 a native step for 200 steps), halfway
# from hanging to upright throughout. docs/benchmarks.md, "The line for a run that learns", shows this table.
LEARNS = {
    "CartPole-v1": 475 / 2,
    "Pendulum-v1": -(math.pi**2) * 200 / 2,
    "HalfCheetah-v4": 4800 / 2,
    "Ant-v4": 6000 / 2,
    "BipedalWalker-v3": 300 / 2,
}
# What an environment without a line for a run that learns lacks, and where to add it.
LACKS_LINE = ("it has no line for a run that learns: add one to analysis/scores.py's LEARNS (and docs/benchmarks.md's "
              "table), with its reason")  # fmt: skip


class Curve(NamedTuple):
    """One finished run: its evaluations, how long it took, and its budget (physical seconds)."""

    times: np.ndarray
    returns: np.ndarray
    wall_time: float
    total_time: float


def read_curve(run_dir, run):
    """The run's Curve: its evaluations (evals.csv) and wall time (run.json)."""
    with open(run_dir / "evals.csv") as file:
        rows = list(csv.DictReader(file))
    times = np.array([float(row["physical_time"]) for row in rows])
    returns = np.array([float(row["scaled_return"]) for row in rows])
    return Curve(times, returns, run.get("wall_time", float("nan")), float(run["args"]["total_time"]))


def common_evaluations(curves):
    """For each Curve, the indices of the evaluations every curve made: matched by physical time (to within half the
    shortest gap between two evaluations of one curve, the final one's included), not by row, since an evaluation
    abandoned after a SIGTERM leaves its row out of one run's evals.csv (harness/evaluations.py) and its later rows
    would otherwise meet other times. A ValueError if no evaluation is common to all."""
    gaps = [gap for curve in curves for gap in np.diff(curve.times) if gap > 0]
    tolerance = min(gaps) / 2 if gaps else 1e-6  # one evaluation each: the same time only
    slots = []  # [first time, {curve: row}], in time order
    for time, index, row in sorted((t, i, r) for i, curve in enumerate(curves) for r, t in enumerate(curve.times)):
        if not slots or time - slots[-1][0] >= tolerance or index in slots[-1][1]:
            slots.append([time, {}])
        slots[-1][1][index] = row
    common = [rows for _, rows in slots if len(rows) == len(curves)]
    if not common:
        raise ValueError(f"no evaluation time common to the {len(curves)} curves")
    return [np.array([rows[index] for rows in common], dtype=int) for index in range(len(curves))]


def budget(run):
    """(total_time, eval_every) of a run: runs are compared, and their curves averaged, only within one budget."""
    return run["args"]["total_time"], run["args"]["eval_every"]


def load_runs(runs_dir, env_ids=(), seeds=(), need_lines=True):
    """{env_id: {algorithm: {dt: [Curve, one per seed]}}} of the finished runs (finished_runs), of these seeds
    only if any are given. A label whose runs evaluate at different --eval-every is refused (RefusedRuns): its
    curves would be averaged over evaluations made at different times (finished_runs already names a label's
    budgets apart). `need_lines`: an environment without a line for a run that learns (LEARNS) is left out, the
    others read, and one line on stderr says what it lacks (every_step's verdicts need the line)."""
    runs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    intervals = defaultdict(set)
    for (env_id, algorithm, dt, seed), (run_dir, run) in finished_runs(runs_dir, env_ids).items():
        if seeds and seed not in seeds:
            continue
        runs[env_id][algorithm][dt].append(read_curve(run_dir, run))
        intervals[env_id, algorithm].add(float(run["args"]["eval_every"]))
    for (env_id, algorithm), seen in intervals.items():
        if len(seen) > 1:
            raise RefusedRuns(f"{env_id} {algorithm} mixes evaluation intervals (--eval-every "
                              f"{', '.join(f'{every:g}' for every in sorted(seen))} s): keep one of them in the "
                              "folders read")  # fmt: skip
    for env_id in [env_id for env_id in runs if need_lines and env_id not in LEARNS]:
        print(f"{env_id} left out: {LACKS_LINE}", file=sys.stderr)
        del runs[env_id]
    return runs


def final_return(curve, last):
    """A run's final return: the mean of its last `last` evaluations (analysis/spread.py: what one run ends with; the
    robustness numbers use run_score)."""
    return np.mean(curve.returns[-last:])


def run_score(curve):
    """A run's one number: the mean of its evaluations over the second half of its training time. Its last few
    evaluations alone are noisier (CartPole DAU's coarse-step SD over seeds: 76 with the last 3, 38 with these)."""
    return np.mean(curve.returns[curve.times >= curve.total_time / 2 - 1e-6])


def untrained_level(algorithms):
    """The score's 0 for an environment: the mean first evaluation (physical time 0) of all its runs,
    {algorithm: {dt: [Curve, ...]}}."""
    return np.mean([curve.returns[0] for by_dt in algorithms.values() for curves in by_dt.values() for curve in curves])


def env_scores(algorithms):
    """An environment's runs on its score: ({algorithm: {dt: [each run's run_score]}}, untrained, best), where
    the score is (return - untrained) / (best - untrained): untrained the mean evaluation at physical time 0 of all
    its runs, best the best mean run score of any algorithm and dt (1: the best seen, 0: no better than untrained)."""
    returns = {algorithm: {dt: [run_score(curve) for curve in curves] for dt, curves in by_dt.items()}
               for algorithm, by_dt in algorithms.items()}  # fmt: skip
    untrained = untrained_level(algorithms)
    best = max(np.mean(values) for by_dt in returns.values() for values in by_dt.values())
    return returns, untrained, best


def normalised(by_dt, untrained, best):
    """{dt: run scores} on the score's scale (env_scores)."""
    return {dt: (np.asarray(values) - untrained) / (best - untrained) for dt, values in by_dt.items()}


def learns_line(env_id):
    """LEARNS' return for this environment; refused, naming the table, for one it does not have."""
    if env_id not in LEARNS:
        raise RefusedRuns(f"{env_id}: {LACKS_LINE}")
    return LEARNS[env_id]


def learns_score(env_id, untrained, best):
    """The environment's line for "learns" on its normalised scale (robustness.every_step's `line`): a run learns
    where its return is at least LEARNS' return, whatever folders set the scale."""
    return (learns_line(env_id) - untrained) / (best - untrained)
