"""Training diagnostics against physical time, from the diagnostics.csv that every run writes next to its
evals.csv (what the columns are: the scripts' TRAINING_STATS and ROUND_STATS, and docs/common.md).

    python -m analysis.diagnostics --runs docs/results --env-id CartPole-v1 --out docs/figures/cartpole_diagnostics.png

One panel per column, one colour per dt: each seed a thin line, their mean a thick one. Several --algorithms
(the paper's DAU and a variant such as "DAU+round_seconds=0.1") or --runs folders are drawn in the same panels,
one line style each.
The column "td_rate" is the root mean square of the TD error per second, sqrt(losses/td) / dt: for DAU, the
paper's (Q - Q~) / dt, which its updates multiply the gradients by.

With --table, also a Markdown table per folder and algorithm: for each dt, the mean over seeds (and their range)
of each run's mean over its last --window physical seconds, of V, abs(A), how often exploration changed the greedy
action and the terminal transitions' share; with --reward-rate r (the reward per second, CartPole's 1), also V over
its balance level (r + abs(A)) dt / (dt ln(1 / gamma) + terminal share), where Alg. 1's updates stop moving V's
mean when the replay memory is stationary (docs/research/value_level.md, "Where V's level comes from").

With --probe FROM TO, the table of a probe instead (what a remedy's predictions are checked on:
docs/research/README.md): per dt, over the physical seconds FROM to TO of each run, the mean evaluation, V's climb per
second (a least-squares slope) and V at TO, the RMS TD error per second, RMSprop's denominators per network and the
terminal transitions' share of td^2. A run longer than TO (a kept grid's) counts up to TO only, which is the run of
that budget when the replay memory never wrapped (the case of CartPole's 10000-s memory).

    python -m analysis.diagnostics --runs docs/results docs/results/cartpole_td_noise --seeds 1 2 3 \
        --algorithms DAU DAU+terminal_rows=64 --probe 150 600 --table probe.md --out probe.png

With --split RETURN, each table twice: for the runs whose second-half mean evaluation is below RETURN, and for the
others (docs/research/horizon.md: what sets the horizon's failing runs apart from its good ones). A run without that
mean (no evaluation in its second half, or a NaN one) belongs to neither: it is refused, naming it.
"""

import csv
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import tyro

from analysis.plot import save_figure
from analysis.scores import read_curve, run_score
from harness.archive import RefusedRuns, finished_runs

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE_STYLES = ("-", "--", ":", "-.")


@dataclass
class Options:
    runs: tuple[Path, ...] = (Path("runs"),)
    """folders of runs (each <folder>/<run_name>/ with run.json and diagnostics.csv)"""
    env_id: str = "CartPole-v1"
    """the environment whose runs to draw"""
    algorithms: tuple[str, ...] = ("DAU",)
    """the algorithms whose runs to draw, as harness/archive.py labels them (DAU, DAU+round_seconds=0.1, DQN-unscaled)
    """
    columns: tuple[str, ...] = ("values/v", "values/abs_advantage", "td_rate", "batch/terminal_td_share",
                                "exploration/changed_action", "optimizer/grad_rms_advantage")  # fmt: skip
    """diagnostics.csv columns to draw, one panel each (td_rate: sqrt(losses/td) / dt)"""
    log_scale: tuple[str, ...] = ("values/v", "values/abs_advantage", "td_rate", "optimizer/grad_rms_value",
                                  "optimizer/grad_rms_advantage", "exploration/changed_action")  # fmt: skip
    """columns drawn on a logarithmic axis (symmetric: linear within +-0.001)"""
    out: Path = Path("diagnostics.png")
    """where to write the figure (PNG)"""
    table: Path | None = None
    """also write the summary table (Markdown) here, and print it"""
    window: float = 600
    """the physical seconds at the end of each run that the table averages"""
    reward_rate: float | None = None
    """the reward per physical second, for the table's V / balance column (CartPole: 1); None: no such column"""
    probe: tuple[float, float] | None = None
    """FROM TO: the table is a probe's, over these physical seconds of each run (see above); None: the summary"""
    seeds: tuple[int, ...] = ()
    """only these seeds (a probe's, to set against a grid's runs at the same seeds); empty: all"""
    split: float | None = None
    """RETURN: the table apart for the runs whose second-half mean evaluation (scores.py's run_score) is below RETURN
    and for the others (what sets a grid's failing runs apart from its good ones; a run without that mean is refused,
    naming it); None: all runs together"""


SUMMARY = {"V": "values/v", "abs(A)": "values/abs_advantage", "changed": "exploration/changed_action",
           "terminal share": "batch/terminal_share"}  # fmt: skip


