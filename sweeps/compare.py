"""DAU variants beside the paper's DAU on one environment: the final return per dt, the worst / best dt ratio on the
reference table's score, and the probability that a variant's run ends above a run of the paper's DAU.

    python sweeps/compare.py --variants docs/results/cartpole_ou_sigma_15_grid docs/results/cartpole_ou_scaled_grid \
        --labels '`--ou-sigma 15`' '`--exploration ou-scaled`'

Each folder holds runs as sweeps/plot.py reads them; the DAU runs of the reference folder (--reference, the paper's
grid) and of each variant's folder with the same budget are compared. The numbers are plot.py's: each run's final
return is the mean of its last --last evaluations, the intervals are its percentile bootstraps, and the score's
untrained level is the one of the reference folder's table for the environment (every algorithm's runs at physical
time 0), so that a variant's ratio reads against the paper's DAU's on one scale.
"""

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro
from plot import bracket, final_return, interval, load_runs, probability_of_improvement, robustness_ratio


@dataclass
class Options:
    variants: tuple[Path, ...]
    """folders of the variants' runs (sweeps/collect.py's), one row each"""
    labels: tuple[str, ...] = ()
    """the variants' names in the table, one per folder; empty: the folders' names"""
    reference: Path = Path("docs/results")
    """the folder of the paper's DAU runs"""
    reference_label: str = "paper's DAU"
    """the reference's name in the table"""
    env_id: str = "CartPole-v1"
    """the environment"""
    total_time: float = 1800
    """the budget (physical seconds) of the runs compared"""
    last: int = 3
    """evaluations at the end of each run averaged into its final return"""
    table: Path | None = None
    """also write the table (Markdown) here; it is always printed"""


def dau_finals(folder, env_id, total_time, last):
    """{dt: [final return of each seed]} of the DAU runs in `folder` with this budget, and their first evaluations."""
    curves = load_runs(folder, [env_id]).get(env_id, {}).get("DAU", {})
    finals = {}
    for dt, runs in curves.items():
        kept = [curve for curve in runs if abs(curve.times[-1] - total_time) <= 0.05 * total_time]
        if kept:
            finals[dt] = [final_return(curve, last) for curve in kept]
    return finals


def comparison_table(options):
    reference_runs = load_runs(options.reference, [options.env_id]).get(options.env_id, {})
    untrained = np.mean([curve.returns[0] for by_dt in reference_runs.values() for c in by_dt.values() for curve in c])
    rows = {options.reference_label: dau_finals(options.reference, options.env_id, options.total_time, options.last)}
    labels = options.labels or tuple(folder.name for folder in options.variants)
    for label, folder in zip(labels, options.variants, strict=True):
        rows[label] = dau_finals(folder, options.env_id, options.total_time, options.last)
    dts = sorted(rows[options.reference_label], reverse=True)
    if any(sorted(finals, reverse=True) != dts for finals in rows.values()):
        found = "; ".join(f"{label}: {sorted(finals)}" for label, finals in rows.items())
        sys.exit(
            f"error: every folder needs DAU runs of {options.env_id} at the same dt, {options.total_time:g} s: {found}"
        )
    lines = ["| final return (mean [95% interval], seeds) | " + " | ".join(f"dt {dt:g}" for dt in dts)
             + " | worst / best dt |", "|---" * (len(dts) + 2) + "|"]  # fmt: skip
    ratio_of = functools.partial(robustness_ratio, untrained=untrained)
    for label, finals in rows.items():
        cells = [f"{np.mean(finals[dt]):.1f}{bracket(interval((finals[dt],), np.mean), '.1f')}" for dt in dts]
        per_dt = [finals[dt] for dt in dts]
        ratio = ratio_of(*per_dt)
        ratio_interval = interval(per_dt, lambda *values: ratio_of(*values) or 0.0)
        ratio_text = f"{ratio:.2f}{bracket(ratio_interval, '.2f')}" if ratio is not None else "—"
        seeds = ",".join(str(len(finals[dt])) for dt in dts)
        lines.append(f"| {label} (n={seeds}) | " + " | ".join(cells) + f" | {ratio_text} |")
    reference = rows[options.reference_label]
    for label in labels:
        cells = []
        for dt in dts:
            pair = (rows[label][dt], reference[dt])
            cells.append(
                f"{probability_of_improvement(*pair):.2f}{bracket(interval(pair, probability_of_improvement), '.2f')}"
            )
        lines.append(f"| P({label} > {options.reference_label}) | " + " | ".join(cells) + " | |")
    lines += ["", f"Untrained level of the score: {untrained:.1f} ({options.reference}'s table)."]
    return "\n".join(lines) + "\n"


def main(options):
    if options.labels and len(options.labels) != len(options.variants):
        sys.exit(f"error: --labels names {len(options.labels)} variants, --variants gives {len(options.variants)}")
    table = comparison_table(options)
    print(table)
    if options.table:
        options.table.write_text(table)


if __name__ == "__main__":
    main(tyro.cli(Options))
