"""Run W&B sweep files on this machine: the same grid and the same command lines as `wandb agent`.

    python -m sweeps.run_local sweeps/paper/pendulum_dau.yaml sweeps/paper/pendulum_ddpg.yaml --workers 2
    python -m sweeps.run_local sweeps/paper/cartpole_*.yaml --override total_time=600 seed=1 dt=0.01,0.001
    python -m sweeps.run_local sweeps/paper/ant_*.yaml --results docs/results --hours 2.5   # a 3-hour session

Run it from the repository root (the sweep files name their program relative to it, as `wandb agent`
expects). Each grid point's command is built by W&B's own `create_sweep_command_args` and the
agent's macro substitution, so a local run is exactly the run an agent would start (sweeps/sweep_files.py). Runs go
to runs/<run_name>/ as usual; a grid point whose finished run is already there (runs/*/run.json of the
same identity: sweeps/print_args.py), or in a --results folder, is skipped, and one whose run was stopped
with a checkpoint goes on from it (the same command plus --resume), so an interrupted sweep resumes
where it stopped, in this session or a later one; one whose run diverged (a non-finite loss) is left
alone (sweeps/grid_runs.py). Before it starts a point, a call claims it (runs/sweep_claims/, a lock that lives as long
as the call or its run): several calls on one runs/ folder share the grid, each point run by one of them, and
each run's output goes to runs/sweep_logs/, one log per grid point. How a run ended (finished, stopped with a
checkpoint by a SIGTERM, interrupted by a SIGINT of its own, failed) is read from its run.json ("completed",
"stopped_by") and its exit status, not from its output. With --hours, the runs still going at the deadline
get SIGTERM: each saves a checkpoint at the end of its round and stops, to go on at the next call; until
then a free worker starts the first run (seed by seed, finest dt first) expected to end in the time left
(or of unknown length), or when none is, the first.
The sweep files pass --track: log in with `wandb login`, or set WANDB_MODE=offline (local W&B
files) or WANDB_MODE=disabled (no W&B at all).
"""

import fcntl
import math
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import tyro
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness import archive  # identities, labels, the finished runs (harness/__init__.py imports nothing)
from sweeps.grid_runs import (
    diverged_runs,
    ended_elsewhere,
    ended_run,
    expected_seconds,
    finished_runs,
    is_done,
    next_to_run,
    point_identity,
    readable_runs,
    resume_dir,
    run_args,
    run_folders,
)
from sweeps.sweep_files import agent_command, check_wandb, describe, grid, load_sweep, schedule

# The tools' names, as other modules and the tests call them: run_local.load_sweep, run_local.finished_runs...
__all__ = ["Options", "SweepCall", "agent_command", "claim", "describe", "ending", "expected_seconds",
           "finished_runs", "grid", "load_sweep", "main", "next_to_run", "point_identity", "readable_runs",
           "run_args", "schedule"]  # fmt: skip

# The harness (which imports torch) is imported where first needed: a command refused for bad input (a missing
# file, --workers 0, an override without "=") does not wait for torch. W&B's import (sweep_files) stays at the top,
# before the --hours clock starts: imported at the first run's start, its second or two came out of that run's time.


CLAIMS = Path("runs", "sweep_claims")  # one lock file per grid point started here (claim)


@dataclass
class Options:
    sweeps: tyro.conf.Positional[tuple[Path, ...]]
    """sweep files (sweeps/paper/*.yaml); their grids are run together"""
    workers: int = 2
    """runs in parallel, each a process with one torch thread"""
    override: tuple[str, ...] = ()
    """KEY=VALUE fixes a parameter, KEY=V1,V2 runs a sub-grid (e.g. total_time=600 seed=1,2 dt=0.01,0.001)"""
    dry_run: bool = False
    """print what would run and what is already done, and run nothing"""
    results: tuple[Path, ...] = ()
    """folders of runs kept elsewhere (sweeps/collect.py's, e.g. docs/results): their finished runs count as done"""
    hours: float | None = None
    """stop after this many hours: the runs still going then get SIGTERM, save a checkpoint and stop, and the next
    call goes on from it, so a time-limited session or job loses no half-done run and a run longer than a session
    spans several; None: no limit"""


