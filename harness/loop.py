"""A run from its start (`Run.start`) to its end: what happens between the script's rounds (the evaluations,
checkpoints and diagnostics rows its clock makes due, and SIGTERM's stop), and at the end of the run (model.pt,
run.json, W&B)."""

import json
import os
import sys
import time

import torch

from harness.checkpoint import CHECKPOINT, checkpoint_counters, save_model, write_checkpoint
from harness.clock import Clock
from harness.env_state import env_state
from harness.env_workers import EnvWorkerError, EnvWorkers
from harness.evaluations import Evaluations, in_background
from harness.logs import Logs, finish_wandb
from harness.run_info import NON_FINITE_LOSS, write_run_info
from harness.videos import EvaluationVideos


def run_evaluations(run, evaluate, logs):
    """The run's Evaluations (harness/evaluations.py): in the background or not (in_background), their waits bounded
    once a SIGTERM has come, with the evaluations that a resumed run abandoned before (its run.json's
    abandoned_evaluations, kept as run.json is written again)."""
    abandoned = []
    if run.resumed:
        try:
            with open(os.path.join(run.run_dir, "run.json")) as file:
                abandoned = list(json.load(file).get("abandoned_evaluations", []))
        except (OSError, ValueError, AttributeError):  # not whole: harness/run_info.py's code_history refused it
            pass
    return Evaluations(evaluate, logs, in_background(run.args, run.device), run.preemption, abandoned)


def write_loop_info(loop, **results):
    """run.json for `loop`'s run (harness/run_info.py), with the physical times of the evaluations abandoned after a
    SIGTERM where there are any."""
    run = loop.run
    if loop.evaluations.abandoned:
        results["abandoned_evaluations"] = loop.evaluations.abandoned
    write_run_info(run.run_dir, script=run.script, run_name=run.run_name, dt=run.dt, args=run.args,
                   described=run.described, device=run.device, wandb_id=run.wandb_id, code=run.code,
                   **results)  # fmt: skip