def load_diagnostics(runs_dir, env_id, algorithm, seeds=(), unscored=None):
    """{dt: [(physical times, {column: values}), one per seed]} of the finished runs that have a diagnostics.csv
    (of `seeds` only, if given); the columns also hold the evaluations, "eval_time" and "eval_return", and the run's
    score for --split, "run_score". `unscored`, a list, gets "<run folder> (why)" for each run without a score: no
    evaluation in the second half of its time, or a NaN one there."""
    by_dt = {}
    for (_, name, dt, seed), (run_dir, run) in finished_runs(runs_dir, (env_id,)).items():
        if name != algorithm or not (run_dir / "diagnostics.csv").is_file() or (seeds and seed not in seeds):
            continue
        with open(run_dir / "diagnostics.csv") as file:
            rows = list(csv.DictReader(file))
        columns = {column: np.array([float(row[column]) for row in rows]) for column in rows[0]}
        columns["td_rate"] = np.sqrt(columns["losses/td"]) / dt
        columns["gamma"] = np.full(len(rows), run["args"].get("gamma", math.nan))  # per second, for the balance
        curve = read_curve(run_dir, run)  # evals.csv
        columns["eval_time"], columns["eval_return"] = curve.times, curve.returns
        scored = curve.times[-1] >= curve.total_time / 2 - 1e-6  # evaluations in the second half: the tables' score
        columns["run_score"] = np.full(len(rows), run_score(curve) if scored else math.nan)  # for --split
        if unscored is not None and math.isnan(columns["run_score"][0]):
            why = "a NaN evaluation" if scored else "no evaluation"
            unscored.append(f"{run_dir} ({why} from {curve.total_time / 2:g} s on, the second half of its "
                            f"{curve.total_time:g} s)")  # fmt: skip
        by_dt.setdefault(dt, []).append((columns["physical_time"], columns))
    return by_dt


def mean_and_range(values, spec):
    """A table cell: the mean over seeds, and their range, of the runs that have a value ("—": none has)."""
    values = [value for value in values if value is not None]
    return f"{np.mean(values):{spec}} ({min(values):{spec}}-{max(values):{spec}})" if values else "—"


def summary_table(by_dt, window, reward_rate=None):
    """Markdown: per dt, the mean over seeds (range) of each run's mean over its last `window` seconds, of the SUMMARY
    columns every run has (the continuous scripts log no changed-action share)."""
    runs = [columns for seeds in by_dt.values() for _, columns in seeds]
    logged = [name for name, column in SUMMARY.items() if all(column in columns for columns in runs)]
    names = [*logged, *(["V / balance"] if reward_rate is not None else [])]
    lines = ["| dt | seeds | " + " | ".join(f"{name} (last {window:g} s)" for name in names) + " |",
             "|---" * (len(names) + 2) + "|"]  # fmt: skip
    for dt, seeds in sorted(by_dt.items(), reverse=True):
        per_run = []
        for times, columns in seeds:
            last = times > times[-1] - window
            means = {name: columns[SUMMARY[name]][last].mean() for name in logged}
            if reward_rate is not None:
                balance = (
                    (reward_rate + means["abs(A)"])
                    * dt
                    / (dt * math.log(1 / columns["gamma"][-1]) + means["terminal share"])
                )
                means["V / balance"] = means["V"] / balance
            per_run.append(means)
        cells = []
        for name in names:
            spec = ".4f" if name in ("changed", "terminal share") else ".2f" if name == "V / balance" else ".1f"
            cells.append(mean_and_range([means[name] for means in per_run], spec))
        lines.append(f"| {dt:g} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PROBE = {"eval": ".1f", "V climb /s": ".4f", "V at end": ".2f", "RMS TD /s": ".1f", "RMSprop V": ".3g",
         "RMSprop A": ".3g", "terminal td^2 share": ".2f"}  # fmt: skip


# Also in a probe's table where every run logs them (the continuous scripts log no changed-action share): the means
# over the window of abs(A), of how often the exploration changed the greedy action, of the terminations per second
# of each env's experience and of the terminal transitions' part of the TD loss, mean(d td^2): what a failure teaches.
PROBE_IF_LOGGED = {"abs(A)": ("values/abs_advantage", ".2f"), "changed": ("exploration/changed_action", ".4f"),
                   "failures /s": ("training/failures_per_second", ".3f"),
                   "terminal td^2": ("losses/td_terminal", ".2g")}  # fmt: skip


