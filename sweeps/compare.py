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
from plot import (
    bracket,
    final_return,
    finished_runs,
    interval,
    load_runs,
    probability_of_improvement,
    read_curve,
    robustness_ratio,
    untrained_level,
)


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
    seeds: tuple[int, ...] = ()
    """only these seeds, in every folder (short probes beside the paper's runs of the same seeds); empty: all"""
    table: Path | None = None
    """also write the table (Markdown) here; it is always printed"""


def dau_finals(folder, env_id, total_time, last, seeds=()):
    """{dt: [final return of each seed]} of the DAU runs in `folder` with this budget (and these seeds)."""
    finals = {}
    for (_, algorithm, dt, seed), (run_dir, run) in finished_runs(folder, [env_id]).items():
        if algorithm == "DAU" and run["args"]["total_time"] == total_time and (not seeds or seed in seeds):
            finals.setdefault(dt, []).append(final_return(read_curve(run_dir, run), last))
    return finals


def comparison_table(options):
    """Markdown: a row per folder (the reference first), then a row per variant of P(variant > reference) per dt;
    a variant without runs at some dt gets "—" there, and its ratio only over every dt."""
    untrained = untrained_level(load_runs(options.reference, [options.env_id]).get(options.env_id, {}))
    labels = options.labels or tuple(folder.name for folder in options.variants)
    if len(set((options.reference_label, *labels))) < len(labels) + 1:
        sys.exit(f"error: each folder needs its own label, got {options.reference_label!r} and {', '.join(labels)}")
    rows = {label: dau_finals(folder, options.env_id, options.total_time, options.last, options.seeds)
            for label, folder in zip((options.reference_label, *labels), (options.reference, *options.variants),
                                     strict=True)}  # fmt: skip
    reference = rows[options.reference_label]
    dts = sorted(reference, reverse=True)
    if not all(rows.values()) or any(set(finals) - set(dts) for finals in rows.values()):
        found = "; ".join(f"{label}: {sorted(finals)}" for label, finals in rows.items())
        sys.exit(f"error: each folder needs DAU runs of {options.env_id} ({options.total_time:g} s) at the "
                 f"reference's dt: {found}")  # fmt: skip
    lines = ["| final return (mean [95% interval], seeds) | " + " | ".join(f"dt {dt:g}" for dt in dts)
             + " | worst / best dt |", "|---" * (len(dts) + 2) + "|"]  # fmt: skip
    ratio_of = functools.partial(robustness_ratio, untrained=untrained)
    for label, finals in rows.items():
        cells = [f"{np.mean(finals[dt]):.1f}{bracket(interval((finals[dt],), np.mean), '.1f')}" if dt in finals else "—"
                 for dt in dts]  # fmt: skip
        ratio_text = "—"  # over every dt only
        if len(finals) == len(dts) and (ratio := ratio_of(*(per_dt := [finals[dt] for dt in dts]))) is not None:
            ratio_text = f"{ratio:.2f}{bracket(interval(per_dt, lambda *values: ratio_of(*values) or 0.0), '.2f')}"
        seeds = ",".join(str(len(finals.get(dt, []))) for dt in dts)
        lines.append(f"| {label} (n={seeds}) | " + " | ".join(cells) + f" | {ratio_text} |")
    for label in labels:
        cells = []
        for dt in dts:
            if dt not in rows[label]:
                cells.append("—")
                continue
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
