"""The command line every script shares and the checks before any work: `RunArgs` (the flags that run the
experiment), the rules of --resume (`parse_args`), the env's defaults for the flags left unset and the checks of the
arguments, the replay memory and the disk (`settle_args`)."""

import dataclasses
import glob
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass

import gymnasium as gym
import psutil
import torch
import tyro

from dt_wrappers import check_dt, make_env
from harness.checkpoint import CHECKPOINT, load_checkpoint
from harness.clock import whole_rounds
from harness.settings import env_settings

# Arguments a resumed run may change: none of them changes what the run computes (a larger --total-time only adds
# rounds).
RESUME_MAY_CHANGE = ("resume", "total_time", "track", "save_model", "capture_video", "checkpoint_every", "env_workers",
                     "eval_in_background", "print_args")  # fmt: skip
# What an env with the other kind of actions is told to use (the scripts for its actions, each with its baseline).
SCRIPTS_FOR_ACTIONS = {gym.spaces.Box: ("continuous", "dau_continuous.py or ddpg_baseline.py"),
                       gym.spaces.Discrete: ("discrete", "dau_discrete.py or dqn_baseline.py")}  # fmt: skip


@dataclass
class RunArgs:
    """The flags every script has that run the experiment rather than define it."""

    seed: int = 1
    """seed of the experiment (torch, numpy, random, environments)"""
    cpu: bool = False
    """run on the CPU even when a GPU is available"""
    track: bool = False
    """log the run to Weights & Biases"""
    wandb_project_name: str = "dau"
    """the W&B project"""
    wandb_entity: str | None = None
    """the W&B entity (team or user); None: your default"""
    wandb_group: str | None = None
    """the W&B group, e.g. one sweep"""
    save_model: bool = False
    """save the networks, the normaliser and the args to runs/<run_name>/model.pt"""
    eval_model: str | None = None
    """evaluate a model.pt saved by --save-model (at its env and dt) instead of training"""
    capture_video: bool = False
    """record one evaluation episode at evaluations 0, 1, 4, 16, ... and at the end to runs/<run_name>/videos/"""
    checkpoint_every: float | None = None
    """every this many physical seconds (and at the end), save the model to runs/<run_name>/checkpoints/<time>s.pt;
    and the whole training state to runs/<run_name>/checkpoint.pt (the latest only, for --resume)"""
    resume: str | None = None
    """continue runs/<run_name> from its checkpoint.pt, in its folder and with its own arguments;
    a larger --total-time extends it"""
    env_workers: int = 1
    """processes stepping the training envs, each its share (the same numbers at any count); 1: this process"""
    eval_in_background: bool | None = None
    """evaluate a copy of the policy in a thread while training goes on (the same evals.csv);
    None: on a GPU run, off on the CPU (where it saved nothing measurable: docs/common.md)"""
    print_args: bool = False
    """print the run's resolved arguments, identity and label as JSON (one line) and exit before any work;
    the sweep runner learns its grid points' so"""


def parse_args(args_class, description, script):
    """The command line, and with --resume the run's checkpoint: every argument defaults to the run's own, and
    one given that would change what the run computes is refused. Under `wandb agent`, a run the sweep requeued
    after a preemption (the same W&B run id) resumes from its checkpoint. Returns (args, Resumed or None)."""
    args = tyro.cli(args_class, description=description)
    if args.resume is None and args.track:
        args.resume = requeued_run_dir()
    if args.resume is None:
        return args, None
    try:
        resumed = load_checkpoint(args.resume, script)
        original = args_class(**resumed.args)
    except (ValueError, TypeError) as error:
        sys.exit(f"error: {error}")
    args = tyro.cli(args_class, description=description, default=dataclasses.replace(original, resume=args.resume))
    for field in dataclasses.fields(args_class):
        name, given, was = field.name, getattr(args, field.name), getattr(original, field.name)
        if name not in RESUME_MAY_CHANGE and given != was:
            flag = "--" + name.replace("_", "-")
            sys.exit(f"error: --resume continues {args.resume} with its own arguments: {flag} {given} would change "
                     f"what it computes (it ran with {was}). Leave it out, or start a new run")  # fmt: skip
    if args.total_time < original.total_time:
        sys.exit(f"error: --total-time {args.total_time:g} is shorter than the run's {original.total_time:g} s: a "
                 "resumed run goes on to its own --total-time or to a larger one")  # fmt: skip
    return args, resumed


def requeued_run_dir(runs="runs"):
    """The folder of the run that `wandb agent` is starting again: W&B's contract for preemptible sweeps sets
    WANDB_RUN_ID to the preempted run's id, and that run's run.json names it, with a checkpoint beside it (runs/
    on storage the agents share). None when not under an agent, or for a run never started."""
    run_id = os.environ.get("WANDB_RUN_ID")
    if not (os.environ.get("WANDB_SWEEP_ID") and run_id):
        return None
    for path in sorted(glob.glob(os.path.join(runs, "*", "run.json"))):
        with open(path) as file:
            info = json.load(file)
        run_dir = os.path.dirname(path)
        if info.get("wandb_id") == run_id and not info.get("completed") and os.path.isfile(f"{run_dir}/{CHECKPOINT}"):
            return run_dir
    return None


