"""Files written whole or not at all (the checkpoints, model.pt, run.json), and the run folder with its lock."""

import contextlib
import fcntl
import itertools
import json
import os
import sys


def replace_atomically(path, mode, write):
    """`write(file)` to a file beside `path`, flushed to disk, then renamed over `path`: a kill or an error
    during the write leaves the previous file whole, and a reader never sees half a file."""
    partial = f"{path}.partial"
    with open(partial, mode) as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)


def save_checkpoint(state, path):
    """torch.save, atomically: a kill during the write leaves the previous file whole (checkpoints, model.pt)."""
    import torch  # here: run.json's readers (harness/archive.py, through run_info.py) import no torch

    replace_atomically(path, "wb", lambda file: torch.save(state, file))


def save_json(data, path):
    """json.dump, atomically (run.json, which sweeps/ reads while runs go on and after they stop)."""
    replace_atomically(path, "w", lambda file: json.dump(data, file, indent=1))


def new_run_dir(run_name, runs="runs"):
    """Make the folder of a new run, runs/<run_name>, and return its name. The name ends in the start second, so two
    runs of the same script, env, dt and seed that differ in another argument (a grid over it, started on a fast
    machine) can get the same one: the second then gets runs/<run_name>_2, and so on. os.mkdir is atomic, so two
    processes never get the same folder."""
    os.makedirs(os.path.dirname(os.path.join(runs, run_name)), exist_ok=True)  # (an env id may name a folder)
    for number in itertools.count(1):
        name = run_name if number == 1 else f"{run_name}_{number}"
        try:
            os.mkdir(os.path.join(runs, name))
            return name
        except FileExistsError:
            continue


def claim_run_dir(run_dir):
    """Hold runs/<run_name> for this process while it lives (an OS lock on running.lock, released however the process
    ends, and the file removed as it exits: release_run_dir): a second process for the same folder, such as a
    --resume of a run still going, gets a ValueError. On a file system without locks the run goes on unheld, and
    says so in one line."""
    path = os.path.join(run_dir, "running.lock")
    while True:
        lock = open(path, "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise ValueError(f"{run_dir} is in use by another process (pid {lock.read().strip() or '?'}): wait for it "
                             "to stop, or stop it (SIGTERM saves a checkpoint)") from None  # fmt: skip
        except OSError as error:  # a file system without locks (some network file systems): nothing can be held
            print(
                f"warning: {run_dir}: this file system has no locks ({error.strerror or error}), so nothing stops a "
                "second process (a --resume of this run while it goes on) from writing to this run",
                file=sys.stderr,
            )
            return lock
        if held_at(path, lock):
            break
        lock.close()  # the file its last holder removed as it exited, after this process opened it: open it anew
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def held_at(path, lock):
    """Whether `lock` (an open file) is the file at `path` now, not one removed since it was opened."""
    try:
        return os.path.samestat(os.fstat(lock.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def release_run_dir(run_dir, lock):
    """At the process's exit: remove running.lock while still holding it, then let go of it, so that a run's folder
    holds its results alone once it ends (a run killed outright leaves the file, which then holds no lock). A process
    that opened it before the removal finds it gone once it gets the lock, and opens a new one (claim_run_dir)."""
    path = os.path.join(run_dir, "running.lock")
    if not lock.closed and held_at(path, lock):
        os.remove(path)
    lock.close()


def remove_run_dir(run_dir, lock):
    """Give back a new run's folder that nothing was written to (a run that stops before it starts): the folder
    goes, and runs/ too if that leaves it empty."""
    release_run_dir(run_dir, lock)
    os.removedirs(run_dir)


def remove_if_never_started(run_dir):
    """At the process's exit: a new run's folder that holds nothing but its lock (the process stopped before the run
    wrote run.json, such as a Ctrl-C or an error while the script set up) goes, and runs/ if that leaves it empty."""
    if os.path.isdir(run_dir) and set(os.listdir(run_dir)) <= {"running.lock"}:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(run_dir, "running.lock"))
        os.removedirs(run_dir)
