"""Training diagnostics against physical time, from the diagnostics.csv that every run writes next to its
evals.csv (what the columns are: the scripts' TRAINING_STATS and ROUND_STATS, and docs/common.md).

    python sweeps/diagnostics.py --runs docs/results --env-id CartPole-v1 --out docs/figures/cartpole_diagnostics.png

One panel per column, one colour per dt: each seed a thin line, their mean a thick one. Several --algorithms
(the paper's DAU and a variant such as "DAU, rounds of 0.1 s") or --runs folders are drawn in the same panels,
one line style each.
The column "td_rate" is the root mean square of the TD error per second, sqrt(losses/td) / dt: for DAU, the
paper's (Q - Q~) / dt, which its updates multiply the gradients by.
"""

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import tyro
from plot import finished_runs, save_figure

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
    """the algorithms whose runs to draw, as sweeps/plot.py names them: DAU, "DAU, rounds of 0.1 s", DQN (unscaled)"""
    columns: tuple[str, ...] = ("values/v", "values/abs_advantage", "td_rate", "batch/terminal_td_share",
                                "exploration/changed_action", "optimizer/grad_rms_advantage")  # fmt: skip
    """diagnostics.csv columns to draw, one panel each (td_rate: sqrt(losses/td) / dt)"""
    log_scale: tuple[str, ...] = ("values/v", "values/abs_advantage", "td_rate", "optimizer/grad_rms_value",
                                  "optimizer/grad_rms_advantage", "exploration/changed_action")  # fmt: skip
    """columns drawn on a logarithmic axis (symmetric: linear within +-0.001)"""
    out: Path = Path("diagnostics.png")
    """where to write the figure (PNG)"""


def load_diagnostics(runs_dir, env_id, algorithm):
    """{dt: [(physical times, {column: values}), one per seed]} of the finished runs that have a diagnostics.csv."""
    by_dt = {}
    for (_, name, dt, _), (run_dir, _) in finished_runs(runs_dir, (env_id,)).items():
        if name != algorithm or not (run_dir / "diagnostics.csv").is_file():
            continue
        with open(run_dir / "diagnostics.csv") as file:
            rows = list(csv.DictReader(file))
        columns = {column: np.array([float(row[column]) for row in rows]) for column in rows[0]}
        columns["td_rate"] = np.sqrt(columns["losses/td"]) / dt
        by_dt.setdefault(dt, []).append((columns["physical_time"], columns))
    return by_dt


def main(options):
    sources = {(folder, algorithm): load_diagnostics(folder, options.env_id, algorithm)
               for folder in options.runs for algorithm in options.algorithms}  # fmt: skip
    for (folder, algorithm), by_dt in sources.items():
        if not by_dt:
            sys.exit(f"error: no finished {algorithm} runs of {options.env_id} with a diagnostics.csv in {folder}")
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


if __name__ == "__main__":
    main(tyro.cli(Options))
