"""Run W&B sweep files on this machine: the same grid and the same command lines as `wandb agent`.

    python -m sweeps.run_local sweeps/paper/pendulum_dau.yaml sweeps/paper/pendulum_ddpg.yaml --workers 2
    python -m sweeps.run_local sweeps/paper/cartpole_*.yaml --override total_time=600 seed=1 dt=0.01,0.001
    python -m sweeps.run_local sweeps/paper/ant_*.yaml --results docs/results --hours 2.5   # a 3-hour session

Run it from the repository root (the sweep files name their program relative to it, as `wandb agent`
expects). Each grid point's command is built by W&B's own `create_sweep_command_args` and the
agent's macro substitution, so a local run is exactly the run an agent would start. Runs go to
runs/<run_name>/ as usual; a grid point whose finished run is already there (runs/*/run.json of the
same identity: harness/archive.py), or in a --results folder, is skipped, and one whose run was stopped
with a checkpoint goes on from it (the same command plus --resume), so an interrupted sweep resumes
where it stopped, in this session or a later one; one whose run diverged (a non-finite loss) is left
alone. Before it starts a point, a call claims it (runs/sweep_claims/, a lock that lives as long as the
call or its run): several calls on one runs/ folder share the grid, each point run by one of them, and
each run's output goes to runs/sweep_logs/, one log per grid point. With --hours, the runs still going at the deadline
get SIGTERM: each saves a checkpoint at the end of its round and stops, to go on at the next call; until
then a free worker starts the first run (seed by seed, finest dt first) expected to end in the time left
(or of unknown length), or when none is, the first.
The sweep files pass --track: log in with `wandb login`, or set WANDB_MODE=offline (local W&B
files) or WANDB_MODE=disabled (no W&B at all).
"""

import fcntl
import itertools
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
from types import SimpleNamespace

import tyro
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

from harness import archive  # identities, labels, the finished runs (harness/__init__.py imports nothing)

# The harness (which imports torch) is imported where first needed: a command refused for bad input (a missing
# file, --workers 0, an override without "=") does not wait for torch. W&B's import stays here, before the --hours
# clock starts: imported at the first run's start, its second or two came out of that run's time.


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


def parse_value(text):
    """A command-line value: 600 -> int, 1e-3 -> float, true -> bool, anything else as YAML reads it."""
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return yaml.safe_load(text)


def load_sweep(path, overrides=()):
    """Read and check a sweep file; overrides ("key=value[,value...]") replace or add parameters."""
    with open(path) as file:
        sweep = yaml.safe_load(file)
    if not isinstance(sweep, dict) or sweep.get("method") != "grid":
        raise ValueError(f"{path}: only `method: grid` sweeps can run locally")
    command = sweep.get("command", [])
    if "${program}" not in command or "${args_no_boolean_flags}" not in command:
        raise ValueError(f"{path}: `command:` must contain ${{program}} and ${{args_no_boolean_flags}}")
    if not Path(sweep.get("program", "")).is_file():
        raise ValueError(f"{path}: program {sweep.get('program')!r} not found: run from the repository root")
    parameters = dict(sweep.get("parameters") or {})
    parsed = []  # (key, values), checked before the script is imported
    for override in overrides:
        key, separator, values = override.partition("=")
        if not separator or not values:
            raise ValueError(f"--override {override!r}: expected KEY=VALUE or KEY=V1,V2")
        parsed.append((key, [parse_value(value) for value in values.split(",")]))
    defaults = archive.script_defaults(sweep["program"])
    for key, values in parsed:
        if defaults.get(key) is not False:  # only a flag off by default takes a boolean (see below)
            values = [str(value) if isinstance(value, bool) else value for value in values]
        parameters[key] = {"value": values[0]} if len(values) == 1 else {"values": values}
    for key, spec in parameters.items():
        if key not in defaults:
            raise ValueError(f"{path}: {key!r} is not an argument of {sweep['program']}")
        if not isinstance(spec, dict) or not ("value" in spec or spec.get("values")):
            raise ValueError(f"{path}: parameter {key!r} needs `value:` or a non-empty `values:` list")
        values = spec["values"] if "values" in spec else [spec["value"]]
        if defaults[key] is not False and any(isinstance(value, bool) for value in values):
            # ${args_no_boolean_flags} makes true a bare flag and drops false: right only for flags off by default.
            raise ValueError(f"{path}: {key}: write the value as a string, 'True' or 'False' (quoted): a YAML boolean "
                             f"reaches the script as a bare --{key} or not at all")  # fmt: skip
    return {**sweep, "parameters": parameters, "defaults": defaults}


