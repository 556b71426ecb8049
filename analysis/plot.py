"""The paper's robustness figure and table from finished runs (runs/*/run.json and evals.csv).

    python analysis/plot.py --runs docs/results --env-ids Pendulum-v1 CartPole-v1 --out docs/figures/curves.png
    python analysis/plot.py --runs docs/results/cartpole_horizon_grid --page docs/benchmarks.md   # a folder's tables
    python analysis/plot.py --runs docs/results --algorithms DQN --out docs/figures/dqn_baseline.png  # one script's

Runs are read and labelled by analysis/archive.py (DAU, DQN-unscaled, DAU+round_seconds=0.1...). One row of panels per
environment, one panel per algorithm, one curve per dt: scaled return against physical time, the mean over seeds
with the 95% bootstrap interval of that mean as a band, on the same axes for every dt and algorithm of an
environment. The table gives, per dt, the mean over seeds of each run's score (run_score: the mean of its evaluations
over the second half of its training time), and per algorithm the invariance statistic on the normalised score
(return - untrained) / (best - untrained), "untrained" the mean evaluation at physical time 0 over the environment's
runs and "best" the best mean run score of any algorithm and dt (1: the best seen, 0: no better than untrained):
- fine / coarse: the mean score of the two finest dt over that of the two coarsest (1: the same at every dt);
- slope per halving: the score's change each time dt halves (0: the same at every dt);
- worst / best dt: the worst dt's mean over the best's, a biased, low-power summary kept for the earlier tables.
A last row per baseline (or variant) gives, per dt, the probability that a DAU run scores above one of its runs
(Agarwal et al., NeurIPS 2021: P(X > Y) + P(X = Y) / 2 over all pairs of runs), with its interval. A second table
gives every step against the method's own level and the runs that learn (every_step). docs/benchmarks.md holds
every kept grid's tables, each between two lines that name its folder (--page), and says how to read them.
Intervals are bootstraps over runs, each dt's runs resampled on their own (scipy.stats.bootstrap, 10,000 resamples,
a fixed generator so that the tables redraw the same; Hesterberg's expanded percentile interval, expanded_level); a
cell of one run has none. analysis/invariance.py prints the invariance statistic alone, one line per env and algorithm.
Under each table, the wall time of the runs per algorithm: summed over runs (a sweep with N workers
takes about 1/N of it) and per run, mean over seeds, for each dt.
"""

