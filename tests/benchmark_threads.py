"""Torch's thread count and OpenMP's wait policy, idle and with every core busy: wall time and the numbers.

    python tests/benchmark_threads.py                          # every case, setting and load, in one run
    python tests/benchmark_threads.py --cases quick --loads busy
    python tests/benchmark_threads.py --cases headline --window 150   # a rate: runs stopped after 150 s

Each case is run for real in a fresh folder (W&B off) under each thread setting, first on an idle machine, then
with one busy process per core (a Python loop at normal priority: another user's job). A run that outlives
--timeout is stopped and reported as longer than it. Each run's evals.csv (wall times aside) is compared with the
same thread count's run on the idle machine: the thread count may change the numbers (float sums split differently),
the load and the wait policy must not. Nothing else should run meanwhile (docs/common.md, "Threads").
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "quick": ["dau_continuous.py"],  # the README's quick start
    "headline": ["dau_continuous.py", "--env-id", "HalfCheetah-v4", "--dt", "0.005", "--total-time", "3200"],
}
# The settings compared, as the environment a user would give; "default" is the scripts' own choice (none set).
SETTINGS = {
    "1 thread": {"OMP_NUM_THREADS": "1"},
    "2 threads": {"OMP_NUM_THREADS": "2"},
    "2 threads, passive wait": {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
    "default": {},
}


@dataclass
class Options:
    cases: tuple[str, ...] = tuple(CASES)
    """which commands to time (quick: the quick start; headline: HalfCheetah at dt 0.005 cut to 3200 s)"""
    settings: tuple[str, ...] = tuple(SETTINGS)
    """which thread settings to run"""
    loads: tuple[str, ...] = ("idle", "busy")
    """idle, and busy: one busy process per core"""
    timeout: float = 600.0
    """seconds after which a run is stopped and reported as longer"""
    window: float | None = None
    """instead of timing whole runs: stop each with SIGTERM after this many seconds and report the physical seconds
    it trained per second of wall time (run.json's physical_time over the window, the start included)"""
    keep: Path | None = None
    """a folder to copy each run's evals.csv to (<case>__<load>__<setting>.csv), to compare across calls"""


def run_case(command, setting, timeout, window=None):
    """Wall time of one run (None past the timeout) and its evals.csv; with a `window`, the physical seconds per
    second of wall time of a run stopped (SIGTERM) after `window` seconds, and its evals.csv so far."""
    environment = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    environment |= {"WANDB_MODE": "disabled", **SETTINGS[setting]}
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        if window is not None:
            process = subprocess.Popen([sys.executable, str(ROOT / command[0]), *command[1:]], cwd=folder,
                                       env=environment, stdout=subprocess.DEVNULL)  # fmt: skip
            time.sleep(max(0.0, window - (time.perf_counter() - start)))
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=timeout)
            (run_dir,) = Path(folder).glob("runs/*__*")
            reached = json.loads((run_dir / "run.json").read_text())["physical_time"]
            return reached / window, without_wall_time((run_dir / "evals.csv").read_text())
        try:
            subprocess.run([sys.executable, str(ROOT / command[0]), *command[1:]], cwd=folder, env=environment,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout, check=True)  # fmt: skip
        except subprocess.TimeoutExpired:
            return None, None
        wall = time.perf_counter() - start
        (evals,) = Path(folder).glob("runs/*/evals.csv")
        return wall, without_wall_time(evals.read_text())


def without_wall_time(evals):
    """evals.csv's text without its wall_time column, which differs from run to run."""
    rows = [line.split(",") for line in evals.splitlines()]
    column = rows[0].index("wall_time")
    return "\n".join(",".join(row[:column] + row[column + 1 :]) for row in rows)


def same_rows(evals, reference):
    """The same evaluations as far as both runs got (a run stopped after a window ends where it got)."""
    rows, reference_rows = evals.splitlines(), reference.splitlines()
    shared = min(len(rows), len(reference_rows))
    return shared > 1 and rows[:shared] == reference_rows[:shared]


def main(options):
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; each case under each setting, idle, then with {cores} busy processes")
    idle_evals, rows = {}, []
    for load in options.loads:
        busy = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores if load == "busy" else 0)
        ]
        try:
            for case in options.cases:
                for setting in options.settings:
                    wall, evals = run_case(CASES[case], setting, options.timeout, options.window)
                    threads = SETTINGS[setting].get("OMP_NUM_THREADS", "default")
                    reference = idle_evals.setdefault((case, threads), evals)
                    same = (
                        "—"
                        if evals is None or reference is None
                        else "same"
                        if same_rows(evals, reference)
                        else "DIFFER"
                    )
                    shown = f"> {options.timeout:.0f}" if wall is None else f"{wall:.1f}"
                    shown += " phys s / s" if options.window else " s"
                    rows.append((case, load, setting, shown, same))
                    if options.keep and evals is not None:
                        options.keep.mkdir(parents=True, exist_ok=True)
                        (options.keep / f"{case}__{load}__{setting.replace(' ', '_')}.csv").write_text(evals)
                    print(
                        f"{case:9} {load:5} {setting:34} {shown:>16}   evals vs idle, same threads: {same}", flush=True
                    )
        finally:
            for process in busy:
                process.kill()
                process.wait()
    print("\n| case | load | setting | wall time (s), or rate | evals.csv vs idle |\n|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(tyro.cli(Options))
