"""A grid point's runs, as sweeps/run_local.py finds them in runs/ and the --results folders: finished, stopped by a
non-finite loss, stopped with a checkpoint to go on from; how long the rest of a point's run should take; and the
run.json of the run a point's command has just made, which says how it ended."""

import sys
import threading
from pathlib import Path
from types import SimpleNamespace

from harness import archive  # identities, labels, the finished runs (harness/__init__.py imports nothing)
from harness.run_info import SAME_COMPUTATION
from sweeps.print_args import printed, resolve
from sweeps.sweep_files import grid, point_argv

# The harness's other modules (torch) are imported where first needed: a command refused for bad input does not wait
# for torch.

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


def resolved(sweep, point):
    """What the point's script prints with --print-args (sweeps/print_args.py): its run's arguments, identity and
    label, as its run.json will record them. The first point asked of a sweep asks for its whole grid at once."""
    argv = point_argv(sweep, point)
    if not printed(sweep["program"], argv):
        resolve(sweep["program"], [argv, *(point_argv(sweep, other) for other in grid(sweep) if other != point)])
    return resolve(sweep["program"], [argv])[0]


def run_args(sweep, point):
    """The arguments a grid point's run will have, as run.json records them."""
    return resolved(sweep, point)["args"]


def point_identity(sweep, point):
    """The grid point's identity, the one its run's run.json will record (harness.run_info.run_identity)."""
    return resolved(sweep, point)["identity"]


def same_point(sweep, point, runs):
    """The runs of this grid point: the same identity (run.json's)."""
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


def run_folders():
    """The folders in runs/ now: after its command, a point's new run is the folder of its identity not among them."""
    return {path.name for path in Path("runs").iterdir()} if Path("runs").is_dir() else set()


def ended_run(sweep, point, resumed, before):
    """(folder, run.json) of the run the point's command has just made: in the folder it resumed (`resumed`), or in
    the one of this point's identity that was not in runs/ `before` it started (the call holds the point's claim, so
    no other process makes one meanwhile); (None, None) when it left none that reads (stopped before its folder, or
    its run.json refused: readable_runs says so)."""
    wanted, runs = point_identity(sweep, point), []
    for path, info in readable_runs("runs"):
        new = path.parent == Path(resumed) if resumed else path.parent.name not in before
        if new and info and archive.identity(info) == wanted:
            runs.append((path.parent, info))
    return max(runs, key=lambda run: run[0].name) if runs else (None, None)  # the latest, were there two


def expected_seconds(sweep, point, runs, stopped_runs=None):
    """Wall-clock seconds the point's run should still take: the updates it has left (all of them, or those
    after the checkpoint a SIGTERM left; `stopped_runs` as in stopped_run) times the slowest seconds per update
    of the finished runs of the same script, env and dt, or of any dt when none has this one (a coarse dt costs
    more per update: Ant's dt 0.05 about twice its dt 0.005). None without such a run, or with the env's native
    dt. Per update, not per round: --round-seconds changes the rounds' length, not the updates per physical
    second."""
    from harness.clock import whole_rounds

    script, args = Path(sweep["program"]).name, run_args(sweep, point)
    same = SAME_COMPUTATION.get(script, script)  # a merged variant's runs (dau_discrete_td_noise.py) measure its script
    measured = [run for run in runs if SAME_COMPUTATION.get(run["script"], run["script"]) == same]
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
