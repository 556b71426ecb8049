"""The run harness: what the four scripts do the same way and is not the algorithm.

The scripts keep the algorithm whole (networks, update, exploration, replay memory and the training loop);
`dt_wrappers.py` keeps the time-step layer (an env at any dt). This module runs the rest:

- the command line (`RunArgs`, the flags every script has) and the rules of `--resume`;
- the checks every script shares, before any work, and the per-env defaults of the flags left unset;
- seeding and determinism, the run folder and its lock, W&B, `evals.csv`, `diagnostics.csv`, `run.json`,
  the progress bar, SIGTERM and Ctrl-C;
- the checkpoint: the script's objects through their `state_dict`s, plus the envs, the random generators,
  the counters and the logs' lengths; `--eval-model`; the evaluation videos;
- the training envs, in the run's process or split over worker processes (`make_vector_env`; the workers,
  `--env-workers`, are `env_workers.py`);
- on a GPU, a round of updates replayed as one CUDA graph (`graphed`).

A script uses it in this order: `run = Run(Args, ...)` (parse, check, seed, make the evaluation envs),
`run.evaluate_saved_model(...)` (`--eval-model` only), `run.start(...)` (open the logs, or restore a
checkpoint), then `with run: for _ in run.rounds(): ...; run.end_round(...)`.
"""

import csv
import dataclasses
import fcntl
import glob
import hashlib
import importlib.metadata
import itertools
import json
import math
import os
import platform
import random
import shutil
import signal
import sys
import time
from dataclasses import dataclass

import gymnasium as gym
import mujoco
import numpy as np
import psutil
import torch
import tyro
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from dt_wrappers import (
    MujocoEnv,
    PhysicalTimeVideo,
    check_dt,
    env_settings,
    env_state,
    make_env,
    restore_envs,
    set_env_state,
    settings_help,
)  # fmt: skip
from env_workers import EnvWorkerError, EnvWorkers  # --env-workers: the training envs in worker processes

CHECKPOINT = "checkpoint.pt"  # runs/<run_name>/checkpoint.pt: the run's latest whole training state, one per run
# Arguments a resumed run may change: none of them changes what the run computes (a larger --total-time only adds
# rounds).
RESUME_MAY_CHANGE = ("resume", "total_time", "track", "save_model", "capture_video", "checkpoint_every", "env_workers")
# The loop's bookkeeping, as a checkpoint keeps it: rounds, evaluations, diagnostics rows and checkpoints done, the
# diagnostics' sums since the last row, the last evaluation and the seconds spent evaluating.
COUNTERS = ("rounds_done", "evaluations", "log_rows", "checkpoints", "window", "window_rounds", "last_eval",
            "eval_seconds")  # fmt: skip
# What an env with the other kind of actions is told to use (the scripts for its actions, each with its baseline).
SCRIPTS_FOR_ACTIONS = {gym.spaces.Box: ("continuous", "dau_continuous.py or ddpg_baseline.py"),
                       gym.spaces.Discrete: ("discrete", "dau_discrete.py or dqn_baseline.py")}  # fmt: skip
PREEMPTED_EXIT_CODE = 75  # under `wandb agent`, a SIGTERMed run exits with this (EX_TEMPFAIL): the sweep requeues it
NON_FINITE_LOSS = "non-finite loss"  # run.json's stopped_by for a run that diverged: run again, it diverges again
# Arguments that change nothing a run computes: a run's identity (run_identity) leaves them out.
NOT_COMPUTED = ("exp_name", "cpu", "track", "wandb_project_name", "wandb_entity", "wandb_group", "save_model",
                "eval_model", "capture_video", "checkpoint_every", "resume", "env_workers")  # fmt: skip
# What the code computed before an argument existed, as that argument's value: a run.json written before it has no
# such key, and reads as this (the commit that added the argument, which kept the numbers of the code before it).
VALUE_BEFORE = {"round_seconds": None,  # 5a765e3: --round-seconds, off by default
                "value_update": "all",  # 5c015d2: V learns from every transition, as in Alg. 1
                "value_learning_rate": None}  # 6dc78e5: one step size for V and A, as in Alg. 1  # fmt: skip
# Scripts that compute what another script computes with the same arguments (its options off: a test checks it).
SAME_COMPUTATION = {"dau_discrete_beyond_paper.py": "dau_discrete.py"}


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
    """every this many physical seconds, save the whole training state to runs/<run_name>/checkpoint.pt (the
    latest only, for --resume; also at the end) and the model to runs/<run_name>/checkpoints/<time>s.pt"""
    resume: str | None = None
    """continue runs/<run_name> from its checkpoint.pt, in its folder and with its own arguments; a larger
    --total-time extends it"""
    env_workers: int = 1
    """processes stepping the training envs, each its share (the same numbers at any count); 1: this process"""


# --- The command line and the checks before any work ---