import csv
import functools
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import matplotlib
import numpy as np
import tyro
from archive import RefusedRuns, finished_runs
from robustness import (
    LEARNS,
    every_step,
    interval,
    invariance,
    probability_of_improvement,
    robustness_ratio,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@dataclass
class Options:
    runs: Path = Path("runs")
    """the directory holding the runs (each runs/<run_name>/ with run.json and evals.csv)"""
    env_ids: tuple[str, ...] = ()
    """environments to show, in this order; empty: every environment found"""
    out: Path = Path("curves.png")
    """where to write the figure (PNG)"""
    table: Path | None = None
    """also write the robustness table (Markdown) here; it is always printed"""
    page: Path | None = None
    """also write the table into this Markdown page, in place of what is between its two lines that name the --runs
    folder (page_markers)"""
    algorithms: tuple[str, ...] = ()
    """show only these algorithms' panels and rows (DAU: with its variants; DQN, DDPG: either variant), as on each
    script's page; the scores are still those of the whole table. Empty: all"""


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


def budget(run):
    """(total_time, eval_every) of a run: runs are compared, and their curves averaged, only within one budget."""
    return run["args"]["total_time"], run["args"]["eval_every"]


def load_runs(runs_dir, env_ids=(), seeds=()):
    """{env_id: {algorithm: {dt: [Curve, one per seed]}}} of the finished runs (finished_runs), of these seeds
    only if any are given. A label whose runs evaluate at different --eval-every is refused (RefusedRuns): its
    curves would be averaged over evaluations made at different times (finished_runs already names a label's
    budgets apart)."""
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


def every_step_cells(result):
    """Per dt "1.02 [0.85, 1.21], 14/15 [0.62, 1.00]" (the mean score with its interval, the runs that learn with
    their share's), what departs: "dt 0.002 below" or "none" ("—": no level), and where the share that learns
    departs, with the test across dt: "dt 0.01 above (p 0.002)"."""
    cells = []
    for index, (learned, runs) in enumerate(result.learned):
        level = "—" if result.relative is None else f"{result.relative[index]:.2f}"
        share = bracket(result.shares[index] if result.shares else None, ".2f")
        cells.append(f"{level}{bracket(result.intervals and result.intervals[index], '.2f')}, {learned}/{runs}{share}")
    departs = ", ".join(f"dt {dt:g} {side}" for dt, side in result.departures()) or "none"
    p = "p < 0.001" if result.share_p < 0.001 else f"p {result.share_p:.3f}"
    shares = ", ".join(f"dt {dt:g} {side}" for dt, side in result.share_departures()) or "none"
    return cells, departs if result.intervals else "—", f"{shares} ({p})"


def every_step_line(env_id, algorithm, result):
    """The every-step line analysis/invariance.py prints below the invariance lines."""
    cells, departs, shares = every_step_cells(result)
    steps = "; ".join(f"{dt:g}: {cell}" for dt, cell in zip(result.dts, cells, strict=True))
    return f"every-step {env_id} {algorithm} {steps}; departs: {departs}; share departs: {shares}; seeds {result.seeds}"


def mean_curve(curves):
    """Seeds' curves aligned by evaluation index (every run evaluates at the same physical times, up to
    one round): mean time, mean return, and the 95% bootstrap interval of the mean (the mean itself for
    a single run)."""
    length = min(len(curve.times) for curve in curves)
    times = np.mean([curve.times[:length] for curve in curves], axis=0)
    returns = np.array([curve.returns[:length] for curve in curves])
    band = interval((returns,), np.mean, vectorized=True)
    low, high = band if band else (returns.mean(0), returns.mean(0))
    return times, returns.mean(0), low, high


def shown(algorithm, algorithms):
    """Whether --algorithms selects this algorithm: all when empty; a name selects itself and, by its first
    word, its variants ("DAU" also "DAU+round_seconds=0.1"; "DQN" both DQN-unscaled and DQN-scaled)."""
    return not algorithms or algorithm in algorithms or re.split(r"[+@-]", algorithm)[0] in algorithms


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


def invariance_line(env_id, algorithm, result):
    """The line analysis/invariance.py prints (other tools read it): nan where there is no number."""

    def number(value, spec):
        return "nan" if value is None else f"{value:{spec}}"

    def bounds(pair, spec):
        low, high = pair or (None, None)
        return f"[{number(low, spec)}, {number(high, spec)}]"

    return (f"invariance {env_id} {algorithm} fine/coarse {number(result.ratio, '.2f')} "
            f"{bounds(result.ratio_interval, '.2f')} slope {number(result.slope, '+.3f')} "
            f"{bounds(result.slope_interval, '+.3f')} seeds {result.seeds}")  # fmt: skip


def invariance_lines(runs, statistic=invariance, line=invariance_line):
    """One invariance_line per environment and algorithm of load_runs' {env_id: {algorithm: {dt: [Curve]}}}; with
    statistic=every_step and line=every_step_line, the every-step lines."""
    lines = []
    for env_id, algorithms in runs.items():
        returns, untrained, best = env_scores(algorithms)
        for algorithm in sorted(algorithms, key=lambda name: (name != "DAU", name)):
            result = statistic(normalised(returns[algorithm], untrained, best))
            lines.append(line(env_id, algorithm, result))
    return lines


def robustness_table(runs, selected=()):
    """Markdown: per algorithm, the mean run score per dt, fine/coarse and the slope per halving (invariance), and
    the worst-dt / best-dt ratio; with `selected` (--algorithms), only their rows (and the probabilities that
    involve them), scored as in the whole table."""
    lines = []
    for env_id, algorithms in runs.items():
        if not any(shown(algorithm, selected) for algorithm in algorithms):
            continue
        returns, untrained, best = env_scores(algorithms)
        dts = sorted({dt for by_dt in returns.values() for dt in by_dt}, reverse=True)
        lines += [f"**{env_id}**: scaled return, each run's mean over the second half of its training (mean over "
                  "seeds [95% interval] (seeds))", ""]  # fmt: skip
        lines += ["| algorithm | " + " | ".join(f"dt {dt:g}" for dt in dts)
                  + " | fine / coarse | slope per halving | worst / best dt |"]  # fmt: skip
        lines += ["|---" * (len(dts) + 4) + "|"]
        for algorithm in sorted(algorithms, key=lambda name: (name != "DAU", name)):
            if not shown(algorithm, selected):
                continue
            by_dt = returns[algorithm]
            cells = [f"{mean_cell(by_dt[dt])} (n={len(by_dt[dt])})" if dt in by_dt else "—" for dt in dts]
            result = invariance(normalised(by_dt, untrained, best))
            ratio_text = "—" if result.ratio is None else f"{result.ratio:.2f}{bracket(result.ratio_interval, '.2f')}"
            slope_text = "—" if result.slope is None else f"{result.slope:+.3f}{bracket(result.slope_interval, '+.3f')}"
            # Below untrained counts as nothing learned (0); with no dt above it, there is no ratio to give.
            per_dt = [by_dt[dt] for dt in dts if dt in by_dt]
            worst = robustness_ratio(*per_dt, untrained=untrained) if best > untrained else None
            if worst is not None:
                resampled = functools.partial(robustness_ratio, untrained=untrained)
                worst_interval = interval(per_dt, lambda *values, ratio_of=resampled: ratio_of(*values) or 0.0)
                worst = f"{worst:.2f}{bracket(worst_interval, '.2f')}"
            lines.append(f"| {algorithm} | " + " | ".join(cells) + f" | {ratio_text} | {slope_text} | {worst or '—'} |")
        for baseline in sorted(algorithm for algorithm in algorithms if algorithm != "DAU" and "DAU" in algorithms):
            if not (shown("DAU", selected) or shown(baseline, selected)):
                continue
            cells = []
            for dt in dts:
                if dt not in returns["DAU"] or dt not in returns[baseline]:
                    cells.append("—")
                    continue
                cells.append(improvement_cell(returns["DAU"][dt], returns[baseline][dt]))
            lines.append(f"| P(DAU > {baseline}) | " + " | ".join(cells) + " | | | |")
        lines += ["", f"Untrained (physical time 0): {untrained:.1f}; best mean run score: {best:.1f}: the score's 0 "
                  "and 1 ([how to read these tables](benchmarks.md)).", ""]  # fmt: skip
        lines += [f"**Every step**: each dt's mean score over the mean of all its dt's [95% interval, simultaneous "
                  f"over the dt], and the runs that learn (score at least {LEARNS:g}: a return of "
                  f"{untrained + LEARNS * (best - untrained):.1f} or more) [their share's 95% interval, simultaneous]",
                  ""]  # fmt: skip
        lines += ["| algorithm | " + " | ".join(f"dt {dt:g}" for dt in dts)
                  + " | mean departs from 1 | share that learns departs (p across dt) |"]  # fmt: skip
        lines += ["|---" * (len(dts) + 3) + "|"]
        for algorithm in sorted(algorithms, key=lambda name: (name != "DAU", name)):
            if shown(algorithm, selected):
                result = every_step(normalised(returns[algorithm], untrained, best))
                cells, departs, shares = every_step_cells(result)
                by_dt = dict(zip(result.dts, cells, strict=True))
                lines.append(f"| {algorithm} | " + " | ".join(by_dt.get(dt, "—") for dt in dts)
                             + f" | {departs} | {shares} |")  # fmt: skip
        lines += [""]
        lines += [
            "Wall time (minutes): "
            + "; ".join(
                wall_times(algorithm, algorithms[algorithm])
                for algorithm in sorted(algorithms, key=lambda name: (name != "DAU", name))
                if shown(algorithm, selected)
            ),
            "",
        ]
    return "\n".join(lines)


def bracket(bounds, spec):
    """ " [low, high]", or nothing without an interval."""
    return f" [{bounds[0]:{spec}}, {bounds[1]:{spec}}]" if bounds else ""


def mean_cell(values):
    """ "mean [low, high]" of a sample's runs (a table's cell)."""
    return f"{np.mean(values):.1f}{bracket(interval((values,), np.mean, vectorized=True), '.1f')}"


def improvement_cell(better, worse):
    """ "P [low, high]": probability_of_improvement of one sample of runs over the other (1-D), with its interval."""
    pair = (better, worse)
    estimate = probability_of_improvement(*pair)
    return f"{estimate:.2f}{bracket(interval(pair, probability_of_improvement, vectorized=True), '.2f')}"


def wall_times(algorithm, by_dt):
    """ "DAU 137 in all, per run 1.2 at dt 0.01 ... 23 at dt 0.0005": summed over runs, then mean per run."""
    total = sum(curve.wall_time for curves in by_dt.values() for curve in curves) / 60
    per_run = [
        f"{np.mean([curve.wall_time for curve in by_dt[dt]]) / 60:.1f} at dt {dt:g}" for dt in sorted(by_dt)[::-1]
    ]
    return f"{algorithm} {total:.0f} in all, per run " + ", ".join(per_run)


def plot(runs, out, selected=()):
    runs = {env_id: {name: by_dt for name, by_dt in algorithms.items() if shown(name, selected)}
            for env_id, algorithms in runs.items()}  # fmt: skip
    runs = {env_id: algorithms for env_id, algorithms in runs.items() if algorithms}
    columns = max(len(algorithms) for algorithms in runs.values())
    figure, axes = plt.subplots(len(runs), columns, figsize=(5 * columns, 3.6 * len(runs)), squeeze=False)
    all_dts = sorted({dt for algorithms in runs.values() for by_dt in algorithms.values() for dt in by_dt})
    colors = dict(zip(all_dts, plt.cm.viridis(np.linspace(0, 0.9, len(all_dts))), strict=True))
    for row, (env_id, algorithms) in enumerate(runs.items()):
        for column, algorithm in enumerate(sorted(algorithms, key=lambda name: name != "DAU")):
            ax = axes[row, column]
            for dt, curves in sorted(algorithms[algorithm].items(), reverse=True):
                times, mean, low, high = mean_curve(curves)
                ax.plot(times, mean, color=colors[dt], label=f"dt {dt:g} (n={len(curves)})")
                ax.fill_between(times, low, high, color=colors[dt], alpha=0.15, linewidth=0)
            ax.set_title(f"{env_id}: {algorithm}")
            ax.set_xlabel("physical time (s)")
            ax.locator_params(axis="x", nbins=6)  # five-digit times: at most six ticks, or their labels touch
            ax.set_ylabel("scaled return")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
        row_axes = axes[row, : len(algorithms)]
        low = min(ax.get_ylim()[0] for ax in row_axes)
        high = max(ax.get_ylim()[1] for ax in row_axes)
        for ax in row_axes:  # the same axes for every algorithm of an environment
            ax.set_ylim(low, high)
        for ax in axes[row, len(algorithms) :]:
            ax.axis("off")
    save_figure(figure, out)


def save_figure(figure, out, dpi=110):
    """Lay the figure out and write it to `out` (PNG), making its folder."""
    figure.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=dpi)