class Loop:
    """The training loop's bookkeeping for `run` (a Run: its arguments, folder, W&B run, evaluation envs and
    SIGTERM's request), with the script's objects as Run.start takes them. The counters are integers (rounds,
    evaluations, log rows, checkpoints done: harness/clock.py), so evaluations and checkpoints fall on exact
    multiples of their intervals."""

    def __init__(self, run, envs, obs, *, state, networks, evaluate, act, diagnostics):
        """Open the logs and, for a resumed run, put back the checkpoint's state (Run.start); `self.obs` are the
        observations to go on from."""
        args, resumed = run.args, run.resumed
        if resumed and (missing := resumed.missing(state)):  # before any file moves
            sys.exit(f"error: --resume {run.run_dir}: its checkpoint has no {', '.join(missing)}: an older version of "
                     "the script made it; resume it with that commit, or start it again")  # fmt: skip
        self.run, self.envs, self.state, self.networks = run, envs, state, networks
        self.act, self.completed, self.final_eval_envs = act, False, None
        self.clock = Clock(args, run.dt)
        self.logs = Logs(run.run_dir, self.clock, diagnostics, run.wandb, resumed.csv_bytes if resumed else None,
                         wandb_is_new=bool(resumed) and run.wandb_id != resumed.wandb_id)  # fmt: skip
        self.evaluations = run_evaluations(run, evaluate, self.logs)
        wall_time = resumed.restore_counters(self.clock, self.logs) if resumed else 0.0
        self.videos = None
        if args.capture_video:  # a separate env, so that the evaluation envs' episodes stay as they are
            self.videos = EvaluationVideos(args.env_id, run.dt, args.time_limit, os.path.join(run.run_dir, "videos"),
                                           args.seed)  # fmt: skip
        write_loop_info(self, completed=False)
        self.start_time = time.time() - wall_time  # a resumed run's wall time goes on from the checkpoint's
        if resumed:  # the state the checkpoint saved, in place of the fresh one just made
            obs = resumed.restore(state=state, envs=envs, obs=obs, eval_envs=run.eval_envs, videos=self.videos)
        if self.videos is not None:  # its schedule counts the run's evaluations (--capture-video new on a resume too)
            self.videos.evaluations = self.clock.evaluations
        self.obs = obs

    def rounds(self):
        """The training loop's rounds, to iterate over: before each, an evaluation and a checkpoint when due;
        after the last, the final evaluation. A SIGTERM ends it with a checkpoint as soon as the round, the
        evaluation (in the background: SIGTERM_WAIT_SECONDS at most, then abandoned) or the checkpoint in flight is
        over (a grace of 30 s before SIGKILL, as Slurm and spot machines give, may not cover a checkpoint and a round
        more)."""
        clock, run_dir, checkpoint_every = self.clock, self.run.run_dir, self.run.args.checkpoint_every
        self.logs.start_progress()
        for _ in range(clock.rounds_done, clock.num_rounds):
            if self._stopped_by_sigterm():
                return
            self.evaluations.log_ended(self.start_time)  # those in the background that ended during the round
            if clock.evaluation_due():
                if self._evaluate():  # not begun after a SIGTERM abandoned the one before: the resumed run begins it
                    clock.evaluations += 1
                if self._stopped_by_sigterm():  # the checkpoint due now is left to the resumed run, which makes it
                    return
            if clock.checkpoint_due():
                self._save_model(os.path.join(run_dir, "checkpoints", f"{clock.physical_time:.1f}s.pt"))
                clock.checkpoints += 1
                self._save_state()
                if self._stopped_by_sigterm(saved=True):
                    return
            yield
        if self._stopped_by_sigterm():  # during the last round: the final evaluation is left to the resumed run
            return
        if checkpoint_every:  # the state before the final evaluation: --resume can extend the run
            self._save_state()
        elif os.path.exists(os.path.join(run_dir, CHECKPOINT)):  # a resumed run's old state: now stale
            os.remove(os.path.join(run_dir, CHECKPOINT))
        if self.logs.window_rounds:  # the rounds since the last diagnostics row (after the state: an extension goes on)
            wall_time = time.time() - self.start_time
            self.logs.diagnostics_row(sps=clock.env_steps / wall_time, wall_time=wall_time)
        if not self._evaluate(final=True):  # abandoned after a SIGTERM: the resumed run makes it again
            return self._stopped_by_sigterm(saved=bool(checkpoint_every))
        if checkpoint_every:
            self._save_model(os.path.join(run_dir, "checkpoints", f"{clock.physical_time:.1f}s.pt"))
        self.completed = True

    def end_round(self, *, stats, round_stats, obs):
        """After a round's updates: `obs` the envs' observations now (for a checkpoint), `stats` the updates'
        statistics (updates x TRAINING_STATS, on the device), `round_stats` the round's own (ROUND_STATS). Stops
        the run on a non-finite loss; advances the clock; writes diagnostics.csv and W&B every --eval-every / 10."""
        self.obs, stats, clock = obs, stats.cpu(), self.clock
        clock.rounds_done += 1
        if not torch.isfinite(stats).all():  # run.json says so: sweeps/run_local.py neither resumes nor reruns it
            first = clock.updates - self.run.args.updates_per_round + int((~torch.isfinite(stats)).any(1).nonzero()[0])
            write_loop_info(self, completed=False, physical_time=clock.physical_time, updates=clock.updates,
                            stopped_by=NON_FINITE_LOSS)  # fmt: skip
            sys.exit(f"error: {NON_FINITE_LOSS} at update {first} (physical time {clock.physical_time:.1f} s)")
        wall_time = time.time() - self.start_time
        sps = clock.env_steps / wall_time
        self.logs.add_round(stats, round_stats, sps)
        if clock.diagnostics_due():
            self.logs.diagnostics_row(sps, wall_time)

    def _stopped_by_sigterm(self, saved=False):
        """Whether a SIGTERM asked the run to stop; if so, the state goes to the checkpoint (unless just saved)."""
        if not self.run.preemption.requested:
            return False
        if not saved:
            self._save_state()
        self.logs.console.print(f"stopped by SIGTERM: checkpoint saved; go on with --resume {self.run.run_dir}",
                                soft_wrap=True)  # fmt: skip
        return True

    def _evaluate(self, final=False):
        """An evaluation begun, and its video when due; the final one awaited, the eval envs' state before it kept.
        False where it, or the one before it, was abandoned after a SIGTERM (Evaluations.begin)."""
        if final and not self.evaluations.log_ended(self.start_time, wait=True):
            return False
        if final:
            self.final_eval_envs = [env_state(env) for env in self.run.eval_envs.envs]
        ended = self.evaluations.begin(self.networks, self.clock, self.start_time, wait=final)
        if self.videos is not None:
            self.videos.record(self.act, f"physical-time-{self.clock.physical_time:.0f}s", final)
        return ended

    def _save_model(self, path, eval_envs_state=None):
        save_model(path, args=self.run.args, optimizer=self.state["optimizer"], networks=self.networks,
                   eval_envs_state=eval_envs_state)  # fmt: skip

    def _save_state(self):
        self.evaluations.log_ended(self.start_time, wait=True)  # the checkpoint holds every evaluation begun
        run, counters = self.run, checkpoint_counters(self.clock, self.logs, time.time() - self.start_time)
        write_checkpoint(run.run_dir, script=run.script, run_name=run.run_name, args=run.args, device=run.device,
                         wandb_id=run.wandb_id, counters=counters, state=self.state, envs=self.envs, obs=self.obs,
                         eval_envs=run.eval_envs, csv_bytes=self.logs.csv_bytes(), videos=self.videos)  # fmt: skip

    def end(self, error_type, error):
        """The end of the run, however it ended: Ctrl-C keeps what was logged; model.pt, run.json, W&B. stopped_by
        "SIGTERM" once its checkpoint is saved. A dead env worker ends it in one line; other errors go on up (False)."""
        self.logs.progress.stop()
        if isinstance(self.envs, EnvWorkers):
            self.envs.close()
        if error_type is KeyboardInterrupt:
            self.logs.console.print("interrupted: keeping what was logged")
        self.evaluations.finish(self.start_time, error_type, self.run.preemption)  # the one in flight, if it ends
        if error_type is EnvWorkerError:
            sys.exit(f"error: {error}")
        self.logs.close()
        if error_type not in (None, KeyboardInterrupt):
            return False
        run, clock, logs = self.run, self.clock, self.logs
        if run.args.save_model:
            self._save_model(os.path.join(run.run_dir, "model.pt"), self.final_eval_envs)
        wall_time, path = time.time() - self.start_time, os.path.join(run.run_dir, CHECKPOINT)
        stopped_by = None if self.completed else "Ctrl-C" if error_type is KeyboardInterrupt else "SIGTERM"
        write_loop_info(self, completed=self.completed, physical_time=clock.physical_time, env_steps=clock.env_steps,
                        updates=clock.updates, wall_time=wall_time, eval_wall_time=logs.eval_seconds,
                        eval_wait_time=logs.eval_wait_seconds, final_scaled_return=logs.last_eval,
                        stopped_by=stopped_by, checkpoint=path if os.path.exists(path) else None)  # fmt: skip
        print(f"{run.run_name}: scaled return {logs.last_eval:.2f} after {clock.physical_time:g} physical s "
              f"({clock.env_steps} env steps, {clock.updates} updates, {wall_time:.1f} s wall, "
              f"{logs.eval_wait_seconds:.1f} s of it on evaluations) -> {run.run_dir}")  # fmt: skip
        if run.wandb:
            finish_wandb(run.wandb, stopped_by)
        return True
