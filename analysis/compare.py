"""DAU variants beside the paper's DAU on one environment (or a baseline's beside the paper's baseline, with
--reference-algorithm DDPG-unscaled or DQN-unscaled): each run's score per dt, the invariance statistic
(fine/coarse and the slope per halving, analysis/robustness.py's invariance()) and the worst / best dt ratio on the
reference table's scale, the probability that a variant's run scores above a run of the reference, and each
variant's every-step verdict. Run from the repository root:

    python -m analysis.compare --variants docs/results/cartpole_ou_sigma_15_grid docs/results/cartpole_ou_scaled_grid \
        --labels '`--ou-sigma 15`' '`--exploration ou-scaled`'
    python -m analysis.compare --variants docs/results/cartpole_ring --labels "appendix's ring" --dts 0.001 0.0005

Each folder holds runs as analysis/plot.py reads them; the DAU runs (of a DAU script or of a probe's patched copy of
one, harness/archive.py's algorithm; any label, but one a folder, or compare.py refuses it) of the reference folder
(--reference, the paper's grid) and of each variant's folder with the same budget are compared, at the same seeds
(--seeds, or the variants' own: a five-seed grid against the reference's seeds 1 to 5, however many more it has). The
numbers are the tables': each run's score is the mean of its evaluations over the second half of its training time,
fine / coarse, the slope and the verdict have t (Fieller) intervals from moderated variances (no resampling), the
cells of a mean, a probability and worst / best bootstrap ones (--resamples), and the scale (untrained level and
best) is the one of the reference folder's table for the environment at those seeds, so that a variant reads against
the paper's DAU on one scale.
"""

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

from analysis.robustness import RESAMPLES, interval, invariance, robustness_ratio, step_differences
from analysis.scores import env_scores, load_runs, normalised, read_curve, run_score
from analysis.tables import bracket, improvement_cell, mean_cell
from harness import archive
from harness.archive import RefusedRuns, finished_runs


@dataclass
class Options:
    variants: tuple[Path, ...]
    """folders of the variants' runs (sweeps/collect.py's), one row each"""
    labels: tuple[str, ...] = ()
    """the variants' names in the table, one per folder; empty: the folders' names"""
    reference: Path = Path("docs/results")
    """the folder of the reference's runs (by default the paper's DAU's: docs/results)"""
    reference_label: str = ""
    """the reference's name in the table; empty: "paper's DAU" for DAU, else its label (DQN-unscaled, DAU-authors...)"""
    reference_algorithm: str = "DAU"
    """the label of the reference's runs in its folder (harness/archive.py's: DAU, DAU+round_seconds=0.1,
    DDPG-unscaled...); the variants' runs are those of its method (DAU, DDPG or DQN)"""
    env_id: str = "CartPole-v1"
    """the environment"""
    total_time: float = 1800
    """the budget (physical seconds) of the runs compared"""
    seeds: tuple[int, ...] = ()
    """only these seeds, in every folder (short probes beside the paper's runs of the same seeds); empty: the seeds
    of the variants' runs, so that the reference is read at the same seeds"""
    dts: tuple[float, ...] = ()
    """only these dt, in every folder (a variant that is the reference's run at the other dt, as the fixed ring of
    transitions at the steps where it holds the whole run); empty: the reference's every dt"""
    table: Path | None = None
    """also write the table (Markdown) here; it is always printed"""
    resamples: int = RESAMPLES
    """bootstrap resamples of the table's intervals of a mean, of worst / best and of P(variant > reference); the
    verdicts (fine / coarse, the slope, every step) draw none"""


def method_scores(folder, env_id, total_time, seeds=(), label=None, method="DAU"):
    """{dt: [run_score of each seed]} of the runs of `method` (DAU, DDPG or DQN) in `folder` with this budget (and
    these seeds): those of `label`, or of the folder's one label of that method; exits naming the labels when the
    folder holds several."""
    scores, labels = {}, set()
    for (_, algorithm, dt, seed), (run_dir, run) in finished_runs(folder, [env_id]).items():
        if archive.algorithm(run) == method and run["args"]["total_time"] == total_time:
            if (not seeds or seed in seeds) and (label is None or algorithm == label):
                labels.add(algorithm)
                scores.setdefault(dt, []).append(run_score(read_curve(run_dir, run)))
    if len(labels) > 1:
        sys.exit(
            f"error: {folder} holds {method} runs of {', '.join(sorted(labels))}: one variant a folder (or "
            "--reference-algorithm for the reference)"
        )
    return scores


