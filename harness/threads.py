"""torch's CPU threads for a run: one per core that other processes leave idle at its start, unless set.

torch starts one thread per core. On cores that other processes keep busy, two threads that meet at every operation
wait for each other's turn on a core, and a run slows by up to ten times; one thread does not
(docs/common.md, "Threads"). The thread count also moves the numbers (torch sums LayerNorm's gradients in one part
per thread), so it is chosen once, at the start, recorded in run.json and the checkpoint, and kept by --resume.
"""

import os

import psutil
import torch

# Where a user sets the count themselves; torch has read them as it loaded.
SET_BY = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
BUSY_WINDOW = 0.25  # seconds of the cores' load measured, while this process sleeps


def idle_cores(window=BUSY_WINDOW):
    """How many of the cores this process may use the other processes leave idle, summed over them (1.5: one core
    idle and half of another), measured over `window` seconds while this process waits (psutil's per-core load)."""
    load = psutil.cpu_percent(interval=window, percpu=True)
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(len(load))
    return sum(1 - load[core] / 100 for core in allowed if core < len(load))


def choose_threads(resuming=False, resumed_threads=None, idle=idle_cores):
    """Set torch's thread count for this run; returns a line saying why where it is not torch's own count, else
    None. OMP_NUM_THREADS or MKL_NUM_THREADS set: theirs, as torch read them. A resumed run (`resuming`): the count
    its checkpoint records (`resumed_threads`; a checkpoint from before this record: torch's count, as then), so that
    it goes on with the same numbers. Otherwise torch's count (one per core), lowered to the cores that other
    processes leave idle (`idle()`, a core counting where three quarters of it are idle), at least one."""
    if any(os.environ.get(name) for name in SET_BY):
        return None
    default = torch.get_num_threads()
    if resuming:
        torch.set_num_threads(resumed_threads or default)
        return None if (resumed_threads or default) == default else f"torch threads: {resumed_threads}, as before"
    threads = max(1, min(default, int(idle() + 0.25)))
    if threads == default:
        return None
    torch.set_num_threads(threads)
    return (f"torch threads: {threads} of {default}, the other cores being busy (other numbers than with {default}; "
            "OMP_NUM_THREADS=N sets the count)")  # fmt: skip