def claim(identity):
    """This call's claim on a grid point: runs/sweep_claims/<identity>.lock, locked (flock) by the file returned, and
    by the run's process, which inherits it. The kernel drops the lock when both are gone, a crash or a kill
    included, so a claim outlives neither; None when another call, or a run it started, holds it."""
    CLAIMS.mkdir(parents=True, exist_ok=True)
    file = open(CLAIMS / f"{identity}.lock", "a")
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        return None
    return file


def ending(returncode, info, stopping):
    """How a point's run ended, from its exit status, its run.json (`info`, None when it left none) and whether this
    call was stopping its runs: "paused" (a SIGTERM's checkpoint saved), "skipped" (SIGTERM in its start-up, before
    any folder), "interrupted" (a SIGINT of its own: its evaluations kept), "done" (completed) or "failed". A paused,
    an interrupted and a finished run all exit 0: only run.json's "stopped_by" and "completed" tell them apart."""
    if returncode == -signal.SIGTERM and stopping:
        return "skipped"
    if returncode != 0 or info is None:
        return "failed"
    if info.get("stopped_by") == "SIGTERM":
        return "paused"
    if info.get("stopped_by") == "Ctrl-C":
        return "interrupted"
    return "done" if info.get("completed") else "failed"


class SweepCall:
    """One call's runs of its planned points (`pending`, in schedule order), `workers` at a time: each worker starts
    the next point as soon as its last run ends, until none is left, the deadline (--hours) comes or the call is
    stopped. The points, by how they ended, are in `done`, `paused`, `interrupted`, `skipped` (not started, or
    stopped in their start-up), `elsewhere` (left to another call) and `failures` ((name, log) pairs)."""

    def __init__(self, todo, runs, options):
        self.pending = list(todo)
        self.planned = len(self.pending)
        self.runs = runs  # the finished runs the plan found: with runs/'s, they measure a point's expected time
        self.options = options
        self.start = time.time()
        self.deadline = self.start + options.hours * 3600 if options.hours else math.inf
        self.log_dir = Path("runs", "sweep_logs")
        # One torch thread per run: `workers` runs share the cores instead of fighting over them.
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.lock = threading.Lock()  # over `pending` and `running`, and a run's start against the call's stop
        self.stopping = threading.Event()  # the deadline or Ctrl-C: no other run starts, those going get SIGTERM
        self.running = set()  # the runs' processes going now
        self.done, self.paused, self.interrupted, self.skipped, self.elsewhere = [], [], [], [], []
        self.failures = []

    def run(self):
        """Run the points: the workers until they are done; Ctrl-C, a SIGTERM or SIGHUP to the call, or a worker's
        error, stops the runs going (SIGTERM: each saves a checkpoint) and starts no other. Ctrl-C and the signals
        exit with a line; a worker's error is raised."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.deadline < math.inf:
            threading.Thread(target=self._stop_at_deadline, daemon=True).start()
        # A SIGTERM or a closed terminal stops the runs cleanly too, instead of orphaning them.
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGHUP, _interrupt)
        columns = [TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        with Progress(*columns, disable=not sys.stdout.isatty()) as progress:
            task = progress.add_task("runs", total=self.planned)
            pool = ThreadPoolExecutor(max_workers=self.options.workers)
            try:
                # A worker's error stops the call as soon as it is raised, whichever worker: waited for one by one, it
                # went unnoticed while an earlier worker's runs went on (the call ran a worker short, its point
                # dropped).
                futures = [pool.submit(self._work, progress, task) for _ in range(self.options.workers)]
                wait(futures, return_when=FIRST_EXCEPTION)  # all of them done, or one raised
                for future in futures:
                    if future.done():
                        future.result()  # a worker's error is raised here
            except (KeyboardInterrupt, Exception) as error:  # Ctrl-C, or a worker's error
                self._stop_runs()  # the scripts stop at the end of a round with a checkpoint
                pool.shutdown(wait=True)
                if not isinstance(error, KeyboardInterrupt):
                    raise
                sys.exit("interrupted: finished runs are kept; run the same command again to resume")
            pool.shutdown()
        for job in self.pending:  # the deadline came before they started
            self.skipped.append(describe(*job))
            print(f"skipped {self.skipped[-1]}: the deadline came before it started")

    def report(self):
        """The call's last lines: how many runs finished, failed, stopped, were not started or left to another call;
        its exit status, 1 when a run failed."""
        print(f"{len(self.done)} runs finished, {len(self.failures)} failed, in {time.time() - self.start:.0f} s")
        hours = self.options.hours
        limit = f" (--hours {hours:g})" if hours else ""  # or a SIGTERM from elsewhere
        if self.paused:
            print(f"{len(self.paused)} runs stopped at a checkpoint{limit}: run the same command again to go on")
        if self.skipped:
            print(f"{len(self.skipped)} runs not started{limit}: run the same command again to go on")
        if self.elsewhere:
            print(f"{len(self.elsewhere)} runs left to another call on runs/, which ran or runs them")
        if self.interrupted:
            print(f"{len(self.interrupted)} runs interrupted by a SIGINT sent to them: run the same command again to "
                  "go on from their last checkpoint, or to start again those without one")  # fmt: skip
        return 1 if self.failures else 0

    def _work(self, progress, task):
        """One worker: start the next run as soon as the last one ends, until none is left or the call stops."""
        while True:
            with self.lock:
                if not self.pending or self.stopping.is_set():
                    return
                index = 0
                if self.deadline < math.inf:
                    index = next_to_run(self.pending, self.deadline - time.time(), self._measured())
                job = self.pending.pop(index)
            self._run_point(*job, progress.console)
            progress.advance(task)

    def _measured(self):
        """Every finished run so far, this call's included: each measures its script's seconds per update."""
        return [*self.runs, *finished_runs("runs")]

    def _run_point(self, sweep, point, console):
        """Run one point, unless the time left is none, or another call holds it or ended it since the plan; say how
        it ended and note it in its list."""
        name = describe(sweep, point)
        if self.deadline < math.inf:
            needed, left = expected_seconds(sweep, point, self._measured()), self.deadline - time.time()
            needs = f"needs about {needed / 60:.0f} min, " if needed else ""
            if left <= 0:
                self.skipped.append(name)
                console.print(f"skipped {name}: {needs}{max(left, 0) / 60:.0f} min left", soft_wrap=True)
                return
            if (needed or 0) > left:
                console.print(f"started {name}: {needs}{left / 60:.0f} min left; it will stop at a checkpoint and go "
                              "on at the next call", soft_wrap=True)  # fmt: skip
        identity = point_identity(sweep, point)
        held = claim(identity)
        if held is None or ended_elsewhere(sweep, point):  # another call runs it, or has run it since the plan
            self.elsewhere.append(name)
            console.print(f"left   {name}: another call {'runs' if held is None else 'ran'} it", soft_wrap=True)
            if held:
                held.close()
            return
        # Named by the grid point: two sweep files of one script that differ in a fixed value write two logs.
        log_path = self.log_dir / (
            name.replace(" ", "__").replace("env_id=", "").replace("=", "") + f"__{identity}.log"
        )
        folder = resume_dir(sweep, point)
        command = agent_command(sweep, point) + ([f"--resume={folder}"] if folder else [])
        with held, open(log_path, "ab" if folder else "wb") as log:  # a resumed run's log goes on
            log_start, before = log.tell(), run_folders()
            returncode = self._start_and_wait(command, log, held)
        if returncode is None:  # the deadline or Ctrl-C came while this run was about to start
            self.skipped.append(name)
            return
        run_dir, info = ended_run(sweep, point, folder, before)
        outcome = ending(returncode, info, self.stopping.is_set())
        if outcome == "paused":
            self.paused.append(name)
            console.print(f"paused  {name}: checkpoint saved, the next call goes on from it", soft_wrap=True)
        elif outcome == "skipped":
            self.skipped.append(name)
            console.print(f"stopped {name} in its start-up: the next call starts it again", soft_wrap=True)
        elif outcome == "interrupted":
            self.interrupted.append(name)
            console.print(f"stopped {name} by a SIGINT: its evaluations so far are kept", soft_wrap=True)
        elif outcome == "done":
            self.done.append(name)
            final, physical_time = info.get("final_scaled_return", math.nan), info.get("physical_time", math.nan)
            console.print(f"done    {name}: scaled return {final:.2f} after {physical_time:g} physical s -> {run_dir}",
                          soft_wrap=True)  # fmt: skip
        else:
            self.failures.append((name, log_path))
            lines = log_path.read_bytes()[log_start:].decode(errors="replace").splitlines()  # this call's output
            if info is None:
                why = "no run.json of its point; " if returncode == 0 else ""
            else:
                why = f"stopped by {info['stopped_by']}; " if info.get("stopped_by") else ""
            console.print(f"FAILED  {name} (exit {returncode}): {why}{(lines or [''])[-1]}  [log: {log_path}]",
                          soft_wrap=True)  # fmt: skip

    def _start_and_wait(self, command, log, held):
        """A point's run, started unless the call is stopping (then None), in its own session (Ctrl-C reaches it
        once, from here) and holding the point's claim while it runs; its exit status."""
        with self.lock:
            if self.stopping.is_set():
                return None
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                       start_new_session=True, pass_fds=(held.fileno(),))  # fmt: skip
            self.running.add(process)
        returncode = process.wait()
        with self.lock:
            self.running.discard(process)
        return returncode

    def _stop_runs(self):
        """No other run starts; those going get SIGTERM (each saves a checkpoint at the end of its round)."""
        self.stopping.set()
        with self.lock:
            for process in self.running:
                process.send_signal(signal.SIGTERM)

    def _stop_at_deadline(self):
        while not self.stopping.wait(timeout=max(0.0, min(self.deadline - time.time(), 60.0))):
            if time.time() >= self.deadline:
                self._stop_runs()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def plan(options):
    """The sweep files read and checked (bad input: ValueError, before any run), then the plan: every point once
    (a point given twice, by overlapping files, runs once), in schedule order, and the finished and diverged runs
    of runs/ and the --results folders. Returns (jobs, todo, runs): every point, those to run, the finished runs."""
    if options.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {options.workers}")
    if options.hours is not None and not 0 < options.hours < math.inf:
        raise ValueError(f"--hours must be positive, got {options.hours}")
    if not options.sweeps:
        raise ValueError("give at least one sweep file")
    sweeps = [load_sweep(path, options.override) for path in options.sweeps]
    if not options.dry_run:
        check_wandb(sweeps)
    runs = [run for folder in ("runs", *options.results) for run in finished_runs(folder)]
    points = [(sweep, point) for sweep in sweeps for point in grid(sweep)]
    jobs = schedule(list({point_identity(sweep, point): (sweep, point) for sweep, point in points}.values()))
    diverged = [run for folder in ("runs", *options.results) for run in diverged_runs(folder)]
    todo = [job for job in jobs if not is_done(*job, runs) and not is_done(*job, diverged)]
    return jobs, todo, runs


def main(options):
    try:
        jobs, todo, runs = plan(options)
    except (OSError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"error: {error}")
    resuming = sum(resume_dir(*job) is not None for job in todo)
    done = sum(is_done(*job, runs) for job in jobs)
    print(f"{len(jobs)} runs in the grid, {done} already finished, {len(todo)} to run"
          + (f" ({resuming} from a checkpoint)" if resuming else "")
          + (f"; {len(jobs) - done - len(todo)} stopped by a non-finite loss, not run again (remove its folder to "
             "run it anyway)" if len(jobs) - done - len(todo) else ""))  # fmt: skip
    if options.dry_run:
        for sweep, point in jobs:
            folder = resume_dir(sweep, point) if (sweep, point) in todo else None
            status = "done  " if is_done(sweep, point, runs) else "resume" if folder else "to run"
            status = status if (sweep, point) in todo or status == "done  " else "diverged"
            print(status, " ".join(agent_command(sweep, point) + ([f"--resume={folder}"] if folder else [])))
        return
    call = SweepCall(todo, runs, options)
    call.run()
    if call.report():
        sys.exit(1)


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except archive.RefusedRuns as error:  # archive refusing elsewhere than in readable_runs
        sys.exit(f"error: {error}")
