"""The run's evaluations: each plays the policy of the round it is due at, on a copy of the networks on the CPU, and
its row of evals.csv carries that round's counters. With --eval-in-background the copy is played in a thread while
training goes on, and the rows are written in order as the evaluations end: the same evals.csv, since the copy is
taken at the same round, the evaluation envs are the thread's alone and it draws from none of the training's
generators. A checkpoint, the final evaluation and the run's end wait for the evaluations in flight."""

import copy
import time
from concurrent.futures import ThreadPoolExecutor


def policy_copy(networks):
    """A copy of `networks` (a dict of modules; one they share, such as the normaliser, stays shared) on the CPU: a
    step of the few evaluation envs is a forward pass too small for a GPU, which spends it in kernel launches and a
    sync per step. On a CPU machine the same weights, so the same numbers."""
    copied = copy.deepcopy(networks)
    for module in copied.values():
        module.cpu()
    return copied


def in_background(args, device):
    """--eval-in-background, or where it is None: on for a GPU run, whose host mostly waits (for the GPU's rounds and
    the env workers' steps) with Python's lock released; off on the CPU, where the thread and the training share
    that lock: on 2 cores with one torch thread, 0.98 times the wall time at once on HalfCheetah and 1.10 times on
    CartPole (docs/log.md, 2026-11-28)."""
    if args.eval_in_background is not None:
        return args.eval_in_background
    return device.type == "cuda"


class Evaluations:
    """The evaluations begun and not yet logged, in the order they began; `evaluate(networks)` returns the mean
    scaled return of the networks' copy over the evaluation envs (the script's), `logs` writes the rows."""

    def __init__(self, evaluate, logs, background):
        self.evaluate, self.logs = evaluate, logs
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="evaluation") if background else None
        self.in_flight = []  # (future, the round's counters), the oldest first

    def begin(self, networks, clock, start_time, wait=False):
        """An evaluation of the networks as they are now, with the clock's counters now; played at once, or in the
        thread. Logs the evaluations that have ended (`wait`: all of them, this one included, once they end)."""
        counters = clock.physical_time, clock.env_steps, clock.updates
        copied = policy_copy(networks)
        if self.thread is None:
            self._log(self._timed(copied), counters, start_time)
        else:
            self.in_flight.append((self.thread.submit(self._timed, copied), counters))
        self.log_ended(start_time, wait)

    def log_ended(self, start_time, wait=False):
        """Write the rows of the evaluations that have ended, in order (`wait`: of all of them, once they end)."""
        while self.in_flight and (wait or self.in_flight[0][0].done()):
            future, counters = self.in_flight[0]
            result = future.result()  # (a Ctrl-C while it waits leaves the evaluation in flight, for Loop.end)
            self.in_flight.pop(0)
            self._log(result, counters, start_time)

    def finish(self, start_time, error_type):
        """At the run's end, however it ended (`error_type`, None if it finished): log every evaluation begun, once
        it ends, and end the thread. After an error, one of an evaluation is not raised over it."""
        try:
            self.log_ended(start_time, wait=True)
        except Exception:
            if error_type is None:
                raise
        finally:
            if self.thread is not None:
                self.thread.shutdown(cancel_futures=True)

    def _timed(self, copied):
        began = time.time()
        return self.evaluate(copied), time.time() - began

    def _log(self, result, counters, start_time):
        (scaled_return, seconds), (physical_time, env_steps, updates) = result, counters
        self.logs.evaluation_row(scaled_return, seconds, time.time() - start_time, physical_time, env_steps, updates)