def grid(sweep):
    """Every grid point, as {key: value}."""
    keys = list(sweep["parameters"])
    choices = [spec["values"] if "values" in spec else [spec["value"]] for spec in sweep["parameters"].values()]
    return [dict(zip(keys, point, strict=True)) for point in itertools.product(*choices)]


def agent_command(sweep, point):
    """The command `wandb agent` starts for this grid point (wandb_agent.Agent._command_run)."""
    macros = create_sweep_command_args({"args": {key: {"value": value} for key, value in point.items()}})
    macros |= {"env": ["/usr/bin/env"], "interpreter": [sys.executable], "program": [sweep["program"]]}
    command = []
    for item in map(str, sweep["command"]):
        is_macro = item.startswith("${") and item.endswith("}")
        command += (macros.get(item[2:-1]) or []) if is_macro else [item]
    return command


REFUSED = set()  # run.json files refused so far (readable_runs): each is said once
REFUSING = threading.Lock()  # the workers' threads read runs/ at once: one of them says a refusal


def readable_runs(runs_dir):
    """(path, run.json) of every run in `runs_dir` whose run.json archive.read_run reads. One it refuses (a copy cut
    short, a full disk, a hand edit, no "script" or "args", a file that cannot be read) is refused in one line, once,
    and the sweep goes on with the rest: it may be another sweep's or an unrelated run's, and raising in a worker
    would stop every run of this call. Its grid point, if it is one of this sweep's, counts as not done: it runs
    again from the start, in a new folder, unless another run of it is done, and the line says so."""
    readable = []
    for path in Path(runs_dir).glob("*/run.json"):
        try:
            readable.append((path, archive.read_run(path)))
        except archive.RefusedRuns as error:
            with REFUSING:
                if path.resolve() in REFUSED:  # the same file, whichever folder name it was read under
                    continue
                REFUSED.add(path.resolve())
                print(f"refused {error}; going on without it: if it is a run of this grid, its point runs again from "
                      "the start, in a new folder", file=sys.stderr, flush=True)  # fmt: skip
    return readable


def finished_runs(runs_dir):
    """run.json of every run that ended normally (not interrupted, not crashed)."""
    return [info for _, info in readable_runs(runs_dir) if info and info.get("completed")]


def diverged_runs(runs_dir):
    """run.json of every run stopped by a non-finite loss: run again or resumed, it would diverge again."""
    from harness.run_info import NON_FINITE_LOSS

    return [info for _, info in readable_runs(runs_dir) if info and info.get("stopped_by") == NON_FINITE_LOSS]


def resumable_runs(runs_dir):
    """run.json of every unfinished run that has a checkpoint to go on from, with its folder as "run_dir"."""
    from harness.checkpoint import CHECKPOINT
    from harness.run_info import NON_FINITE_LOSS

    runs = []
    for path, info in sorted(readable_runs(runs_dir), key=lambda pair: pair[0], reverse=True):  # the latest first
        if info and not info.get("completed") and info.get("stopped_by") != NON_FINITE_LOSS:
            if (path.parent / CHECKPOINT).is_file():
                runs.append({**info, "run_dir": str(path.parent)})
    return runs


def run_args(sweep, point):
    """The arguments a grid point's run will have, as run.json records them (archive.resolved_args)."""
    return archive.resolved_args(sweep["program"], point)


def point_identity(sweep, point):
    """The grid point's identity, the one its run's run.json will record (harness.run_info.run_identity)."""
    from harness.run_info import run_identity

    return run_identity(Path(sweep["program"]).name, run_args(sweep, point))


def same_point(sweep, point, runs):
    """The runs of this grid point: the same identity (an older run.json's recomputed: archive.identity)."""
    wanted = point_identity(sweep, point)
    return [run for run in runs if archive.identity(run) == wanted]


