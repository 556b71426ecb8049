"""The run's evaluations: each plays the policy of the round it is due at, on a copy of the policy network on the
CPU, and its row of evals.csv carries that round's counters. With --eval-in-background the copy is played in a
thread while training goes on, and each row is written as its evaluation ends: the same evals.csv, since the copy
is taken at the same round, the evaluation envs are the thread's alone and it draws from none of the training's
generators. One evaluation at a time: the next, a checkpoint and the run's end wait for the one in flight, so that
a wait lasts one evaluation at most and one copy of the policy is held (once a SIGTERM has come, SIGTERM_WAIT_SECONDS
at most, then the evaluation is abandoned and run.json says so; at a run's end after a Ctrl-C or an error, a second
Ctrl-C or a SIGTERM ends the wait, and after an error a time limit: Evaluations.finish). The seconds
training spent on evaluations
(running them at once, copying the policy, waiting for the thread) are Logs.eval_wait_seconds, beside the seconds
the evaluations took to play (Logs.eval_seconds)."""

import concurrent.futures
import contextlib
import copy
import ctypes
import math
import queue
import sys
import threading
import time
import traceback

# After an error in training, the run's end waits for the evaluation in flight at most this long, or twice the run's
# longest evaluation if that is longer: an evaluation stuck for good does not hold the error's end up for ever.
ERROR_WAIT_SECONDS = 60
# After a SIGTERM, training waits for the evaluation in flight at most this long, then abandons it (stopped in its
# thread, INTERRUPT_SECONDS more at most) and saves the checkpoint. Slurm (KillWait) and GCP's spot machines give 30 s
# from SIGTERM to SIGKILL, which the round in flight, this wait and the checkpoint share: 10 + 5 s leave 15 s for the
# rest. A stuck evaluation held SIGTERM's stop for ever, and a sweep's --hours with it (issue 86).
SIGTERM_WAIT_SECONDS = 10
INTERRUPT_SECONDS = 5


def policy_copy(networks):
    """The policy, the last of `networks` (a dict of modules, as model.pt keeps them: the actor, or the network whose
    argmax acts), copied on the CPU, as {its name: its copy} (its normaliser, a submodule, with it; the other
    networks are not copied): a step of the few evaluation envs is a forward pass too small for a GPU, which spends
    it in kernel launches and a sync per step. On a CPU machine the same weights, so the same numbers."""
    name, policy = list(networks.items())[-1]
    return {name: copy.deepcopy(policy).cpu()}


def in_background(args, device):
    """--eval-in-background, or where it is None: on for a GPU run, whose host mostly waits (for the GPU's rounds and
    the env workers' steps) with Python's lock released; off on the CPU, where the thread and the training share
    that lock: on 2 cores with one torch thread, 0.98 times the wall time at once on HalfCheetah and 1.10 times on
    CartPole (docs/log.md, 2026-11-28)."""
    if args.eval_in_background is not None:
        return args.eval_in_background
    return device.type == "cuda"


class EvaluationThread:
    """A thread that plays what it is given, one after another; `submit` returns its Future. A daemon, so that an
    error before the run's end cannot leave the process waiting for it; `interrupt` stops what it plays, since a
    daemon thread still in torch's code as Python exits aborts the process ("terminate called without an active
    exception")."""

    def __init__(self):
        self.tasks = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="evaluation", daemon=True)
        self.thread.start()

    def submit(self, function, *args):
        future = concurrent.futures.Future()
        self.tasks.put((future, function, args))
        return future

    def interrupt(self, future, timeout=10):
        """Stop playing `future`'s task as Ctrl-C stops one in the main thread: KeyboardInterrupt, raised in the thread
        once the env step or forward pass under way returns; waits for that (`timeout` seconds at most, Ctrl-C or
        not)."""
        if future.cancel():  # not begun: it never will (an exception raised between tasks would end the thread)
            return
        if not future.done():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread.ident),
                                                       ctypes.py_object(KeyboardInterrupt))  # fmt: skip
            with contextlib.suppress(KeyboardInterrupt):
                concurrent.futures.wait([future], timeout=timeout)

    def _serve(self):
        while True:
            try:
                future, function, args = self.tasks.get()
                if not future.set_running_or_notify_cancel():  # cancelled by interrupt before it began
                    continue
                try:
                    future.set_result(function(*args))
                except BaseException as error:  # raised in the main thread, by Future.result
                    if not future.done():  # (an interrupt as the task ended)
                        future.set_exception(error)
            except KeyboardInterrupt:  # an interrupt that came as its task ended: nothing left to stop
                continue


