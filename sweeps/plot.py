"""The paper's robustness figure and table from finished runs (runs/*/run.json and evals.csv).

    python sweeps/plot.py --env-ids Pendulum-v1 CartPole-v1 --out docs/figures/curves.png --table docs/robustness.md
    python sweeps/plot.py --runs docs/results --algorithms DQN --out docs/figures/dqn_baseline.png  # one script's

One row of panels per environment, one panel per algorithm, one curve per dt: scaled return against
physical time, the mean over seeds with the 95% bootstrap interval of that mean as a band, on the same
axes for every dt and algorithm of an environment. The table gives the final scaled return per dt (the
mean of each run's last `--last` evaluations, then the mean over seeds and its 95% interval) and two
numbers per algorithm on a normalised score, (return - untrained) / (best - untrained), where
"untrained" is the mean evaluation at physical time 0 over the environment's runs and "best" the best
final mean of any algorithm and dt for that environment (1: the best seen, 0: no better than untrained):
- worst / best dt: the algorithm's worst dt over its best dt, its robustness to dt (1: the same at
  every dt, however good; 0: some dt ends no better than untrained; "—": no dt ends better), with its
  interval (the seeds of each dt resampled on their own);
- worst dt score: the score of its worst dt (1: every dt as good as the best seen).
A last row per baseline (or variant) gives, per dt, the probability that a DAU run ends above one of its runs
(Agarwal et al., NeurIPS 2021: P(X > Y) + P(X = Y) / 2 over all pairs of runs), with its interval.
Intervals are percentile bootstraps over runs (scipy.stats.bootstrap, 10,000 resamples, a fixed
generator so that the tables redraw the same); a cell of one run has none.
Under each table, the wall time of the runs per algorithm: summed over runs (a sweep with N workers
takes about 1/N of it) and per run, mean over seeds, for each dt.
"""

import csv
import functools
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import matplotlib
import numpy as np
import tyro
from scipy import stats

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BASELINES = {"ddpg_baseline.py": "DDPG", "dqn_baseline.py": "DQN"}
RESAMPLES = 10_000  # bootstrap resamples per interval


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
    last: int = 3
    """evaluations at the end of each run averaged into its final return"""
    page: Path | None = None
    """also write the table into this Markdown page, in place of what is between its two lines that name the --runs
    folder (page_markers)"""
    algorithms: tuple[str, ...] = ()
    """show only these algorithms' panels and rows (DAU: with its variants; DQN, DDPG: either variant), as on each
    script's page; the scores are still those of the whole table. Empty: all"""


class Curve(NamedTuple):
    """One finished run: its evaluations and how long it took."""

    times: np.ndarray
    returns: np.ndarray
    wall_time: float


def algorithm_name(run):
    """DAU, or the baseline and its variant: DDPG (unscaled), DQN (scaled)...; with --round-seconds T, followed
    by ", rounds of T s"."""
    name = "DAU"
    if run["script"] in BASELINES:
        name = f"{BASELINES[run['script']]} ({'scaled' if run['args'].get('scaled') else 'unscaled'})"
    if run["args"].get("round_seconds"):
        name += f", rounds of {run['args']['round_seconds']:g} s"
    return name


def finished_runs(runs_dir, env_ids=()):
    """{(env_id, algorithm, dt, seed): (run folder, run.json)} of the finished runs; of several runs with the
    same seed, the newest."""
    newest = {}
    for path in sorted(Path(runs_dir).glob("*/run.json"), key=lambda path: path.stat().st_mtime):
        run = json.loads(path.read_text())
        env_id = run["args"]["env_id"]
        if run.get("completed") and (not env_ids or env_id in env_ids):
            newest[env_id, algorithm_name(run), run["dt"], run["args"]["seed"]] = (path.parent, run)
    return dict(sorted(newest.items()))


def read_curve(run_dir, run):
    """The run's Curve: its evaluations (evals.csv) and wall time (run.json)."""
    with open(run_dir / "evals.csv") as file:
        rows = list(csv.DictReader(file))
    times = np.array([float(row["physical_time"]) for row in rows])
    returns = np.array([float(row["scaled_return"]) for row in rows])
    return Curve(times, returns, run.get("wall_time", float("nan")))


def budget(run):
    """(total_time, eval_every) of a run: runs are compared, and their curves averaged, only within one budget."""
    return run["args"]["total_time"], run["args"]["eval_every"]


def load_runs(runs_dir, env_ids=()):
    """{env_id: {algorithm: {dt: [Curve, one per seed]}}} of the finished runs (finished_runs). Warns when a
    panel mixes budgets."""
    runs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    budgets = defaultdict(set)
    for (env_id, algorithm, dt, _), (run_dir, run) in finished_runs(runs_dir, env_ids).items():
        runs[env_id][algorithm][dt].append(read_curve(run_dir, run))
        budgets[env_id, algorithm].add(budget(run))
    for (env_id, algorithm), seen in budgets.items():
        if len(seen) > 1:
            print(f"warning: {env_id} {algorithm} mixes (total_time, eval_every): {sorted(seen)}", file=sys.stderr)
    return runs


def final_return(curve, last):
    """A run's final return: the mean of its last `last` evaluations."""
    return np.mean(curve.returns[-last:])


def interval(samples, statistic, vectorized=False, axis=0):
    """The 95% percentile-bootstrap interval (low, high) of statistic(*samples), each sample resampled on
    its own (one per dt, or DAU's and a baseline's runs); None when a sample has a single run."""
    if min(np.shape(sample)[axis] for sample in samples) < 2:
        return None
    result = stats.bootstrap(samples, statistic, n_resamples=RESAMPLES, method="percentile", vectorized=vectorized,
                             axis=axis, rng=np.random.default_rng(0))  # fmt: skip
    return result.confidence_interval.low, result.confidence_interval.high