def is_done(sweep, point, runs):
    """A finished run of the same grid point."""
    return bool(same_point(sweep, point, runs))


def ended_elsewhere(sweep, point):
    """Whether runs/ now has a run of this point that ended for good, finished or stopped by a non-finite loss: the
    call that planned its list before that run ended must not run the point again."""
    return is_done(sweep, point, finished_runs("runs")) or is_done(sweep, point, diverged_runs("runs"))


def stopped_run(sweep, point, stopped_runs=None):
    """run.json (with "run_dir") of this point's latest run stopped with a checkpoint in runs/ (or among
    `stopped_runs`, resumable_runs' list), or None."""
    stopped = same_point(sweep, point, resumable_runs("runs") if stopped_runs is None else stopped_runs)
    return stopped[0] if stopped else None


def resume_dir(sweep, point):
    """The folder of this point's latest run stopped with a checkpoint in runs/, or None."""
    stopped = stopped_run(sweep, point)
    return stopped["run_dir"] if stopped else None


def expected_seconds(sweep, point, runs, stopped_runs=None):
    """Wall-clock seconds the point's run should still take: the updates it has left (all of them, or those
    after the checkpoint a SIGTERM left; `stopped_runs` as in stopped_run) times the slowest seconds per update
    of the finished runs of the same script, env and dt, or of any dt when none has this one (a coarse dt costs
    more per update: Ant's dt 0.05 about twice its dt 0.005). None without such a run, or with the env's native
    dt. Per update, not per round: --round-seconds changes the rounds' length, not the updates per physical
    second."""
    from harness.clock import whole_rounds

    script, args = Path(sweep["program"]).name, run_args(sweep, point)
    measured = [run for run in runs if archive.current_script(run["script"]) == script]
    measured = [run for run in measured if run["args"]["env_id"] == args["env_id"]]
    measured = [run for run in measured if run.get("updates")]
    if not measured or not args["dt"]:
        return None
    same_dt = [run for run in measured if archive.same_value(run.get("dt"), args["dt"])]
    per_update = max(run["wall_time"] / run["updates"] for run in same_dt or measured)
    rounds = whole_rounds(SimpleNamespace(**args), args["dt"])
    stopped = stopped_run(sweep, point, stopped_runs)
    # A SIGTERM saves the checkpoint with the run.json it writes; after a Ctrl-C or a kill, the checkpoint can be older.
    done = stopped.get("updates", 0) if stopped and stopped.get("stopped_by") == "SIGTERM" else 0
    return max(rounds * args["updates_per_round"] - done, 0) * per_update


def next_to_run(pending, seconds_left, runs):
    """Index in `pending` (schedule order) of the run to start next: the first expected to end in the seconds left
    (or of unknown length), so that runs that end go before a longer one that would stop at the deadline with a
    checkpoint; when none fits, the first (it starts, stops at the deadline and goes on at the next call)."""
    stopped_runs = resumable_runs("runs")
    for index, (sweep, point) in enumerate(pending):
        if (expected_seconds(sweep, point, runs, stopped_runs) or 0) <= seconds_left:
            return index
    return 0


def check_wandb(sweeps):
    """The sweep files pass --track: fail now, not in every run, when W&B has no credentials."""
    if os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return
    if not any("--track" in map(str, sweep["command"]) for sweep in sweeps):
        return
    import wandb

    try:
        wandb.Api(timeout=30)
    except wandb.errors.UsageError as error:
        raise ValueError(
            f"W&B: {error} Or set WANDB_MODE=offline (W&B files kept locally) or WANDB_MODE=disabled."
        ) from None


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


def describe(sweep, point):
    """Short name of a grid point: the script, its env, dt and seed, and any other parameter that varies."""
    shown = [key for key in ("env_id", "dt", "seed") if key in point]
    shown += [key for key, spec in sweep["parameters"].items() if "values" in spec and key not in shown]
    return " ".join([Path(sweep["program"]).stem, *(f"{key}={point[key]}" for key in shown)])