class Evaluations:
    """The run's evaluations and the one in flight in the thread, if any: `evaluate(networks)` returns the mean scaled
    return of the policy's copy (policy_copy) over the evaluation envs (the script's), `logs` writes the rows and
    counts the seconds; `preemption` (harness/clock.py) bounds training's wait for the one in flight once a SIGTERM
    has come (SIGTERM_WAIT_SECONDS), and `abandoned` are the evaluations a resumed run abandoned before."""

    def __init__(self, evaluate, logs, background, preemption=None, abandoned=()):
        self.evaluate, self.logs, self.preemption = evaluate, logs, preemption
        self.thread = EvaluationThread() if background else None
        self.in_flight = None  # (future, the round's counters) of the evaluation playing in the thread
        # The physical times of the evaluations abandoned after a SIGTERM (run.json), a resumed run's earlier ones first
        self.abandoned = list(abandoned)
        self.sigterm_deadline = None  # until when training waits for evaluations, once a SIGTERM has come
        self.longest = 0.0  # the seconds the run's longest evaluation so far took to play
        self.error = None  # the error of the evaluation in flight at a run's end by Ctrl-C or an error (finish)

    def begin(self, networks, clock, start_time, wait=False):
        """An evaluation of the networks' policy as it is now, with the clock's counters now: played at once, or in the
        thread once the one in flight has ended and is logged (`wait`: logged too, once it ends). False where it was
        abandoned after a SIGTERM (`wait`), or where the one in flight was: then this one is not begun, and the
        resumed run makes it."""
        with self._waiting():
            if not self._log_in_flight(start_time, wait=True):
                return False
            counters, copied = (clock.physical_time, clock.env_steps, clock.updates), policy_copy(networks)
            if self.thread is None:
                self._log(self._timed(copied), counters, start_time)
                return True
            self.in_flight = self.thread.submit(self._timed, copied), counters
            return self._log_in_flight(start_time, wait)

    def log_ended(self, start_time, wait=False):
        """Write the row of the evaluation in flight if it has ended (`wait`: once it ends); False where it was
        abandoned after a SIGTERM."""
        with self._waiting():
            return self._log_in_flight(start_time, wait)

    def finish(self, start_time, error_type, preemption=None):
        """At the run's end, however it ended (`error_type`, None if it finished): log the evaluation in flight, once
        it ends. After a Ctrl-C or an error, the wait ends without it (stopped in the thread, as the main thread stops
        one) at a Ctrl-C (the second, where one stopped the run) or a SIGTERM (counted by `preemption`,
        harness/clock.py) that comes while it waits, and after an error in training once it has waited
        ERROR_WAIT_SECONDS, or twice the run's longest evaluation if that is longer. There, the evaluation's own error
        is not raised over the one that ended the run: it is printed with its traceback and kept in `self.error`, for
        Loop.end."""
        if self.in_flight is None:
            return
        if error_type is None:
            self.log_ended(start_time, wait=True)
            return
        if error_type is KeyboardInterrupt:
            limit = math.inf
            self.logs.console.print("waiting for the evaluation in flight (Ctrl-C again: stop without it)")
        else:
            limit = max(ERROR_WAIT_SECONDS, 2 * self.longest)
            self.logs.console.print(f"waiting for the evaluation in flight, {limit:.0f} s at most (Ctrl-C or SIGTERM: "
                                    "stop without it)")  # fmt: skip
        future, deadline, signals = self.in_flight[0], time.time() + limit, preemption.signals if preemption else 0
        with self._waiting():
            try:
                while not future.done() and time.time() < deadline:
                    if preemption is not None and preemption.signals > signals:
                        return self._drop("SIGTERM: the evaluation in flight is dropped")
                    concurrent.futures.wait([future], timeout=min(0.1, deadline - time.time()))
            except KeyboardInterrupt:
                return self._drop("interrupted again: the evaluation in flight is dropped")
            if not future.done():
                return self._drop(f"the evaluation in flight has not ended {limit:.0f} s after the error: dropped")
            try:
                self._log_in_flight(start_time, wait=True)
            except Exception as error:
                self.error = error
                print("error: the evaluation in flight failed:", file=sys.stderr)
                traceback.print_exception(error, file=sys.stderr)

    def exit_if_failed(self, run_dir):
        """After a Ctrl-C, once the run's logs and run.json are written: exit with status 1 if the evaluation in flight
        failed (finish printed its traceback). It went unsaid: the run exited 0 with an empty stderr."""
        if self.error is not None:
            sys.exit(f"error: the evaluation in flight failed ({type(self.error).__name__}: {self.error}); the rows "
                     f"before it and run.json are kept in {run_dir}")  # fmt: skip

    def _drop(self, message):
        self.thread.interrupt(self.in_flight[0])
        self.in_flight = None
        self.logs.console.print(message)

    def _log_in_flight(self, start_time, wait):
        """Log the evaluation in flight if it has ended (`wait`: once it ends); False where it was abandoned."""
        if self.in_flight is not None and (wait or self.in_flight[0].done()):
            future, counters = self.in_flight
            if not self._ended_in_time(future):  # (a Ctrl-C while it waits leaves it in flight, for finish)
                self.thread.interrupt(future, timeout=INTERRUPT_SECONDS)
                self.in_flight = None
                self.abandoned.append(counters[0])
                self.logs.console.print(f"SIGTERM: the evaluation at physical time {counters[0]:g} s has not ended "
                                        f"{SIGTERM_WAIT_SECONDS:g} s after it: abandoned, its row left out "
                                        "(run.json: abandoned_evaluations)", soft_wrap=True)  # fmt: skip
                return False
            self.in_flight = None  # ended: its error, if any, is raised once, here
            self._log(future.result(), counters, start_time)
        return True

    def _ended_in_time(self, future):
        """Wait for `future` to end: without limit, but once a SIGTERM has come (before the wait or during it) until
        SIGTERM_WAIT_SECONDS after the first wait that saw it. False where it has not ended by then."""
        while not future.done():
            if self.sigterm_deadline is None and self.preemption is not None and self.preemption.requested:
                self.sigterm_deadline = time.time() + SIGTERM_WAIT_SECONDS
            if self.sigterm_deadline is not None and time.time() >= self.sigterm_deadline:
                return False
            concurrent.futures.wait([future], timeout=0.1)
        return True

    @contextlib.contextmanager
    def _waiting(self):
        """The seconds training spends in it, added to Logs.eval_wait_seconds."""
        began = time.time()
        try:
            yield
        finally:
            self.logs.eval_wait_seconds += time.time() - began

    def _timed(self, copied):
        began = time.time()
        return self.evaluate(copied), time.time() - began

    def _log(self, result, counters, start_time):
        (scaled_return, seconds), (physical_time, env_steps, updates) = result, counters
        self.longest = max(self.longest, seconds)
        self.logs.evaluation_row(scaled_return, seconds, time.time() - start_time, physical_time, env_steps, updates)