def untrained_level(algorithms):
    """The score's 0 for an environment: the mean first evaluation (physical time 0) of all its runs,
    {algorithm: {dt: [Curve, ...]}}."""
    return np.mean([curve.returns[0] for by_dt in algorithms.values() for curves in by_dt.values() for curve in curves])


def robustness_ratio(*finals, untrained):
    """Worst dt over best dt on the score, from each dt's final returns (0 when the worst is no better than
    untrained; None when no dt is)."""
    means = [np.mean(values) for values in finals]
    if max(means) <= untrained:
        return None
    return max(min(means) - untrained, 0) / (max(means) - untrained)


def probability_of_improvement(better, worse):
    """P(X > Y) + P(X = Y) / 2 for X a run of one sample and Y of the other, over all pairs."""
    better, worse = np.asarray(better)[:, None], np.asarray(worse)[None, :]
    return np.mean((better > worse) + 0.5 * (better == worse))


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
    word, its variants ("DAU" also "DAU, rounds of 0.1 s"; "DQN" both DQN variants)."""
    return not algorithms or algorithm in algorithms or algorithm.split(",")[0].split(" (")[0] in algorithms


def robustness_table(runs, last, selected=()):
    """Markdown: final return per algorithm and dt, and the worst-dt / best-dt ratio of the score; with
    `selected` (--algorithms), only their rows (and the probabilities that involve them), scored as in the whole
    table."""
    lines = []
    for env_id, algorithms in runs.items():
        if not any(shown(algorithm, selected) for algorithm in algorithms):
            continue
        finals = {
            (algorithm, dt): [final_return(curve, last) for curve in curves]
            for algorithm, by_dt in algorithms.items()
            for dt, curves in by_dt.items()
        }
        untrained = untrained_level(algorithms)
        best = max(np.mean(values) for values in finals.values())
        dts = sorted({dt for _, dt in finals}, reverse=True)
        heading = f"**{env_id}**: final scaled return (the last {last} evaluations; mean over seeds [95% interval])"
        lines += [heading, ""]
        lines += ["| algorithm | " + " | ".join(f"dt {dt:g}" for dt in dts) + " | worst / best dt | worst dt score |"]
        lines += ["|---" * (len(dts) + 3) + "|"]
        for algorithm in sorted(algorithms, key=lambda name: name != "DAU"):
            if not shown(algorithm, selected):
                continue
            cells, scores = [], []
            for dt in dts:
                values = finals.get((algorithm, dt))
                if values is None:
                    cells.append("—")
                    continue
                cells.append(f"{np.mean(values):.1f}{bracket(interval((values,), np.mean), '.1f')} (n={len(values)})")
                scores.append((np.mean(values) - untrained) / (best - untrained))
            # Below untrained counts as nothing learned (score 0); with no dt above it, there is no ratio to give.
            per_dt = [finals[algorithm, dt] for dt in dts if (algorithm, dt) in finals]
            ratio = robustness_ratio(*per_dt, untrained=untrained) if best > untrained else None
            if ratio is not None:
                resampled = functools.partial(robustness_ratio, untrained=untrained)
                ratio_interval = interval(per_dt, lambda *values, ratio_of=resampled: ratio_of(*values) or 0.0)
                ratio = f"{ratio:.2f}{bracket(ratio_interval, '.2f')}"
            lines.append(f"| {algorithm} | " + " | ".join(cells) + f" | {ratio or '—'} | {min(scores):.2f} |")
        for baseline in sorted(algorithm for algorithm in algorithms if algorithm != "DAU" and "DAU" in algorithms):
            if not (shown("DAU", selected) or shown(baseline, selected)):
                continue
            cells = []
            for dt in dts:
                if ("DAU", dt) not in finals or (baseline, dt) not in finals:
                    cells.append("—")
                    continue
                pair = (finals["DAU", dt], finals[baseline, dt])
                estimate = probability_of_improvement(*pair)
                cells.append(f"{estimate:.2f}{bracket(interval(pair, probability_of_improvement), '.2f')}")
            lines.append(f"| P(DAU > {baseline}) | " + " | ".join(cells) + " | | |")
        lines += ["", f"Untrained (physical time 0): {untrained:.1f}; best final mean: {best:.1f}.", ""]
        lines += [
            "Wall time (minutes): "
            + "; ".join(
                wall_times(algorithm, algorithms[algorithm])
                for algorithm in sorted(algorithms, key=lambda a: a != "DAU")
                if shown(algorithm, selected)
            ),
            "",
        ]
    return "\n".join(lines)


def bracket(bounds, spec):
    """ " [low, high]", or nothing without an interval."""
    return f" [{bounds[0]:{spec}}, {bounds[1]:{spec}}]" if bounds else ""


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
    return f"<!-- the table of sweeps/plot.py --runs {folder} -->", f"<!-- end of the table of {folder} -->"


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
    if options.last < 1:
        sys.exit(f"error: --last must be at least 1, got {options.last}")
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
    table = robustness_table(runs, options.last, options.algorithms)
    print(table)
    print(f"figure: {options.out}")
    if options.table:
        options.table.parent.mkdir(parents=True, exist_ok=True)
        options.table.write_text(table)
    if options.page:
        write_page(options.page, table, page_markers(options.runs))


if __name__ == "__main__":
    main(tyro.cli(Options))
