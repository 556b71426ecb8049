"""torch's CPU threads for a run: one, whatever the load, unless OMP_NUM_THREADS or MKL_NUM_THREADS sets another.

The thread count moves the numbers (torch sums LayerNorm's gradients in one part per thread), so a count that
followed the load made the same command and seed give other numbers on busy cores (issue 86). One thread is what
every kept run in docs/results used, and it does not collapse on cores that other processes keep busy, where two
threads that meet at every operation wait for each other's turn on a core and a run slows by up to ten times
(docs/common.md, "Threads"). The count is recorded in run.json and the checkpoint, and kept by --resume.
"""

import os

import torch

# Where a user sets the count themselves; torch has read them as it loaded.
SET_BY = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
THREADS = 1  # the count of every kept run in docs/results


def choose_threads(resuming=False, resumed_threads=None):
    """Set torch's thread count for this run; returns a line to print where the count is not THREADS, else None.
    OMP_NUM_THREADS or MKL_NUM_THREADS set: theirs, as torch read them. A resumed run (`resuming`): the count its
    checkpoint records (`resumed_threads`; a checkpoint from before this record: torch's count, as then), so that it
    goes on with the same numbers. Otherwise THREADS."""
    setting = next((name for name in SET_BY if os.environ.get(name)), None)
    if setting:
        threads, why = torch.get_num_threads(), setting
    elif resuming:
        threads, why = resumed_threads or torch.get_num_threads(), "the count the run began with"
        torch.set_num_threads(threads)
    else:
        threads = THREADS
        torch.set_num_threads(threads)
    if threads == THREADS:
        return None
    return f"torch threads: {threads} ({why}): other numbers than the kept runs, which used {THREADS}"