def settle_args(args, model, action_space, check_args, device):
    """The arguments made whole and checked, before any work: with --eval-model, the saved `model`'s env, dt and
    network size; the env's defaults (harness/settings.py) for the flags left unset; the checks every script
    shares, then the script's own (`check_args(args)`, which returns the floats its replay rows hold beyond (s, a, r,
    d, s'), if any); the replay memory and the disk a training run needs. An env
    whose actions are not an `action_space` is told which scripts are for it. Returns the probe env (made as the
    run's envs are, to read their spaces) and dt; a ValueError (or Gymnasium's error) says what is wrong."""
    if model is not None:  # evaluate a saved model in the env and at the dt it was trained with
        for name in ("env_id", "dt", "time_limit", "hidden_size"):
            setattr(args, name, model["args"][name])
    probe = make_env(args.env_id, dt=args.dt, time_limit=args.time_limit)
    if not isinstance(probe.action_space, action_space):
        kind, scripts = SCRIPTS_FOR_ACTIONS[type(probe.action_space)]
        raise ValueError(f"{args.env_id} has {kind} actions: use {scripts}")
    dt = probe.get_wrapper_attr("dt")
    if probe.get_wrapper_attr("max_steps") is None:  # evaluation runs whole episodes
        raise ValueError(f"{args.env_id} has no episode time limit: pass --time-limit (seconds)")
    for name, setting in env_settings(probe).items():  # the env's defaults for what was left unset
        if hasattr(args, name) and getattr(args, name) is None:
            setattr(args, name, setting)
    check_run_args(args, dt)
    extra_row_floats = check_args(args) or 0
    if not args.eval_model:  # --eval-model allocates no replay memory and writes no checkpoint
        space = probe.action_space
        action_floats = space.shape[0] if isinstance(space, gym.spaces.Box) else 1
        row_floats = 2 * probe.observation_space.shape[0] + action_floats + 2 + extra_row_floats  # (s, a, r, d, s')
        check_memory(args, dt, row_floats, device)
    return probe, dt


def default_args(args_class, args, probe, dt):
    """The arguments the script (`args_class`) has by default at the run's env, dt and round (`probe`, its env; `dt`,
    its step): what a run's label leaves out (harness.run_info.describe_run). --round-seconds sets the round's steps
    and updates as it does for the run, and is itself at the script's default, so that a label names it. A baseline's
    variant (--scaled, named in its label) is the run's: its defaults differ (ddpg_baseline.py's actor rate)."""
    variant = {"scaled": args.scaled} if hasattr(args, "scaled") else {}
    defaults = args_class(env_id=args.env_id, dt=args.dt, round_seconds=args.round_seconds, **variant)
    for name, setting in env_settings(probe).items():
        if hasattr(defaults, name) and getattr(defaults, name) is None:
            setattr(defaults, name, setting)
    set_round_seconds(defaults, dt)
    defaults.round_seconds = args_class().round_seconds
    return vars(defaults)


def require_positive(args, *names):
    """Raise a ValueError naming the flag if one of `names` is not a positive finite number."""
    for name in names:
        if not 0 < getattr(args, name) < math.inf:
            raise ValueError(f"--{name.replace('_', '-')} must be positive and finite, got {getattr(args, name)}")


