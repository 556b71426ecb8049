"""The run's logs as it goes: evals.csv, diagnostics.csv (with the window of sums each row averages), the progress
bar and console lines, and W&B (`start_wandb`, the rows it is sent, `finish_wandb`). run.json is
harness/run_info.py's.

A resumed run computes again what it logged after its checkpoint: the CSV files are cut back to their length at the
checkpoint, and W&B, which cannot take rows back, is sent only the rows after its last of each kind."""

import csv
import math
import os
import sys

import torch
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

PREEMPTED_EXIT_CODE = 75  # under `wandb agent`, a SIGTERMed run exits with this (EX_TEMPFAIL): the sweep requeues it


class Logs:
    """evals.csv, diagnostics.csv and W&B's rows, at the times of the run's `clock`; `diagnostics` names the columns
    of diagnostics.csv, `wandb` is the module of a run with --track (None without). `csv_bytes` (for a resumed run:
    evals.csv's and diagnostics.csv's lengths at its checkpoint) cuts the files back and appends to them;
    `wandb_is_new`: a resumed run's W&B run starts now (the run ran without --track). COUNTERS are what the
    checkpoint keeps: among them eval_seconds, the seconds the evaluations took to play, and eval_wait_seconds, the
    wall seconds training spent on them (harness/evaluations.py: as long at once, less in the background)."""

    COUNTERS = ("window", "window_rounds", "last_eval", "eval_seconds", "eval_wait_seconds")

    def __init__(self, run_dir, clock, diagnostics, wandb, csv_bytes=None, wandb_is_new=False):
        self.clock, self.diagnostics, self.wandb, resumed = clock, diagnostics, wandb, csv_bytes is not None
        self.last_eval, self.eval_seconds, self.eval_wait_seconds = float("nan"), 0.0, 0.0
        self.window, self.window_rounds = torch.zeros(len(diagnostics) - 1, dtype=torch.float64), 0  # sums since a row
        # What W&B holds already: a resumed run computes again what it logged after the checkpoint, and W&B cannot
        # take rows back, so it gets only the evaluations and diagnostics rows after its last of each (its summary
        # keeps the env_steps of the last evaluation and the updates of the last diagnostics row it received).
        # Offline, the summary is not read back ({}): the rows from the checkpoint on are sent (docs/common.md).
        summary = wandb.run.summary if wandb and resumed and not wandb_is_new else {}
        self.wandb_has = {"env_steps": summary.get("env_steps", -1), "updates": summary.get("updates", -1)}
        paths = [os.path.join(run_dir, name) for name in ("evals.csv", "diagnostics.csv")]
        if resumed:  # what was logged after the checkpoint goes: the resumed run logs the same numbers again
            for path, size in zip(paths, csv_bytes, strict=True):
                with open(path, "r+b") as file:
                    file.truncate(size)
            if wandb and (wandb_is_new or not wandb.run.offline):  # what W&B is known to lack of the kept rows
                self._send_kept_rows(paths)
        self.evals_file, self.diagnostics_file = (open(path, "a" if resumed else "w", newline="") for path in paths)
        self.evals_csv, self.diagnostics_csv = csv.writer(self.evals_file), csv.writer(self.diagnostics_file)
        if not resumed:
            self.evals_csv.writerow(["physical_time", "env_steps", "updates", "wall_time", "scaled_return"])
            self.diagnostics_csv.writerow(["physical_time", "env_steps", "updates", *diagnostics])
        columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
                   TextColumn("eval {task.fields[last_eval]:.1f}"), TextColumn("{task.fields[sps]:.0f} SPS"),
                   TimeRemainingColumn()]  # fmt: skip
        self.progress = Progress(*columns, disable=not sys.stdout.isatty())
        self.console = self.progress.console  # the run's lines, printed above the progress bar

    def _send_kept_rows(self, paths):
        """The rows logged before the checkpoint that W&B lacks (all of them for a W&B run that starts now; online,
        those a killed process had not sent), read back from evals.csv and diagnostics.csv (`paths`): W&B's history
        is the whole run's (SPS, not kept in the files, is missing from those rows)."""
        with open(paths[0], newline="") as evals, open(paths[1], newline="") as diagnostics:
            for row in csv.DictReader(evals):
                if int(row["env_steps"]) > self.wandb_has["env_steps"]:
                    self.wandb.log(evaluation_row(float(row["physical_time"]), float(row["scaled_return"]),
                                                  int(row["env_steps"])))  # fmt: skip
            for row in csv.DictReader(diagnostics):
                if int(row["updates"]) > self.wandb_has["updates"]:
                    self.wandb.log({"physical_time": float(row["physical_time"]), "updates": int(row["updates"]),
                                    **{name: float(row[name]) for name in self.diagnostics}})  # fmt: skip

    def csv_bytes(self):
        """evals.csv's and diagnostics.csv's lengths now, for a checkpoint."""
        return self.evals_file.tell(), self.diagnostics_file.tell()

    def start_progress(self):
        """The progress bar, in physical time (shown in a terminal only)."""
        clock = self.clock
        self.task = self.progress.add_task("physical time", total=clock.num_rounds * clock.round_time,
                                           completed=clock.physical_time, last_eval=self.last_eval, sps=0)  # fmt: skip
        self.progress.start()

    def add_round(self, stats, round_stats, sps):
        """A round's statistics into the window: the mean of its updates' `stats` and its own `round_stats`."""
        self.progress.update(self.task, completed=self.clock.physical_time, last_eval=self.last_eval, sps=sps)
        if not len(stats):  # a round without updates (dau_discrete_research.py's --first-round-steps): none to average
            return
        self.window += torch.cat([stats.mean(0), torch.stack(round_stats).cpu()])
        self.window_rounds += 1

    def diagnostics_row(self, sps, wall_time):
        """A row of diagnostics.csv (and W&B): the means over the rounds since the last row; the clock counts it."""
        clock = self.clock
        diagnostics = diagnostics_means(self.diagnostics, self.window, self.window_rounds)
        self.diagnostics_csv.writerow([f"{clock.physical_time:.6f}", clock.env_steps, clock.updates,
                                       *(f"{diagnostics[name]:.6g}" for name in self.diagnostics)])  # fmt: skip
        self.diagnostics_file.flush()
        self.window, self.window_rounds = torch.zeros_like(self.window), 0
        if self.wandb and clock.updates > self.wandb_has["updates"]:
            self.wandb.log({"physical_time": clock.physical_time, **diagnostics, "updates": clock.updates,
                            "charts/SPS": sps, "charts/updates_per_second": clock.updates / wall_time})  # fmt: skip
        clock.log_rows += 1

    def evaluation_row(self, scaled_return, seconds, wall_time, physical_time, env_steps, updates):
        """A row of evals.csv (and W&B, and the console): the mean scaled return of an evaluation begun at
        `physical_time`, `env_steps` and `updates` (harness/evaluations.py), which took `seconds`."""
        self.last_eval = scaled_return
        self.eval_seconds += seconds
        self.evals_csv.writerow([f"{physical_time:.6f}", env_steps, updates, f"{wall_time:.2f}",
                                 f"{scaled_return:.4f}"])  # fmt: skip
        self.evals_file.flush()
        self.console.print(f"physical time {physical_time:8.1f} s   scaled return "
                           f"{scaled_return:9.2f}   wall {wall_time:6.0f} s")  # fmt: skip
        if self.wandb and env_steps > self.wandb_has["env_steps"]:
            self.wandb.log(evaluation_row(physical_time, scaled_return, env_steps))

    def close(self):
        self.evals_file.close()
        self.diagnostics_file.close()


