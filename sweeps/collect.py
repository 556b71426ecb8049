"""Keep the small files of finished runs in git: copy each completed run's run.json, evals.csv and
diagnostics.csv from runs/ to a results folder, from which sweeps/plot.py and sweeps/diagnostics.py redraw
the figures and tables.

    python sweeps/collect.py --out docs/results
    python sweeps/plot.py --runs docs/results --env-ids Pendulum-v1 CartPole-v1 --out docs/figures/curves.png

Checkpoints, models and videos stay in runs/. A run already in the results folder is left as it is.
"""

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro


@dataclass
class Options:
    out: Path
    """the results folder (one sub-folder per run, named as in runs/)"""
    runs: Path = Path("runs")
    """where the runs are"""


def collect(runs, out):
    """Copy every completed run not yet in `out`; returns the names of the runs copied. A run is copied into
    out/.partial/ and moved into place once whole: a copy cut short (a kill, a full disk) leaves no folder that
    the next call would take for a kept run and the plots for a finished one."""
    copied = []
    for run_json in sorted(Path(runs).glob("*/run.json")):
        if not json.loads(run_json.read_text()).get("completed") or (Path(out) / run_json.parent.name).exists():
            continue
        target = Path(out) / run_json.parent.name
        staging = Path(out) / ".partial" / target.name  # two levels down: not among the plots' */run.json
        shutil.rmtree(staging, ignore_errors=True)  # what an earlier copy cut short left
        staging.mkdir(parents=True)
        for name in ("run.json", "evals.csv", "diagnostics.csv"):
            if (run_json.parent / name).exists():  # (runs from before diagnostics.csv have none)
                shutil.copy2(run_json.parent / name, staging / name)
        staging.rename(target)
        copied.append(target.name)
    if (Path(out) / ".partial").is_dir() and not any((Path(out) / ".partial").iterdir()):
        (Path(out) / ".partial").rmdir()
    return copied


if __name__ == "__main__":
    options = tyro.cli(Options)
    if not options.runs.is_dir():
        sys.exit(f"error: no runs folder {options.runs}")
    copied = collect(options.runs, options.out)
    print(f"{len(copied)} finished runs copied to {options.out}")