def check_run_args(args, dt):
    """The checks every script shares (each script adds its own flags'); sets the round from --round-seconds."""
    check_dt(dt)
    for name in ("num_envs", "num_eval_envs", "steps_per_round", "updates_per_round", "batch_size", "env_workers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.env_workers > args.num_envs:
        raise ValueError(f"--env-workers {args.env_workers} is more than the {args.num_envs} envs to share out")
    set_round_seconds(args, dt)
    round_time = args.num_envs * args.steps_per_round * dt
    if not args.total_time >= round_time:
        raise ValueError(f"--total-time {args.total_time} s is shorter than one round ({round_time:g} s)")
    if not 0 < args.buffer_time < math.inf:
        raise ValueError(f"--buffer-time must be positive and finite, got {args.buffer_time}")
    if args.buffer_time < args.num_envs * dt * (1 - 1e-9):
        raise ValueError(f"--buffer-time {args.buffer_time:g} s is less than one step of all {args.num_envs} envs "
                         f"({args.num_envs * dt:g} s at dt {dt:g}): a step's transitions would not all be kept. "
                         "Raise --buffer-time")  # fmt: skip
    if round(args.buffer_time / dt) < args.batch_size:
        raise ValueError(f"--buffer-time {args.buffer_time:g} s holds {round(args.buffer_time / dt)} transitions at "
                         f"dt {dt:g}, fewer than --batch-size ({args.batch_size})")  # fmt: skip
    if not 0 < args.gamma <= 1:
        raise ValueError(f"--gamma must be in (0, 1], got {args.gamma}")
    require_positive(args, "eval_every", "hidden_size", "learning_rate", "ou_kappa", "ou_sigma")
    if args.checkpoint_every is not None:
        require_positive(args, "checkpoint_every")


def set_round_seconds(args, dt):
    """--round-seconds: rounds of the same physical length at every dt. The paper's round is nb_steps = 10 steps
    in each env whatever dt, 10 dt physical seconds, so the networks change every 0.1 s of each env's experience at
    dt 0.01 and every 0.005 s at dt 0.0005. With --round-seconds T each env steps round(T / dt) times per round,
    and the round has updates_per_round / steps_per_round gradient steps per env step, so that the updates per
    physical second (and per transition) stay the paper's. Sets args.steps_per_round and args.updates_per_round;
    leaves them as they are without the flag."""
    if args.round_seconds is None or args.steps_per_round < 1:  # (check_run_args refuses steps_per_round < 1)
        return
    if not 0 < args.round_seconds < math.inf:
        raise ValueError(f"--round-seconds must be positive and finite, got {args.round_seconds}")
    steps = round(args.round_seconds / dt)
    if steps < 1:
        raise ValueError(f"--round-seconds {args.round_seconds:g} is shorter than one step (dt {dt:g} s)")
    args.updates_per_round = max(1, round(args.updates_per_round * steps / args.steps_per_round))
    args.steps_per_round = steps


def buffer_rows(args, dt):
    """Replay capacity in transitions: --buffer-time physical seconds at this dt (the paper's Discussion: a
    buffer of a fixed number of transitions covers less physical time as dt shrinks), or where a script has
    --buffer-transitions and it is set (dau_discrete_research.py), that ring's N; never more than the run collects."""
    if getattr(args, "buffer_transitions", None) is not None:
        return min(args.buffer_transitions, collected_rows(args, dt))
    return min(round(args.buffer_time / dt), collected_rows(args, dt))


def buffer_flag(args, dt):
    """The flag that sets the replay memory's size, as an error names it: --buffer-transitions or --buffer-time."""
    if getattr(args, "buffer_transitions", None) is not None:
        return "--buffer-transitions", f"--buffer-transitions {args.buffer_transitions}"
    return "--buffer-time", f"--buffer-time {args.buffer_time:g} s at dt {dt:g}"


def collected_rows(args, dt):
    """Transitions the run collects: every env's steps over its whole rounds."""
    return whole_rounds(args, dt) * args.num_envs * args.steps_per_round


def check_memory(args, dt, row_floats, device):
    """Refuse a replay memory (`row_floats` float32 per transition) that does not fit, before any work: the
    buffer and, while a checkpoint is written, a copy of its rows, both in host memory on the CPU; on a GPU the
    buffer in its memory (2 GiB left to CUDA itself) and the copy in host memory. With --checkpoint-every, also
    the disk the checkpoints go to."""
    rows, available = buffer_rows(args, dt), psutil.virtual_memory().available
    needed, copies, where = rows * 4 * row_floats, 2, ""
    if device.type == "cuda":
        gpu_available = max(0, torch.cuda.mem_get_info(device)[0] - 2**31)
        copies, where = 1, "on the GPU (2 GiB kept for CUDA) " if gpu_available < available else "in host memory "
        available = min(available, gpu_available)
    flag, setting = buffer_flag(args, dt)
    if copies * needed > available:
        raise ValueError(f"the replay buffer needs {needed / 1e9:.1f} GB for {rows} transitions, and as much "
                         f"again in host memory to write a checkpoint of it ({setting}), but {where}"
                         f"{available / 1e9:.1f} GB are available: lower {flag} (or --total-time)")  # fmt: skip
    if args.checkpoint_every is not None:  # a checkpoint holds the replay memory's filled rows
        check_disk(args.resume or "runs", needed + 2**24, flag)


def check_disk(folder, checkpoint_bytes, flag="--buffer-time"):
    """Refuse a run whose checkpoint cannot be written: a new one is written beside the last, then replaces it
    (`flag`: the flag that sets the replay memory's size, buffer_flag)."""
    while not os.path.isdir(folder):  # runs/ may not exist yet: the disk it will be on
        folder = os.path.dirname(os.path.abspath(folder))
    existing = os.path.join(folder, CHECKPOINT)
    free = shutil.disk_usage(folder).free + (os.path.getsize(existing) if os.path.isfile(existing) else 0)
    if 2 * checkpoint_bytes > free:
        raise ValueError(f"a checkpoint of this run takes up to {checkpoint_bytes / 1e9:.2f} GB and is written beside "
                         f"the last one ({2 * checkpoint_bytes / 1e9:.2f} GB), but {free / 1e9:.2f} GB are free "
                         f"on the disk of {os.path.abspath(folder)}: lower {flag} (or --total-time), or run "
                         "without --checkpoint-every")  # fmt: skip