def evaluation_row(physical_time, scaled_return, env_steps):
    """An evaluation's row for W&B. `env_steps` is in no other row: a resumed run's summary["env_steps"] is the
    last evaluation W&B holds (Logs.wandb_has)."""
    return {"physical_time": physical_time, "eval/scaled_return": scaled_return, "env_steps": env_steps}


def diagnostics_means(names, window, window_rounds):
    """A diagnostics row by name: the means of `window`'s sums over `window_rounds` rounds, one for each of `names`
    but the last, and the last, batch/terminal_td_share: the terminal transitions' share of the TD loss,
    losses/td_terminal / losses/td (nan, not a ZeroDivisionError, when the TD loss is exactly 0)."""
    means = dict(zip(names[:-1], (window / window_rounds).tolist(), strict=True))
    td, td_terminal = means["losses/td"], means["losses/td_terminal"]
    return means | {"batch/terminal_td_share": td_terminal / td if td else math.nan}


def start_wandb(args, run_name, wandb_id):
    """Start the run's W&B run (`wandb_id`: go on with a resumed run's), its metrics against physical time; returns
    the wandb module (imported only with --track). A ValueError that says how to log in if W&B refuses."""
    import wandb

    try:
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, group=args.wandb_group, name=run_name,
                   config=vars(args), save_code=True, id=wandb_id, resume="allow" if wandb_id else None)  # fmt: skip
    except wandb.errors.UsageError as error:
        raise ValueError(f"W&B: {error}. Run `wandb login`, or set WANDB_MODE=offline to log locally.") from None
    wandb.define_metric("physical_time")
    wandb.define_metric("*", step_metric="physical_time")  # the paper's x axis
    return wandb


def finish_wandb(wandb, stopped_by=None):
    """End the W&B run. Stopped by SIGTERM under `wandb agent`, it is marked preempting and the process exits with
    PREEMPTED_EXIT_CODE: W&B's contract, by which the sweep requeues it and the next start resumes it by its id."""
    if stopped_by == "SIGTERM" and wandb.run.sweep_id:
        wandb.run.mark_preempting()
        wandb.finish(exit_code=PREEMPTED_EXIT_CODE)
        sys.exit(PREEMPTED_EXIT_CODE)
    wandb.finish()