def parse_args(args_class, description, script):
    """The command line, and with --resume the run's checkpoint: every argument defaults to the run's own, and
    one given that would change what the run computes is refused. Under `wandb agent`, a run the sweep requeued
    after a preemption (the same W&B run id) resumes from its checkpoint. Returns (args, checkpoint or None)."""
    args = tyro.cli(args_class, description=description)
    if args.resume is None and args.track:
        args.resume = requeued_run_dir()
    if args.resume is None:
        return args, None
    try:
        checkpoint = load_checkpoint(args.resume, script)
        original = args_class(**checkpoint["args"])
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
    return args, checkpoint


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
    buffer of a fixed number of transitions covers less physical time as dt shrinks), and never more than
    the run collects."""
    num_rounds = int(args.total_time / (args.num_envs * args.steps_per_round * dt) + 1e-9)
    return min(round(args.buffer_time / dt), num_rounds * args.num_envs * args.steps_per_round)


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
    if copies * needed > available:
        raise ValueError(f"the replay buffer needs {needed / 1e9:.1f} GB for {rows} transitions, and as much "
                         f"again in host memory to write a checkpoint of it (--buffer-time {args.buffer_time:g} s "
                         f"at dt {dt:g}), but {where}{available / 1e9:.1f} GB are available: lower --buffer-time "
                         "(or --total-time)")  # fmt: skip
    if args.checkpoint_every is not None:  # a checkpoint holds the replay memory's filled rows
        check_disk(args.resume or "runs", needed + 2**24)


def check_disk(folder, checkpoint_bytes):
    """Refuse a run whose checkpoint cannot be written: a new one is written beside the last, then replaces it."""
    while not os.path.isdir(folder):  # runs/ may not exist yet: the disk it will be on
        folder = os.path.dirname(os.path.abspath(folder))
    existing = os.path.join(folder, CHECKPOINT)
    free = shutil.disk_usage(folder).free + (os.path.getsize(existing) if os.path.isfile(existing) else 0)
    if 2 * checkpoint_bytes > free:
        raise ValueError(f"a checkpoint of this run takes up to {checkpoint_bytes / 1e9:.2f} GB and is written beside "
                         f"the last one ({2 * checkpoint_bytes / 1e9:.2f} GB), but {free / 1e9:.2f} GB are free "
                         f"on the disk of {os.path.abspath(folder)}: lower --buffer-time (or --total-time), or run "
                         "without --checkpoint-every")  # fmt: skip


def make_vector_env(args, dt, num_envs, seed, workers=1):
    """`num_envs` envs at this dt, seeded seed, seed + 1, ...; at an episode's end the reset observation comes at
    once and the true last one in infos["final_obs"] (SAME_STEP autoreset). In this process, or with workers > 1
    split over that many worker processes (EnvWorkers), which compute the same steps."""
    if workers > 1:
        return EnvWorkers(args.env_id, dt, args.time_limit, num_envs, seed, workers)
    thunks = [lambda i=i: make_env(args.env_id, dt, args.time_limit, seed + i) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def env_states(envs):
    """Each training env's state (env_state), from this process or from the workers."""
    return envs.env_states() if isinstance(envs, EnvWorkers) else [env_state(env) for env in envs.envs]


def restore_env_states(envs, states, obs):
    """Put each training env back as env_states saw it; returns the observations to go on from (a new episode's
    first where a simulator cannot be restored, as dt_wrappers.restore_envs does)."""
    return envs.restore(states, obs) if isinstance(envs, EnvWorkers) else restore_envs(envs, states, obs)


# --- Files: atomic writes, checkpoints, the run folder ---


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
    replace_atomically(path, "wb", lambda file: torch.save(state, file))


def save_json(data, path):
    """json.dump, atomically (run.json, which sweeps/ reads while runs go on and after they stop)."""
    replace_atomically(path, "w", lambda file: json.dump(data, file, indent=1))