def probe_table(by_dt, start, end):
    """Markdown: per dt, the mean over seeds (range) of each run's PROBE columns over physical seconds start to end,
    and those of PROBE_IF_LOGGED that every run has."""
    runs = [columns for seeds in by_dt.values() for _, columns in seeds]
    logged = {name: column for name, column in PROBE_IF_LOGGED.items() if all(column[0] in run for run in runs)}
    names = [*PROBE, *logged]
    lines = ["| dt | seeds | " + " | ".join(names) + " |", "|---" * (len(names) + 2) + "|"]
    for dt, seeds in sorted(by_dt.items(), reverse=True):
        per_run = []
        for times, columns in seeds:
            window = (times > start) & (times <= end + 1e-6)
            in_time = (columns["eval_time"] >= start - 1e-6) & (columns["eval_time"] <= end + 1e-6)
            value = columns["values/v"][window]
            evaluations = columns["eval_return"][in_time]  # none where the window falls between two evaluations
            per_run.append({"eval": evaluations.mean() if evaluations.size else None,
                            "V climb /s": np.polyfit(times[window], value, 1)[0], "V at end": value[-1],
                            "RMS TD /s": columns["td_rate"][window].mean(),
                            "RMSprop V": columns["optimizer/grad_rms_value"][window].mean(),
                            "RMSprop A": columns["optimizer/grad_rms_advantage"][window].mean(),
                            "terminal td^2 share": columns["batch/terminal_td_share"][window].mean()})  # fmt: skip
            per_run[-1] |= {name: columns[column][window].mean() for name, (column, _) in logged.items()}
        specs = PROBE | {name: spec for name, (_, spec) in logged.items()}
        cells = [mean_and_range([run[name] for run in per_run], spec) for name, spec in specs.items()]
        lines.append(f"| {dt:g} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(options):
    unscored = []  # runs that --split could put in neither table
    sources = {(folder, algorithm): load_diagnostics(folder, options.env_id, algorithm, options.seeds, unscored)
               for folder in options.runs for algorithm in options.algorithms}  # fmt: skip
    for algorithm in options.algorithms:  # several folders: each algorithm's runs may be in one of them
        if not any(sources[folder, algorithm] for folder in options.runs):
            where = " or ".join(str(folder) for folder in options.runs)
            sys.exit(f"error: no finished {algorithm} runs of {options.env_id} with a diagnostics.csv in {where}")
    if options.split is not None and unscored:  # neither below RETURN nor not: out of both tables, without a word
        sys.exit(f"error: --split: {len(unscored)} runs have no second-half mean evaluation to split by: "
                 f"{', '.join(unscored)}; restore their evals.csv, leave them out with --seeds (the other "
                 "seeds) or --runs (another folder), or run without --split")  # fmt: skip
    sources = {key: by_dt for key, by_dt in sources.items() if by_dt}
    if len(sources) > len(LINE_STYLES):
        sys.exit(f"error: at most {len(LINE_STYLES)} --runs folders times --algorithms, got {len(sources)}")
    known = set.intersection(*(set(columns) for by_dt in sources.values() for seeds in by_dt.values()
                               for _, columns in seeds))  # fmt: skip
    unknown = [column for column in options.columns if column not in known]
    if unknown:
        sys.exit(
            f"error: no column {', '.join(unknown)} in every diagnostics.csv; they have {', '.join(sorted(known))}"
        )
    dts = sorted({dt for by_dt in sources.values() for dt in by_dt}, reverse=True)
    colors = dict(zip(dts, plt.cm.viridis(np.linspace(0, 0.9, len(dts))), strict=True))
    width = min(3, len(options.columns))
    height = -(-len(options.columns) // width)
    figure, axes = plt.subplots(height, width, figsize=(4.6 * width, 3.3 * height), squeeze=False)
    for ax, column in zip(axes.flat, options.columns, strict=False):
        for ((folder, algorithm), by_dt), style in zip(sources.items(), LINE_STYLES, strict=False):
            for dt, seeds in sorted(by_dt.items(), reverse=True):
                length = min(len(times) for times, _ in seeds)
                for times, columns in seeds:
                    ax.plot(times, columns[column], color=colors[dt], linestyle=style, linewidth=0.5, alpha=0.4)
                times = np.mean([times[:length] for times, _ in seeds], axis=0)
                mean = np.mean([columns[column][:length] for _, columns in seeds], axis=0)
                label = f"dt {dt:g} (n={len(seeds)})"
                label += f", {algorithm}" * (len(options.algorithms) > 1) + f", {folder}" * (len(options.runs) > 1)
                ax.plot(times, mean, color=colors[dt], linestyle=style, linewidth=1.6, label=label)
        if column in options.log_scale:
            ax.set_yscale("symlog", linthresh=1e-3)  # logarithmic beyond +-0.001: values of either sign
        ax.set_title(column, fontsize=10)
        ax.set_xlabel("physical time (s)")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(options.columns) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    figure.suptitle(f"{options.env_id}: {' / '.join(options.algorithms)}, training diagnostics", fontsize=11)
    save_figure(figure, options.out)
    print(f"figure: {options.out}")
    if options.table:
        tables = "\n".join(split_tables(sources, options))
        print(tables)
        options.table.write_text(tables)


def split_tables(sources, options):
    """The --table's tables, one per folder and algorithm, or two with --split (the runs below it, and the rest)."""
    groups = {"": lambda score: True}
    if options.split is not None:
        below, rest = f", second-half mean below {options.split:g}", f", second-half mean {options.split:g} or more"
        groups = {below: lambda score: score < options.split, rest: lambda score: score >= options.split}
    tables = []
    for (folder, algorithm), by_dt in sources.items():
        for title, member in groups.items():
            kept = {dt: [(times, columns) for times, columns in seeds if member(columns["run_score"][0])]
                    for dt, seeds in by_dt.items()}  # fmt: skip
            kept = {dt: seeds for dt, seeds in kept.items() if seeds}
            table = (probe_table(kept, *options.probe) if options.probe
                     else summary_table(kept, options.window, options.reward_rate))  # fmt: skip
            tables.append(f"{algorithm}, {folder}{title}:\n\n{table}")
    return tables


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