def comparison_table(options):
    """Markdown: a row per folder (the reference first), then a row per variant of P(variant > reference) per dt;
    a variant without runs at some dt gets "—" there, and its fine/coarse, slope and worst/best only over every dt."""
    # At the same seeds: those asked for, or the variants' own (a 5-seed grid against the paper's seeds 1 to 5,
    # however many more the reference has); the scale too is the reference's table at those seeds.
    seeds = options.seeds or tuple(sorted({seed for folder in options.variants
                                           for (*_, seed) in finished_runs(folder, [options.env_id])}))  # fmt: skip
    reference_runs = load_runs(options.reference, [options.env_id], seeds, need_lines=False).get(options.env_id, {})
    if not reference_runs:
        sys.exit(f"error: no finished {options.env_id} runs in {options.reference}")
    _, untrained, best = env_scores(reference_runs)
    reference_label, labels, method, rows = score_rows(options, seeds)
    reference = rows[reference_label]
    dts = sorted(reference, reverse=True)
    if not all(rows.values()) or any(set(scores) - set(dts) for scores in rows.values()):
        found = "; ".join(f"{label}: {sorted(scores)}" for label, scores in rows.items())
        sys.exit(f"error: each folder needs {method} runs of {options.env_id} ({options.total_time:g} s) at the "
                 f"reference's dt: {found}")  # fmt: skip
    lines = ["| score (mean [95% interval], seeds) | " + " | ".join(f"dt {dt:g}" for dt in dts)
             + " | fine / coarse | slope per halving | worst / best dt |", "|---" * (len(dts) + 4) + "|"]  # fmt: skip
    ratio_of = functools.partial(robustness_ratio, untrained=untrained)
    for label, scores in rows.items():
        cells = [mean_cell(scores[dt], options.resamples) if dt in scores else "—" for dt in dts]
        ratio_text = slope_text = worst_text = "—"  # over every dt only
        if len(scores) == len(dts):
            result = invariance(normalised(scores, untrained, best))
            if result.ratio is not None:
                ratio_text = f"{result.ratio:.2f}{bracket(result.ratio_interval, '.2f')}"
            if result.slope is not None:
                slope_text = f"{result.slope:+.3f}{bracket(result.slope_interval, '+.3f')}"
            if (worst := ratio_of(*(per_dt := [scores[dt] for dt in dts]))) is not None:
                bounds = interval(per_dt, lambda *values: ratio_of(*values) or 0.0, resamples=options.resamples)
                worst_text = f"{worst:.2f}{bracket(bounds, '.2f')}"
        seeds = ",".join(str(len(scores.get(dt, []))) for dt in dts)
        lines.append(
            f"| {label} (n={seeds}) | " + " | ".join(cells) + f" | {ratio_text} | {slope_text} | {worst_text} |"
        )
    for label in labels:
        cells = [improvement_cell(rows[label][dt], reference[dt], options.resamples) if dt in rows[label] else "—"
                 for dt in dts]  # fmt: skip
        lines.append(f"| P({label} > {reference_label}) | " + " | ".join(cells) + " | | | |")
    lines += ["", f"Scale of the score: untrained {untrained:.1f}, best {best:.1f} ({options.reference}'s table)."]
    lines += ["", "Every step (each variant's mean score minus the reference's, intervals simultaneous over the dt):"]
    for label in labels:
        lines.append(f"- {label}: " + step_verdict(normalised(rows[label], untrained, best),
                                                    normalised(reference, untrained, best)))  # fmt: skip
    return "\n".join(lines) + "\n"


def score_rows(options, seeds):
    """The reference's name, the variants' names, the method compared and {name: {dt: [run scores]}}, the reference
    first; with --dts, only those dt."""
    labels = options.labels or tuple(folder.name for folder in options.variants)
    reference_label = options.reference_label or (
        "paper's DAU" if options.reference_algorithm == "DAU" else options.reference_algorithm
    )
    if len(set((reference_label, *labels))) < len(labels) + 1:
        sys.exit(f"error: each folder needs its own label, got {reference_label!r} and {', '.join(labels)}")
    method = re.split(r"[-+@]", options.reference_algorithm)[0]  # DDPG-unscaled's runs are DDPG's
    rows = {reference_label: method_scores(options.reference, options.env_id, options.total_time, seeds,
                                           options.reference_algorithm, method)}  # fmt: skip
    rows |= {label: method_scores(folder, options.env_id, options.total_time, seeds, method=method)
             for label, folder in zip(labels, options.variants, strict=True)}  # fmt: skip
    if options.dts:  # the variants and the reference at these dt alone; the scale stays the reference table's
        rows = {label: {dt: runs for dt, runs in scores.items() if any(archive.same_value(dt, wanted)
                                                                       for wanted in options.dts)}
                for label, scores in rows.items()}  # fmt: skip
    return reference_label, labels, method, rows


def step_verdict(variant, reference):
    """The rule for "more robust" (issue 64): a variant is more robust than the reference only where it does no worse
    at every dt and better at some. Per dt, the difference of the two mean scores with an interval that holds over
    all dt at once (robustness.step_differences: each method's variances moderated within its own dt, as every_step's;
    t at 1 - 0.05 / number of dt), read as worse (below 0), better (above 0) or unresolved; then the verdict."""
    if set(variant) != set(reference):
        return "not at every dt of the reference: no verdict"
    cells, sides = [], {}
    for dt, difference, bounds in step_differences(variant, reference):
        side = "unresolved" if bounds is None or bounds[0] <= 0 <= bounds[1] else "worse" if bounds[1] < 0 else "better"
        sides.setdefault(side, []).append(f"{dt:g}")
        cells.append(f"dt {dt:g} {difference:+.2f}{bracket(bounds, '+.2f')} {side}")
    if "worse" in sides:
        verdict = f"not more robust (worse at dt {', '.join(sides['worse'])})"
    elif "better" in sides:
        verdict = f"more robust (no worse at any dt, better at dt {', '.join(sides['better'])})"
    else:
        verdict = "undecided (no dt resolved)"
    return "; ".join(cells) + f": {verdict}"


def main(options):
    if options.labels and len(options.labels) != len(options.variants):
        sys.exit(f"error: --labels names {len(options.labels)} variants, --variants gives {len(options.variants)}")
    table = comparison_table(options)
    print(table)
    if options.table:
        options.table.write_text(table)


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
