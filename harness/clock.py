"""The run's clock: whole rounds, and what falls due between them (evaluations, diagnostics rows, checkpoints);
SIGTERM's request to stop.

A round is --num-envs x --steps-per-round steps of dt, `round_time` physical seconds of interaction, then the
round's updates. The clock counts integers (rounds, evaluations, diagnostics rows and checkpoints done): physical
time, env steps and updates follow from the rounds, and each event falls on an exact multiple of its interval
(summing 0.4 s a round, 2.4 s came to 2.3999999999999995 and an evaluation fired a round late)."""

import math
import signal


def whole_rounds(args, dt):
    """The rounds a run of --total-time makes at this dt: whole rounds only (the clock's, the replay memory's size
    and sweeps/run_local.py's estimate of a run's length all count them here)."""
    return int(args.total_time / (args.num_envs * args.steps_per_round * dt) + 1e-9)


class Clock:
    """The training loop's counters (COUNTERS, kept by the checkpoint) and what is due before the next round."""

    COUNTERS = ("rounds_done", "evaluations", "log_rows", "checkpoints")

    def __init__(self, args, dt):
        self.args = args
        self.round_time = args.num_envs * args.steps_per_round * dt  # physical seconds of interaction per round
        self.num_rounds = whole_rounds(args, dt)
        self.rounds_done, self.evaluations, self.log_rows, self.checkpoints = 0, 0, 0, 0
        # The first rounds that make no updates, set by a script that starts learning later (0 in the paper scripts;
        # dau_discrete_research.py's --first-round-steps)
        self.rounds_without_updates = 0

    @property
    def physical_time(self):
        return self.rounds_done * self.round_time

    @property
    def env_steps(self):
        return self.rounds_done * self.args.num_envs * self.args.steps_per_round

    @property
    def updates(self):
        return max(self.rounds_done - self.rounds_without_updates, 0) * self.args.updates_per_round

    def _due(self, done, interval):
        """Whether the (done + 1)-th event of an `interval` is due: the physical time has reached done * interval
        (the events fall at 0, interval, 2 interval, ...; the tolerance absorbs the floats' rounding only)."""
        return self.physical_time >= done * interval - 1e-9 * self.round_time

    def evaluation_due(self):
        """An evaluation every --eval-every physical seconds, from 0."""
        return self._due(self.evaluations, self.args.eval_every)

    def diagnostics_due(self):
        """A diagnostics.csv row every --eval-every / 10 physical seconds."""
        return self._due(self.log_rows, self.args.eval_every / 10)

    def checkpoint_due(self):
        """With --checkpoint-every, a checkpoint every that many physical seconds, from 0."""
        return bool(self.args.checkpoint_every) and self._due(self.checkpoints, self.args.checkpoint_every)

    def restore(self, counters, checkpoint_every):
        """Put back a checkpoint's COUNTERS, saved by a run with this `checkpoint_every`. --checkpoint-every may
        change on --resume: a new interval gets its own count of checkpoints done, so that the next falls on its
        first multiple after now (the old count would make one due every round until it caught up)."""
        for name in self.COUNTERS:
            setattr(self, name, counters[name])
        if self.args.checkpoint_every and self.args.checkpoint_every != checkpoint_every:
            now = self.physical_time + 1e-9 * self.round_time  # the tolerance of _due
            self.checkpoints = math.floor(now / self.args.checkpoint_every) + 1


class Preemption:
    """SIGTERM (Slurm, cloud spot machines and `wandb agent` stop a job with it) asks the training loop to save a
    checkpoint once the round, evaluation or checkpoint in flight is over, and stop; Ctrl-C (SIGINT) stops it at
    once, but for an evaluation in the background, which the run's end waits for (a second Ctrl-C or a SIGTERM
    drops it)."""

    def __init__(self):
        self.signals = 0  # the SIGTERMs received: a wait at the run's end stops at one that comes while it waits
        signal.signal(signal.SIGTERM, self._request)

    @property
    def requested(self):
        return self.signals > 0

    def _request(self, signum, frame):
        self.signals += 1
