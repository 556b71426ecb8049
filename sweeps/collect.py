"""Keep the small files of finished runs in git: copy each completed run's run.json, evals.csv and
diagnostics.csv from runs/ to a results folder, from which analysis/plot.py and analysis/diagnostics.py redraw
the figures and tables.

    python -m sweeps.collect --out docs/results
    python -m analysis.plot --runs docs/results --env-ids Pendulum-v1 CartPole-v1 --out docs/figures/curves.png

Checkpoints, models and videos stay in runs/. A run already in the results folder is left as it is. It says which
code made the runs it copied (run.json's commits; "+changes": with uncommitted changes to the Python files).
"""

import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import tyro

from harness.archive import RefusedRuns, code_of, read_run  # which run is which


@dataclass
class Options:
    out: Path
    """the results folder (one sub-folder per run, named as in runs/)"""
    runs: Path = Path("runs")
    """where the runs are"""


def collect(runs, out):
    """Copy every completed run not yet in `out`; returns {name of each run copied: the code that made it
    (archive.code_of)}. A run is copied into out/.partial/ and moved into place once whole: a copy cut short (a
    kill, a full disk) leaves no folder that the next call would take for a kept run and the plots for a finished
    one. A run.json that is not whole is refused (archive.RefusedRuns) before anything is copied."""
    copied, finished = {}, []
    for run_json in sorted(Path(runs).glob("*/run.json")):
        run = read_run(run_json)
        if run.get("completed") and not (Path(out) / run_json.parent.name).exists():
            finished.append((run_json, run))
    for run_json, run in finished:
        target = Path(out) / run_json.parent.name
        staging = Path(out) / ".partial" / target.name  # two levels down: not among the plots' */run.json
        shutil.rmtree(staging, ignore_errors=True)  # what an earlier copy cut short left
        staging.mkdir(parents=True)
        for name in ("run.json", "evals.csv", "diagnostics.csv"):
            if (run_json.parent / name).exists():  # (runs from before diagnostics.csv have none)
                shutil.copy2(run_json.parent / name, staging / name)
        staging.rename(target)
        copied[target.name] = code_of(run)
    if (Path(out) / ".partial").is_dir() and not any((Path(out) / ".partial").iterdir()):
        (Path(out) / ".partial").rmdir()
    return copied


if __name__ == "__main__":
    options = tyro.cli(Options)
    if not options.runs.is_dir():
        sys.exit(f"error: no runs folder {options.runs}")
    try:
        copied = collect(options.runs, options.out)
    except RefusedRuns as error:
        sys.exit(f"error: {error}")
    print(f"{len(copied)} finished runs copied to {options.out}")
    for code, count in sorted(Counter(copied.values()).items()):  # which code made them: a run to redo is told apart
        print(f"  {count} made by {code}")
