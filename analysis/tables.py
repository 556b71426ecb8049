"""The text of the robustness numbers: the lines analysis/invariance.py prints (other tools read them), the Markdown
tables that analysis/plot.py writes into the pages, and their cells. Every number comes from analysis/robustness.py,
on analysis/scores.py's scale; no plotting here.
"""

import functools
import re
import sys
from pathlib import Path

import numpy as np

from analysis import robustness
from analysis.scores import env_scores, learns_line, learns_score, normalised


def bracket(bounds, spec):
    """ " [low, high]", or nothing without an interval."""
    return f" [{bounds[0]:{spec}}, {bounds[1]:{spec}}]" if bounds else ""


def mean_cell(values, resamples=robustness.RESAMPLES):
    """ "mean [low, high]" of a sample's runs (a table's cell; a bootstrap interval)."""
    bounds = robustness.interval((values,), np.mean, vectorized=True, resamples=resamples)
    return f"{np.mean(values):.1f}{bracket(bounds, '.1f')}"


def improvement_cell(better, worse, resamples=robustness.RESAMPLES):
    """ "P [low, high]": probability_of_improvement of one sample of runs over the other (1-D), with its interval."""
    pair = (better, worse)
    estimate = robustness.probability_of_improvement(*pair)
    bounds = robustness.interval(pair, robustness.probability_of_improvement, vectorized=True, resamples=resamples)
    return f"{estimate:.2f}{bracket(bounds, '.2f')}"


def ordered(algorithms):
    """An environment's labels, DAU first."""
    return sorted(algorithms, key=lambda name: (name != "DAU", name))


def judged(runs):
    """(env_id, label, Invariance, EveryStep) per environment and label of load_runs' {env_id: {algorithm: {dt:
    [Curve]}}}, DAU first: what invariance.py prints and the verdict rests on."""
    for env_id, algorithms in runs.items():
        returns, untrained, best = env_scores(algorithms)
        line = learns_score(env_id, untrained, best)
        for algorithm in ordered(algorithms):
            scores = normalised(returns[algorithm], untrained, best)
            yield env_id, algorithm, robustness.invariance(scores), robustness.every_step(scores, line)


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


def verdict_line(env_id, algorithm, result, steps):
    """The verdict line analysis/invariance.py prints last: the words of robustness.verdict."""
    return f"verdict {env_id} {algorithm}: {robustness.verdict(result, steps)}"


def invariance_lines(runs):
    """What analysis/invariance.py prints of load_runs' {env_id: {algorithm: {dt: [Curve]}}}: one invariance line
    per environment and label, then one every-step line each, then one verdict line each."""
    results = list(judged(runs))
    return ([invariance_line(env_id, label, result) for env_id, label, result, _ in results]
            + [every_step_line(env_id, label, steps) for env_id, label, _, steps in results]
            + [verdict_line(*judgement) for judgement in results])  # fmt: skip


def shown(algorithm, algorithms):
    """Whether --algorithms selects this algorithm: all when empty; a name selects itself and, by its first
    word, its variants ("DAU" also "DAU+round_seconds=0.1"; "DQN" both DQN-unscaled and DQN-scaled)."""
    return not algorithms or algorithm in algorithms or re.split(r"[+@-]", algorithm)[0] in algorithms


def robustness_table(runs, selected=()):
    """Markdown: per algorithm, the mean run score per dt, fine/coarse and the slope per halving (invariance), and
    the worst-dt / best-dt ratio; then every step and the runs that learn (every_step); with `selected`
    (--algorithms), only their rows (and the probabilities that involve them), scored as in the whole table."""
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
        for algorithm in ordered(algorithms):
            if shown(algorithm, selected):
                lines.append(score_row(algorithm, returns[algorithm], dts, untrained, best))
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
                  f"over the dt], and the runs that learn (a return of {learns_line(env_id):.1f} or more, "
                  f"[{env_id}'s line](benchmarks.md#the-line-for-a-run-that-learns)) [their share's 95% interval, "
                  "simultaneous]", ""]  # fmt: skip
        lines += ["| algorithm | " + " | ".join(f"dt {dt:g}" for dt in dts)
                  + " | mean departs from 1 | share that learns departs (p across dt) |"]  # fmt: skip
        lines += ["|---" * (len(dts) + 3) + "|"]
        line = learns_score(env_id, untrained, best)
        for algorithm in ordered(algorithms):
            if shown(algorithm, selected):
                result = robustness.every_step(normalised(returns[algorithm], untrained, best), line)
                cells, departs, shares = every_step_cells(result)
                by_dt = dict(zip(result.dts, cells, strict=True))
                lines.append(f"| {algorithm} | " + " | ".join(by_dt.get(dt, "—") for dt in dts)
                             + f" | {departs} | {shares} |")  # fmt: skip
        lines += [""]
        times = [wall_times(algorithm, algorithms[algorithm]) for algorithm in ordered(algorithms)
                 if shown(algorithm, selected)]  # fmt: skip
        lines += ["Wall time (minutes): " + "; ".join(times), ""]
    return "\n".join(lines)


def score_row(algorithm, by_dt, dts, untrained, best):
    """A label's row of the score table: each dt's mean return, fine / coarse, the slope, worst / best dt."""
    cells = [f"{mean_cell(by_dt[dt])} (n={len(by_dt[dt])})" if dt in by_dt else "—" for dt in dts]
    result = robustness.invariance(normalised(by_dt, untrained, best))
    ratio_text = "—" if result.ratio is None else f"{result.ratio:.2f}{bracket(result.ratio_interval, '.2f')}"
    slope_text = "—" if result.slope is None else f"{result.slope:+.3f}{bracket(result.slope_interval, '+.3f')}"
    # Below untrained counts as nothing learned (0); with no dt above it, there is no ratio to give.
    per_dt = [by_dt[dt] for dt in dts if dt in by_dt]
    worst = robustness.robustness_ratio(*per_dt, untrained=untrained) if best > untrained else None
    if worst is not None:
        resampled = functools.partial(robustness.robustness_ratio, untrained=untrained)
        worst_interval = robustness.interval(per_dt, lambda *values, ratio_of=resampled: ratio_of(*values) or 0.0)
        worst = f"{worst:.2f}{bracket(worst_interval, '.2f')}"
    return f"| {algorithm} | " + " | ".join(cells) + f" | {ratio_text} | {slope_text} | {worst or '—'} |"


def wall_times(algorithm, by_dt):
    """ "DAU 137 in all, per run 1.2 at dt 0.01 ... 23 at dt 0.0005": summed over runs, then mean per run."""
    total = sum(curve.wall_time for curves in by_dt.values() for curve in curves) / 60
    per_run = [
        f"{np.mean([curve.wall_time for curve in by_dt[dt]]) / 60:.1f} at dt {dt:g}" for dt in sorted(by_dt)[::-1]
    ]
    return f"{algorithm} {total:.0f} in all, per run " + ", ".join(per_run)


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