def page_markers(runs):
    """The two lines between which --page puts the table of the runs in folder `runs` (the script pages' "Results"
    sections). They name the folder, so that a page can show the grid's runs and those of another budget kept
    apart (docs/results and docs/results/cartpole_12600), each table where its own command writes it."""
    folder = Path(runs).as_posix()
    return f"<!-- the table of analysis/plot.py --runs {folder} -->", f"<!-- end of the table of {folder} -->"


def check_page(page, markers):
    """Exit with what is wrong unless `page` is a file with one line of each marker, in order."""
    text = page.read_text() if page.is_file() else ""
    if not (all(text.count(marker) == 1 for marker in markers) and text.index(markers[0]) < text.index(markers[1])):
        sys.exit(f"error: --page {page} must be a file with one line {markers[0]} and one line {markers[1]} after it")


def write_page(page, text, markers):
    """Put `text` in the page in place of what is between its two marker lines."""
    head, rest = page.read_text().split(markers[0])
    tail = rest.split(markers[1])[1]
    page.write_text(f"{head}{markers[0]}\n\n{text}\n{markers[1]}{tail}")


def main(options):
    runs = load_runs(options.runs, options.env_ids)
    missing = [env_id for env_id in options.env_ids if env_id not in runs]
    if not runs or missing:
        sys.exit(f"error: no finished runs in {options.runs}/ for {', '.join(missing) or 'any environment'}")
    if options.page:
        check_page(options.page, page_markers(options.runs))
    if options.env_ids:
        runs = {env_id: runs[env_id] for env_id in options.env_ids}
    names = {name for algorithms in runs.values() for name in algorithms}
    if not any(shown(name, options.algorithms) for name in names):
        sys.exit(
            f"error: no runs of {', '.join(options.algorithms)} there; the algorithms are {', '.join(sorted(names))}"
        )
    plot(runs, options.out, options.algorithms)
    table = robustness_table(runs, options.algorithms)
    print(table)
    print(f"figure: {options.out}")
    if options.table:
        options.table.parent.mkdir(parents=True, exist_ok=True)
        options.table.write_text(table)
    if options.page:
        write_page(options.page, table, page_markers(options.runs))


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