def run_identity(script, args):
    """A run's grid point: a hash of its script and of the arguments that change what it computes (run.json's
    "identity"). Two runs with one identity compute the same numbers, whatever their folders, names and W&B
    settings; a run.json older than an argument reads as VALUE_BEFORE says."""

    def canonical(value):  # 1800 and 1800.0, or 0.1 and 0.1 + 1e-17, are the same argument
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(f"{value:.12g}")
        return value

    computed = {key: canonical(value) for key, value in (VALUE_BEFORE | args).items() if key not in NOT_COMPUTED}
    text = json.dumps({"script": SAME_COMPUTATION.get(script, script), "args": computed}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_checkpoint(run_dir, script):
    """The checkpoint of runs/<run_name> for `script`, loaded as data only (weights_only: it runs no code);
    a ValueError that says what is wrong if it is missing, unreadable or another script's."""
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(path):
        reason = "no such folder" if not os.path.isdir(run_dir) else f"no {CHECKPOINT} in it"
        raise ValueError(f"--resume {run_dir}: {reason}. A run keeps one when it is stopped by SIGTERM or run with "
                         "--checkpoint-every; start it again without --resume")  # fmt: skip
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a truncated or corrupt file: zip, pickle or EOF errors
        raise ValueError(f"--resume {run_dir}: {path} is not a readable checkpoint ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else 'no detail'})") from None  # fmt: skip
    if not isinstance(checkpoint, dict) or checkpoint.get("script") != script:
        made_by = checkpoint.get("script") if isinstance(checkpoint, dict) else None
        raise ValueError(f"--resume {run_dir}: its checkpoint was made by {made_by}, not {script}")
    if "state" not in checkpoint:
        raise ValueError(f"--resume {run_dir}: its checkpoint was written by the scripts before run_harness.py, in "
                         "another format: resume it with the commit that made it, or start it again")  # fmt: skip
    return checkpoint


def load_model(path):
    """A model.pt (or checkpoints/<time>s.pt) saved by --save-model, loaded as data only; a ValueError that names
    the file if it is missing, unreadable or not such a model (its networks are checked by evaluate_saved_model)."""
    if not os.path.isfile(path):
        raise ValueError(f"--eval-model {path}: no such file")
    try:
        model = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # not a torch file, a truncated or corrupt one: zip, pickle or EOF errors
        raise ValueError(f"--eval-model {path}: is not a readable model file ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else 'no detail'})") from None  # fmt: skip
    settings = ("env_id", "dt", "time_limit", "hidden_size")
    if not isinstance(model, dict) or not isinstance(model.get("args"), dict):
        raise ValueError(f"--eval-model {path}: is not a model saved by --save-model (it has no args)")
    if missing := [name for name in settings if name not in model["args"]]:
        raise ValueError(f"--eval-model {path}: is not a model saved by --save-model (its args have no "
                         f"{', '.join(missing)})")  # fmt: skip
    return model


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
    """Hold runs/<run_name> for this process while it lives (an OS lock, released however the process ends): a
    second process for the same folder, such as a --resume of a run still going, gets a ValueError."""
    lock = open(os.path.join(run_dir, "running.lock"), "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        raise ValueError(f"{run_dir} is in use by another process (pid {lock.read().strip() or '?'}): wait for it to "
                         "stop, or stop it (SIGTERM saves a checkpoint)") from None  # fmt: skip
    except OSError:  # a file system without locks: nothing to hold
        return lock
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


# --- What a run ran on, and its random generators ---


def library_versions():
    """Python's and the libraries' versions a run's numbers depend on (run.json), None for one not installed."""
    # torch's own version names its build (2.13.0+cpu, 2.11.0+cu130), which a GPU image's pip metadata may not.
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("numpy", "gymnasium", "mujoco", "box2d"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine_info(device):
    """What a run ran on, beside library_versions (run.json): the CPU's model, the cores this process may use,
    torch's threads, MKL's pinned code path (MKL_CBWR, None: MKL's own choice) and the device. The same seed gives
    the same numbers only with the same thread count, and on another machine only with a CPU that takes the same
    code path (docs/common.md, "Reproducibility and speed")."""
    cpu = None
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as file:
            cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return {"cpu": cpu or platform.processor() or platform.machine(), "cores": cores,
            "torch_threads": torch.get_num_threads(), "mkl_cbwr": os.environ.get("MKL_CBWR"),
            "device": device_name}  # fmt: skip


def random_state(device):
    """Python's, NumPy's and torch's global generators, and CUDA's on a GPU run (only there: reading it would
    start CUDA in a --cpu run on a GPU machine)."""
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_random_state(state):
    """Put back what random_state saved."""
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    key = np.array(numpy_state["state"]["key"], dtype=np.uint32)
    np.random.set_state({**numpy_state, "state": {**numpy_state["state"], "key": key}})
    torch.set_rng_state(state["torch"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


# --- The GPU path ---


def graphed(train_round, device):
    """`train_round` as one CUDA graph on a GPU (unchanged on the CPU): small networks at batch 256 are bound by
    the launches of a round's ten thousand or so kernels, not by their arithmetic, and a graph launches them all at
    once. The first round runs op by op on a side stream, which is also the warm-up that capture needs (the
    optimizer's lazy state, cuBLAS's workspaces); the graph is then recorded, which runs nothing, and every later
    round replays it: the same kernels on the same numbers (PyTorch's whole-network capture)."""
    if device.type != "cuda":
        return train_round
    graph, static = torch.cuda.CUDAGraph(), {}

    def replay(batches):
        if not static:
            side_stream = torch.cuda.Stream()
            side_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side_stream):
                stats = train_round(batches)
            torch.cuda.current_stream().wait_stream(side_stream)
            static["batches"] = [field.clone() for field in batches]  # the graph reads its batches from here
            with torch.cuda.graph(graph):
                static["stats"] = train_round(static["batches"])
            return stats
        for static_field, field in zip(static["batches"], batches, strict=True):
            static_field.copy_(field)
        graph.replay()
        return static["stats"]

    return replay


# --- Evaluation videos ---

VIDEO_EVALUATIONS = {0} | {4**k for k in range(32)}


class EvaluationVideos:
    """--capture-video: one episode of the deterministic policy, recorded at evaluations 0, 1, 4, 16, 64...
    and at the end, into `folder` (`fps` frames per physical second)."""

    def __init__(self, env_id, dt, time_limit, folder, seed=None, fps=30):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (classic control, Box2D) renders off screen
        env = make_env(env_id, dt, time_limit, seed, render_mode="rgb_array")
        base = env.unwrapped
        if isinstance(base, MujocoEnv):  # the model's tracking camera: the free one loses a runner in seconds
            track = mujoco.mj_name2id(base.model, mujoco.mjtObj.mjOBJ_CAMERA, "track")
            if track >= 0:
                base.mujoco_renderer.camera_id = track
        self.env = PhysicalTimeVideo(env, folder, episode_trigger=lambda episode: True, fps=fps)
        self.evaluations = 0

    def record(self, policy, name, final=False):
        """Record one episode of `policy` (observation -> env action) to <name>-episode-<n>.mp4 if this
        evaluation (counted from 0) is due a video; the first and the final one always are."""
        index, self.evaluations = self.evaluations, self.evaluations + 1
        if not (final or index in VIDEO_EVALUATIONS):
            return
        self.env.name_prefix = name
        observation, _ = self.env.reset()
        terminated = truncated = False
        while not (terminated or truncated):
            observation, _, terminated, truncated, _ = self.env.step(policy(observation))
        self.env.stop_recording()  # write the file now, not at the next reset


# --- The run ---


class Run:
    """One run of a script: its arguments, device, evaluation envs, logs, checkpoints and counters. The training
    loop stays in the script; the counters are integers (rounds, evaluations, log rows, checkpoints done), so
    evaluations and checkpoints fall on exact multiples of their intervals."""

    def __init__(self, args_class, *, description, script_file, action_space, check_args):
        """Parse and check the arguments (`args_class`, the script's Args; `check_args(args)`, its checks of its own
        flags), refusing bad input before any work (an env whose actions are not an `action_space` among it: the
        harness names the scripts for its actions); make the run folder and start W&B; seed every generator; make
        the evaluation envs (`self.eval_envs`) and a probe env (`self.probe`)."""
        self.script = os.path.basename(script_file)
        args, self.resumed = parse_args(args_class, description + "\n" + settings_help(), self.script)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (read when CUDA starts)
        self.args, self.device = args, torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
        if self.resumed and self.resumed["device"] != self.device.type:
            sys.exit(f"error: {args.resume} ran on {self.resumed['device']} and would continue on {self.device.type} "
                     "with other numbers: resume it where it ran (CUDA_VISIBLE_DEVICES= hides a GPU)")  # fmt: skip
        try:
            if args.eval_model:  # evaluate a saved model in the env and at the dt it was trained with
                self.model = load_model(args.eval_model)
                for name in ("env_id", "dt", "time_limit", "hidden_size"):
                    setattr(args, name, self.model["args"][name])
            self.probe = make_env(args.env_id, dt=args.dt, time_limit=args.time_limit)
            if not isinstance(self.probe.action_space, action_space):
                kind, scripts = SCRIPTS_FOR_ACTIONS[type(self.probe.action_space)]
                raise ValueError(f"{args.env_id} has {kind} actions: use {scripts}")
            self.dt = self.probe.get_wrapper_attr("dt")
            if self.probe.get_wrapper_attr("max_steps") is None:  # evaluation runs whole episodes
                raise ValueError(f"{args.env_id} has no episode time limit: pass --time-limit (seconds)")
            for name, setting in env_settings(self.probe).items():  # the env's defaults for what was left unset
                if hasattr(args, name) and getattr(args, name) is None:
                    setattr(args, name, setting)
            check_run_args(args, self.dt)
            check_args(args)
            if not args.eval_model:  # --eval-model allocates no replay memory and writes no checkpoint
                space = self.probe.action_space
                action_floats = space.shape[0] if isinstance(space, gym.spaces.Box) else 1
                row_floats = 2 * self.probe.observation_space.shape[0] + action_floats + 2  # (s, a, r, d, s')
                check_memory(args, self.dt, row_floats, self.device)
        except (ValueError, gym.error.Error) as error:
            sys.exit(f"error: {error}")
        # From here on SIGTERM stops the run at its next whole state, with a checkpoint (--eval-model: at once). Set
        # before the run folder is made: a SIGTERM that came between the two left a folder holding only running.lock.
        self.preemption = None if args.eval_model else Preemption()
        self.run_name = f"{args.env_id}__{args.exp_name}__dt{self.dt:g}__{args.seed}__{int(time.time())}"
        self.wandb_id = None  # W&B's id of the run: a resumed run goes on as the same W&B run
        if self.resumed:
            self.run_name, self.wandb_id = self.resumed["run_name"], self.resumed["wandb_id"]
        elif not args.eval_model:  # runs/<run_name>, made now: a run started in the same second gets a name of its own
            self.run_name = new_run_dir(self.run_name)
        self.run_dir = args.resume or os.path.join("runs", self.run_name)
        if not args.eval_model:
            try:
                self.run_lock = claim_run_dir(self.run_dir)  # held until the process ends: no second writer
            except ValueError as error:
                sys.exit(f"error: {error}")
        if args.track:
            self._start_wandb()
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)
        torch.use_deterministic_algorithms(True)  # same seed, same numbers, on a GPU too (with cuBLAS's setting)
        # Deterministic mode also fills each new tensor with NaN, a guard against reading unwritten memory: on the
        # CPU it stays (the tests run there); on a GPU it would add a kernel to most ops an update or a step launches.
        torch.utils.deterministic.fill_uninitialized_memory = self.device.type == "cpu"
        self.eval_envs = make_vector_env(args, self.dt, args.num_eval_envs, args.seed + args.num_envs)
        self.replay_rows = buffer_rows(args, self.dt)

    def _start_wandb(self):
        import wandb

        self.wandb = wandb
        try:
            wandb.init(project=self.args.wandb_project_name, entity=self.args.wandb_entity,
                       group=self.args.wandb_group, name=self.run_name, config=vars(self.args), save_code=True,
                       id=self.wandb_id, resume="allow" if self.wandb_id else None)  # fmt: skip
        except wandb.errors.UsageError as error:
            if not self.resumed and not self.args.eval_model:  # no run: its folder goes (and runs/, if left empty)
                self.run_lock.close()
                os.remove(os.path.join(self.run_dir, "running.lock"))
                os.removedirs(self.run_dir)
            sys.exit(f"error: W&B: {error}. Run `wandb login`, or set WANDB_MODE=offline to log locally.")
        wandb.define_metric("physical_time")
        wandb.define_metric("*", step_metric="physical_time")  # the paper's x axis
        self.wandb_id = wandb.run.id

    def evaluate_saved_model(self, networks, *, evaluate, act):
        """--eval-model: load the networks (a dict of modules, as saved), evaluate them with `evaluate()` (the
        mean scaled return over the evaluation envs), record a video with `act` (observation -> env action) if
        asked, and exit the process. Without --eval-model, nothing."""
        if not self.args.eval_model:
            return
        if missing := [name for name in networks if name not in self.model]:
            sys.exit(f"error: --eval-model {self.args.eval_model}: has no {', '.join(missing)}: a model of another "
                     f"script? (this is {self.script})")  # fmt: skip
        for name, network in networks.items():
            try:
                network.load_state_dict(self.model[name])
            except (RuntimeError, TypeError, AttributeError) as error:  # other shapes, or not a state dict
                sys.exit(f"error: --eval-model {self.args.eval_model}: its {name} does not fit {self.script}'s "
                         f"({str(error).splitlines()[0]})")  # fmt: skip
        if len(self.model.get("eval_envs", [])) == self.args.num_eval_envs:  # model.pt: the final evaluation again
            restore_envs(self.eval_envs, self.model["eval_envs"])
        scaled_return = evaluate()
        print(f"{self.args.eval_model}: mean scaled return {scaled_return:.2f} over {self.args.num_eval_envs} episodes")
        if self.args.capture_video:  # one episode, in a videos/ folder next to the model file
            videos_dir = os.path.join(os.path.dirname(self.args.eval_model), "videos")
            model_name = os.path.splitext(os.path.basename(self.args.eval_model))[0]
            EvaluationVideos(self.args.env_id, self.dt, self.args.time_limit, videos_dir, self.args.seed).record(
                act, model_name)  # fmt: skip
        if self.args.track:
            self.wandb.finish()
        sys.exit(0)

    def start(self, envs, obs, *, state, networks, evaluate, act, diagnostics):
        """Open the logs and, for a resumed run, put back the checkpoint's state: `state` (a dict of the script's
        objects with state_dict / load_state_dict: networks, optimizer, replay memory, noise), the training envs
        `envs` and their observations `obs`, the evaluation envs and the generators. `networks` is what model.pt
        keeps, `evaluate()` gives a mean scaled return, `act` an env action for one observation (videos), and
        `diagnostics` the column names of diagnostics.csv. Returns the observations to go on from."""
        if self.resumed and (missing := sorted(state.keys() - self.resumed["state"].keys())):  # before any file moves
            sys.exit(f"error: --resume {self.run_dir}: its checkpoint has no {', '.join(missing)}: an older version of "
                     "the script made it; resume it with that commit, or start it again")  # fmt: skip
        args, self.envs, self.state, self.networks = self.args, envs, state, networks
        self.evaluate, self.act, self.diagnostics = evaluate, act, diagnostics
        self.round_time = args.num_envs * args.steps_per_round * self.dt  # physical seconds of interaction per round
        self.num_rounds = int(args.total_time / self.round_time + 1e-9)
        self.rounds_done, self.evaluations, self.log_rows, self.checkpoints = 0, 0, 0, 0
        self.last_eval, self.eval_seconds, wall_time, self.completed = float("nan"), 0.0, 0.0, False
        self.window, self.window_rounds = torch.zeros(len(diagnostics) - 1, dtype=torch.float64), 0  # sums since a row
        self.final_eval_envs = None
        # What W&B holds already: a resumed run computes again what it logged after the checkpoint, and W&B cannot
        # take rows back, so it gets only the evaluations and diagnostics rows after its last of each (its summary
        # keeps the env_steps of the last evaluation and the updates of the last diagnostics row it received).
        summary = self.wandb.run.summary if args.track and self.resumed else {}
        self.wandb_has = {"env_steps": summary.get("env_steps", -1), "updates": summary.get("updates", -1)}
        evals_path, diagnostics_path = (os.path.join(self.run_dir, name) for name in ("evals.csv", "diagnostics.csv"))
        if self.resumed:
            resumed = self.resumed
            # What was logged after the checkpoint goes: the resumed run logs the same numbers again.
            for path, size in ((evals_path, resumed["evals_csv_bytes"]),
                               (diagnostics_path, resumed["diagnostics_csv_bytes"])):  # fmt: skip
                with open(path, "r+b") as file:
                    file.truncate(size)
            for name in COUNTERS:
                setattr(self, name, resumed["counters"][name])
            if args.checkpoint_every and args.checkpoint_every != resumed["args"]["checkpoint_every"]:
                # A new interval: its count of checkpoints done, so that the next falls on its first multiple after
                # now (the old count would make one due every round until it caught up).
                now = self.physical_time + 1e-9 * self.round_time  # the tolerance of _due
                self.checkpoints = math.floor(now / args.checkpoint_every) + 1
            wall_time = resumed["counters"]["wall_time"]
        self.evals_file = open(evals_path, "a" if self.resumed else "w", newline="")
        self.diagnostics_file = open(diagnostics_path, "a" if self.resumed else "w", newline="")
        self.evals_csv, self.diagnostics_csv = csv.writer(self.evals_file), csv.writer(self.diagnostics_file)
        if not self.resumed:
            self.evals_csv.writerow(["physical_time", "env_steps", "updates", "wall_time", "scaled_return"])
            self.diagnostics_csv.writerow(["physical_time", "env_steps", "updates", *diagnostics])
        if args.capture_video:  # a separate env, so that the evaluation envs' episodes stay as they are
            self.videos = EvaluationVideos(args.env_id, self.dt, args.time_limit, os.path.join(self.run_dir, "videos"),
                                           args.seed)  # fmt: skip
        self.write_run_info(completed=False)
        self.start_time = time.time() - wall_time  # a resumed run's wall time goes on from the checkpoint's
        if self.resumed:  # the state the checkpoint saved, in place of the fresh one just made
            for name, thing in state.items():
                thing.load_state_dict(self.resumed["state"][name])
            obs = restore_env_states(envs, self.resumed["envs"], self.resumed["obs"].numpy())
            restore_envs(self.eval_envs, self.resumed["eval_envs"])
            if args.capture_video and "videos" in self.resumed:
                self.videos.evaluations = self.resumed["videos"]["evaluations"]
                set_env_state(self.videos.env, self.resumed["videos"]["env"])
            set_random_state(self.resumed["random"])
            # The loaded checkpoint goes, its copy of the replay memory with it (check_memory budgets the live memory
            # and one checkpoint's copy, not a third): what the run reads of it later is kept.
            self.resumed = {name: self.resumed[name] for name in ("script", "run_name", "device", "wandb_id", "args")}
        self.obs = obs
        columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
                   TextColumn("eval {task.fields[last_eval]:.1f}"), TextColumn("{task.fields[sps]:.0f} SPS"),
                   TimeRemainingColumn()]  # fmt: skip
        self.progress = Progress(*columns, disable=not sys.stdout.isatty())
        self.task = self.progress.add_task("physical time", total=self.num_rounds * self.round_time,
                                           completed=self.physical_time, last_eval=self.last_eval, sps=0)  # fmt: skip
        return obs

    # The clock: whole rounds; physical time, env steps and updates follow from them.
    @property
    def physical_time(self):
        return self.rounds_done * self.round_time

    @property
    def env_steps(self):
        return self.rounds_done * self.args.num_envs * self.args.steps_per_round

    @property
    def updates(self):
        return self.rounds_done * self.args.updates_per_round

    def _due(self, done, interval):
        """Whether the (done + 1)-th event of an `interval` is due: the physical time has reached done * interval
        (the events fall at 0, interval, 2 interval, ...; the tolerance absorbs the floats' rounding only)."""
        return self.physical_time >= done * interval - 1e-9 * self.round_time

    def rounds(self):
        """The training loop's rounds, to iterate over: before each, an evaluation and a checkpoint when due;
        after the last, the final evaluation. A SIGTERM ends it with a checkpoint as soon as the round, the
        evaluation or the checkpoint in flight is over: each leaves a state to go on from exactly (a grace of 30 s
        before SIGKILL, as Slurm and spot machines give, may not cover a checkpoint and a round more)."""
        args = self.args
        self.progress.start()
        for _ in range(self.rounds_done, self.num_rounds):
            if self._stopped_by_sigterm():
                return
            if self._due(self.evaluations, args.eval_every):
                self._log_eval()
                self.evaluations += 1
                if self._stopped_by_sigterm():  # the checkpoint due now is left to the resumed run, which makes it
                    return
            if args.checkpoint_every and self._due(self.checkpoints, args.checkpoint_every):
                self.save_model(os.path.join(self.run_dir, "checkpoints", f"{self.physical_time:.1f}s.pt"))
                self.checkpoints += 1
                self.save_state()
                if self._stopped_by_sigterm(saved=True):
                    return
            yield
        if self._stopped_by_sigterm():  # during the last round: the final evaluation is left to the resumed run
            return
        if args.checkpoint_every:  # the state before the final evaluation: --resume can extend the run
            self.save_state()
        elif os.path.exists(os.path.join(self.run_dir, CHECKPOINT)):  # a resumed run's old state: now stale
            os.remove(os.path.join(self.run_dir, CHECKPOINT))
        if self.window_rounds:  # the rounds since the last diagnostics row (after the state: an extension goes on)
            self._log_diagnostics(sps=self.env_steps / (time.time() - self.start_time))
        self._log_eval(final=True)
        if args.checkpoint_every:
            self.save_model(os.path.join(self.run_dir, "checkpoints", f"{self.physical_time:.1f}s.pt"))
        self.completed = True

    def _stopped_by_sigterm(self, saved=False):
        """Whether a SIGTERM has asked the run to stop; if so, the state now goes to the checkpoint (unless it was
        just saved), to go on from with --resume."""
        if not self.preemption.requested:
            return False
        if not saved:
            self.save_state()
        self.progress.console.print(f"stopped by SIGTERM: checkpoint saved; go on with --resume {self.run_dir}",
                                    soft_wrap=True)  # fmt: skip
        return True

    def end_round(self, *, stats, round_stats, obs):
        """After a round's updates: `obs` the envs' observations now (for a checkpoint), `stats` the updates'
        statistics (updates x TRAINING_STATS, on the device), `round_stats` the round's own (ROUND_STATS). Stops
        the run on a non-finite loss; advances the clock; writes diagnostics.csv and W&B every --eval-every / 10."""
        self.obs, stats = obs, stats.cpu()
        self.rounds_done += 1
        if not torch.isfinite(stats).all():  # run.json says so: sweeps/run_local.py neither resumes nor reruns it
            first = self.updates - self.args.updates_per_round + int((~torch.isfinite(stats)).any(1).nonzero()[0])
            self.write_run_info(completed=False, physical_time=self.physical_time, updates=self.updates,
                                stopped_by=NON_FINITE_LOSS)  # fmt: skip
            sys.exit(f"error: {NON_FINITE_LOSS} at update {first} (physical time {self.physical_time:.1f} s)")
        sps = self.env_steps / (time.time() - self.start_time)
        self.progress.update(self.task, completed=self.physical_time, last_eval=self.last_eval, sps=sps)
        self.window += torch.cat([stats.mean(0), torch.stack(round_stats).cpu()])
        self.window_rounds += 1
        if self._due(self.log_rows, self.args.eval_every / 10):
            self._log_diagnostics(sps)

    def _log_diagnostics(self, sps):
        """A row of diagnostics.csv (and W&B): the means over the rounds since the last row."""
        means = dict(zip(self.diagnostics[:-1], (self.window / self.window_rounds).tolist(), strict=True))
        td, td_terminal = means["losses/td"], means["losses/td_terminal"]  # the terminal transitions' share of it
        diagnostics = means | {"batch/terminal_td_share": td_terminal / td if td else math.nan}
        self.diagnostics_csv.writerow([f"{self.physical_time:.6f}", self.env_steps, self.updates,
                                       *(f"{diagnostics[name]:.6g}" for name in self.diagnostics)])  # fmt: skip
        self.diagnostics_file.flush()
        self.window, self.window_rounds = torch.zeros_like(self.window), 0
        if self.args.track and self.updates > self.wandb_has["updates"]:
            updates_per_second = self.updates / (time.time() - self.start_time)
            self.wandb.log({"physical_time": self.physical_time, **diagnostics, "updates": self.updates,
                            "charts/SPS": sps, "charts/updates_per_second": updates_per_second})  # fmt: skip
        self.log_rows += 1

    def _log_eval(self, final=False):
        evaluation_start = time.time()
        if final:
            self.final_eval_envs = [env_state(env) for env in self.eval_envs.envs]
        self.last_eval = self.evaluate()
        self.eval_seconds += time.time() - evaluation_start
        wall_time = time.time() - self.start_time
        self.evals_csv.writerow([f"{self.physical_time:.6f}", self.env_steps, self.updates, f"{wall_time:.2f}",
                                 f"{self.last_eval:.4f}"])  # fmt: skip
        self.evals_file.flush()
        self.progress.console.print(f"physical time {self.physical_time:8.1f} s   scaled return "
                                    f"{self.last_eval:9.2f}   wall {wall_time:6.0f} s")  # fmt: skip
        if self.args.capture_video:
            self.videos.record(self.act, f"physical-time-{self.physical_time:.0f}s", final)
        if self.args.track and self.env_steps > self.wandb_has["env_steps"]:
            self.wandb.log({"physical_time": self.physical_time, "eval/scaled_return": self.last_eval,
                            "env_steps": self.env_steps})  # fmt: skip

    def save_model(self, path, eval_envs_state=None):
        """The networks, the optimizer and the args (model.pt, checkpoints/<time>s.pt); with the evaluation envs'
        state, --eval-model repeats the evaluation that found them so."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        model = {"args": vars(self.args), "optimizer": self.state["optimizer"].state_dict()}
        model |= {name: network.state_dict() for name, network in self.networks.items()}
        if eval_envs_state:
            model["eval_envs"] = eval_envs_state
        save_checkpoint(model, path)

    def save_state(self):
        """runs/<run_name>/checkpoint.pt: all that --resume needs to go on as if never stopped."""
        counters = {name: getattr(self, name) for name in COUNTERS} | {"wall_time": time.time() - self.start_time}
        state = {"script": self.script, "run_name": self.run_name, "args": vars(self.args),
                 "device": self.device.type, "wandb_id": self.wandb_id, "counters": counters,
                 "state": {name: thing.state_dict() for name, thing in self.state.items()},
                 "envs": env_states(self.envs), "obs": torch.from_numpy(self.obs),
                 "eval_envs": [env_state(env) for env in self.eval_envs.envs], "random": random_state(self.device),
                 "evals_csv_bytes": self.evals_file.tell(),
                 "diagnostics_csv_bytes": self.diagnostics_file.tell()}  # fmt: skip
        if self.args.capture_video:
            state["videos"] = {"evaluations": self.videos.evaluations, "env": env_state(self.videos.env)}
        save_checkpoint(state, os.path.join(self.run_dir, CHECKPOINT))

    def write_run_info(self, **results):
        """runs/<run_name>/run.json: what ran and how it ended (read by sweeps/)."""
        info = {"script": self.script, "run_name": self.run_name, "dt": self.dt, "args": vars(self.args),
                "identity": run_identity(self.script, vars(self.args)), "versions": library_versions(),
                "machine": machine_info(self.device), "wandb_id": self.wandb_id, **results}  # fmt: skip
        save_json(info, os.path.join(self.run_dir, "run.json"))  # whole or not at all, whenever the run stops

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        """The end of the run, however the loop ended: Ctrl-C keeps what was logged; model.pt, run.json, W&B.
        A dead env worker ends the run with its one-line error; other errors go on up as they are."""
        self.progress.stop()
        if isinstance(self.envs, EnvWorkers):
            self.envs.close()
        if error_type is EnvWorkerError:
            sys.exit(f"error: {error}")
        if error_type is KeyboardInterrupt:
            self.progress.console.print("interrupted: keeping what was logged")
        self.evals_file.close()
        self.diagnostics_file.close()
        if error_type not in (None, KeyboardInterrupt):
            return False
        if self.args.save_model:
            self.save_model(os.path.join(self.run_dir, "model.pt"), self.final_eval_envs)
        wall_time, checkpoint = time.time() - self.start_time, os.path.join(self.run_dir, CHECKPOINT)
        stopped_by = None if self.completed else "SIGTERM" if self.preemption.requested else "Ctrl-C"
        self.write_run_info(completed=self.completed, physical_time=self.physical_time, env_steps=self.env_steps,
                            updates=self.updates, wall_time=wall_time, eval_wall_time=self.eval_seconds,
                            final_scaled_return=self.last_eval, stopped_by=stopped_by,
                            checkpoint=checkpoint if os.path.exists(checkpoint) else None)  # fmt: skip
        print(f"{self.run_name}: scaled return {self.last_eval:.2f} after {self.physical_time:g} physical s "
              f"({self.env_steps} env steps, {self.updates} updates, {wall_time:.1f} s wall, "
              f"{self.eval_seconds:.1f} s evaluating) -> {self.run_dir}")  # fmt: skip
        if self.args.track:
            if stopped_by == "SIGTERM" and self.wandb.run.sweep_id:  # W&B's contract: requeue, resume by run id
                self.wandb.run.mark_preempting()
                self.wandb.finish(exit_code=PREEMPTED_EXIT_CODE)
                sys.exit(PREEMPTED_EXIT_CODE)
            self.wandb.finish()
        return True


class Preemption:
    """SIGTERM (Slurm, cloud spot machines and `wandb agent` stop a job with it) asks the training loop to save a
    checkpoint once the round, evaluation or checkpoint in flight is over, and stop; Ctrl-C (SIGINT) stops it at
    once, as before."""

    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGTERM, self._request)

    def _request(self, signum, frame):
        self.requested = True