def schedule(jobs):
    """Seed by seed (a partial sweep covers every dt), smallest dt (longest run) first within a seed."""

    def key(job):
        sweep, point = job
        seeds = sweep["parameters"].get("seed", {})
        seed_rank = seeds["values"].index(point["seed"]) if "values" in seeds else 0
        return seed_rank, point.get("dt") or 0.0

    return sorted(jobs, key=key)


def main(options):
    try:
        if options.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {options.workers}")
        if options.hours is not None and not 0 < options.hours < math.inf:
            raise ValueError(f"--hours must be positive, got {options.hours}")
        if not options.sweeps:
            raise ValueError("give at least one sweep file")
        sweeps = [load_sweep(path, options.override) for path in options.sweeps]
        if not options.dry_run:
            check_wandb(sweeps)
    except (OSError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"error: {error}")
    runs = [run for folder in ("runs", *options.results) for run in finished_runs(folder)]
    points = [(sweep, point) for sweep in sweeps for point in grid(sweep)]
    unique = {point_identity(sweep, point): (sweep, point) for sweep, point in points}
    jobs = schedule(list(unique.values()))  # a point given twice (overlapping files) runs once
    diverged = [run for folder in ("runs", *options.results) for run in diverged_runs(folder)]
    todo = [job for job in jobs if not is_done(*job, runs) and not is_done(*job, diverged)]
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
    log_dir = Path("runs", "sweep_logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    # One torch thread per run: `workers` runs share the cores instead of fighting over them.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    running, lock, failures, skipped, paused, stopping = set(), threading.Lock(), [], [], [], threading.Event()
    elsewhere = []  # points another call was running
    interrupted = []  # runs stopped by a SIGINT of their own, not by this call: neither finished nor at a SIGTERM stop
    start = time.time()
    deadline = start + options.hours * 3600 if options.hours else math.inf

    def run(job, progress, task):
        sweep, point = job
        name = describe(sweep, point)
        if deadline < math.inf:  # measured on every finished run so far, this call's included
            measured = [*runs, *finished_runs("runs")]
            needed, left = expected_seconds(sweep, point, measured), deadline - time.time()
            needs = f"needs about {needed / 60:.0f} min, " if needed else ""
            if left <= 0:
                skipped.append(name)
                progress.console.print(f"skipped {name}: {needs}{max(left, 0) / 60:.0f} min left", soft_wrap=True)
                progress.advance(task)
                return
            if (needed or 0) > left:
                progress.console.print(f"started {name}: {needs}{left / 60:.0f} min left; it will stop at a "
                                       "checkpoint and go on at the next call", soft_wrap=True)  # fmt: skip
        identity = point_identity(sweep, point)
        held = claim(identity)
        if held is None or ended_elsewhere(sweep, point):  # another call runs it, or has run it since the plan
            elsewhere.append(name)
            progress.console.print(
                f"left   {name}: another call {'runs' if held is None else 'ran'} it", soft_wrap=True
            )
            progress.advance(task)
            if held:
                held.close()
            return
        # Named by the grid point: two sweep files of one script that differ in a fixed value write two logs.
        log_path = log_dir / (name.replace(" ", "__").replace("env_id=", "").replace("=", "") + f"__{identity}.log")
        folder = resume_dir(sweep, point)
        command = agent_command(sweep, point) + ([f"--resume={folder}"] if folder else [])
        with held, open(log_path, "ab" if folder else "wb") as log:  # a resumed run's log goes on
            log_start = log.tell()
            with lock:
                if stopping.is_set():  # the deadline or Ctrl-C came while this run was about to start
                    skipped.append(name)
                    progress.advance(task)
                    return
                process = subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    pass_fds=(held.fileno(),),
                )  # its own session: Ctrl-C reaches the run once, from here; it holds the claim while it runs
                running.add(process)
            returncode = process.wait()
            with lock:
                running.discard(process)
        lines = log_path.read_bytes()[log_start:].decode(errors="replace").splitlines()  # this call's output
        if returncode == 0 and any(line.startswith("stopped by SIGTERM") for line in lines):
            paused.append(name)
            progress.console.print(f"paused  {name}: checkpoint saved, the next call goes on from it", soft_wrap=True)
        elif returncode == -signal.SIGTERM and stopping.is_set():  # stopped in its start-up, before any round
            skipped.append(name)
            progress.console.print(f"stopped {name} in its start-up: the next call starts it again", soft_wrap=True)
        elif returncode == 0 and any(line.startswith("interrupted") for line in lines):
            interrupted.append(name)
            progress.console.print(f"stopped {name} by a SIGINT: its evaluations so far are kept", soft_wrap=True)
        elif returncode == 0:
            endings = [line.split(": ", 1)[1] for line in lines if ": scaled return" in line]
            progress.console.print(f"done    {name}: {endings[-1] if endings else ''}", soft_wrap=True)
        else:
            failures.append((name, log_path))
            message = f"FAILED  {name} (exit {returncode}): {(lines or [''])[-1]}  [log: {log_path}]"
            progress.console.print(message, soft_wrap=True)
        progress.advance(task)

    pending = list(todo)

    def work(progress, task):
        """One worker: start the next run as soon as the last one ends, until none is left or the call stops."""
        while True:
            with lock:
                if not pending or stopping.is_set():
                    return
                if deadline < math.inf:
                    index = next_to_run(pending, deadline - time.time(), [*runs, *finished_runs("runs")])
                else:
                    index = 0
                job = pending.pop(index)
            run(job, progress, task)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    def stop_at_deadline():  # SIGTERM: each run saves a checkpoint at the end of its round and stops
        while not stopping.wait(timeout=max(0.0, min(deadline - time.time(), 60.0))):
            if time.time() >= deadline:
                stopping.set()
                with lock:
                    for process in running:
                        process.send_signal(signal.SIGTERM)

    if deadline < math.inf:
        threading.Thread(target=stop_at_deadline, daemon=True).start()
    # A SIGTERM or a closed terminal stops the runs cleanly too, instead of orphaning them.
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGHUP, interrupt)
    columns = [TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, disable=not sys.stdout.isatty()) as progress:
        task = progress.add_task("runs", total=len(todo))
        pool = ThreadPoolExecutor(max_workers=options.workers)
        try:
            # A worker's error stops the call as soon as it is raised, whichever worker: waited for one by one, it
            # went unnoticed while an earlier worker's runs went on (the call ran a worker short, its point dropped).
            futures = [pool.submit(work, progress, task) for _ in range(options.workers)]
            wait(futures, return_when=FIRST_EXCEPTION)  # all of them done, or one raised
            for future in futures:
                if future.done():
                    future.result()  # a worker's error is raised here
        except (KeyboardInterrupt, Exception) as error:  # Ctrl-C, or a worker's error
            stopping.set()  # the workers start no other run
            with lock:
                for process in running:  # the scripts stop at the end of a round with a checkpoint
                    process.send_signal(signal.SIGTERM)
            pool.shutdown(wait=True)
            if not isinstance(error, KeyboardInterrupt):
                raise
            sys.exit("interrupted: finished runs are kept; run the same command again to resume")
        pool.shutdown()
    for job in pending:  # the deadline came before they started
        skipped.append(describe(*job))
        print(f"skipped {skipped[-1]}: the deadline came before it started")
    finished = len(todo) - len(failures) - len(skipped) - len(paused) - len(elsewhere) - len(interrupted)
    print(f"{finished} runs finished, {len(failures)} failed, in {time.time() - start:.0f} s")
    limit = f" (--hours {options.hours:g})" if options.hours else ""  # or a SIGTERM from elsewhere
    if paused:
        print(f"{len(paused)} runs stopped at a checkpoint{limit}: run the same command again to go on")
    if skipped:
        print(f"{len(skipped)} runs not started{limit}: run the same command again to go on")
    if elsewhere:
        print(f"{len(elsewhere)} runs left to another call on runs/, which ran or runs them")
    if interrupted:
        print(f"{len(interrupted)} runs interrupted by a SIGINT sent to them: run the same command again to go on from "
              "their last checkpoint, or to start again those without one")  # fmt: skip
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    try:
        main(tyro.cli(Options))
    except archive.RefusedRuns as error:  # archive refusing elsewhere than in readable_runs
        sys.exit(f"error: {error}")
