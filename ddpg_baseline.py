"""DDPG, the baseline of Tallec, Blier & Ollivier, ICML 2019 (supplementary Alg. "DDPG").

A critic Q(s, a) with target networks, and a policy pi maximising Q. The discount
is always gamma**dt. Two variants: "unscaled" (default, the paper's main figures)
uses reward r*dt0, learning rates alpha*dt0 and RMSprop smoothing 1-dt0 for a fixed
reference dt0 = --ref-dt, whatever dt; --scaled uses dt instead of dt0. Compare with
dau_continuous.py: `diff ddpg_baseline.py dau_continuous.py` shows what DAU changes.

    python ddpg_baseline.py                       # Pendulum-v1, native dt
    python ddpg_baseline.py --env-id HalfCheetah-v4 --dt 0.005
    python ddpg_baseline.py --eval-model runs/<run_name>/model.pt

Writes runs/<run_name>/evals.csv (scaled return vs physical time); --track logs to W&B.
"""

import copy
import csv
import math
import os
import random
import sys
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import psutil
import torch
import torch.nn as nn
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from dt_wrappers import (
    CHECKPOINT,
    EvaluationVideos,
    Preemption,
    check_disk,
    check_dt,
    claim_run_dir,
    env_settings,
    env_state,
    library_versions,
    machine_info,
    make_env,
    new_run_dir,
    parse_args,
    random_state,
    restore_envs,
    save_checkpoint,
    save_json,
    set_env_state,
    set_random_state,
    set_round_seconds,
    settings_help,
)  # fmt: skip


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment (part of the run name)"""
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
    env_id: str = "Pendulum-v1"
    """a continuous-action environment supported by dt_wrappers"""
    dt: float | None = None
    """time step in seconds; None: the environment's native step"""
    total_time: float | None = None
    """training budget in physical seconds of interaction, summed over all training envs (the paper's x axis);
    None: the env's default (table above)"""
    time_limit: float | None = None
    """episode length in physical seconds; None: the environment's native duration"""
    num_envs: int = 256
    """parallel training environments"""
    num_eval_envs: int = 8
    """evaluation environments (one deterministic episode each)"""
    eval_every: float | None = None
    """physical seconds of training between evaluations; None: the env's default (table above)"""
    steps_per_round: int = 10
    """environment steps per round, in every env (paper: nb_steps)"""
    updates_per_round: int = 50
    """gradient steps per round (paper: nb_learn)"""
    round_seconds: float | None = None
    """physical seconds each env steps per round, at every dt (--steps-per-round becomes round(this / dt), with
    updates_per_round / steps_per_round updates per step); None: --steps-per-round steps whatever dt (the paper's)"""
    batch_size: int = 256
    """transitions per gradient step (paper: N)"""
    buffer_time: float | None = None
    """replay memory in physical seconds of interaction, summed over all training envs (like --total-time), so
    the same at every dt; None: the env's default (table above)"""
    gamma: float = 0.8
    """discount per physical second; a step is discounted by gamma**dt"""
    learning_rate: float = 0.1
    """alpha_Q: the critic learning rate is alpha * dt0 (alpha * dt with --scaled)"""
    policy_learning_rate: float | None = None
    """alpha_pi: the policy learning rate is alpha_pi * dt0 (alpha_pi * dt with --scaled); None: the env's default"""
    ou_kappa: float = 7.5
    """stiffness of the Ornstein-Uhlenbeck exploration noise (per second)"""
    ou_sigma: float = 1.5
    """scale of the Ornstein-Uhlenbeck exploration noise (per sqrt(second))"""
    normalize_obs: bool | None = None
    """normalise observations by their running mean and std (True or False); None: the env's default (table above)"""
    hidden_size: int = 256
    """width of the two hidden layers"""
    tau: float | None = None
    """target update psi' <- tau psi' + (1 - tau) psi (tau weighs the OLD target); None: the env's default"""
    scaled: bool = False
    """scale reward, learning rates and RMSprop with dt (default: with the fixed --ref-dt, the paper's main figures)"""
    ref_dt: float = 0.01
    """dt0, the reference time step of the unscaled variant"""


def check_args(args, dt, obs_dim, action_dim, device=None):
    """Refuse arguments that cannot give a meaningful run, before any work."""
    check_dt(dt)
    check_dt(args.ref_dt)
    if not 0 <= args.tau < 1:
        raise ValueError(f"--tau must be in [0, 1), got {args.tau}")
    for name in ("num_envs", "num_eval_envs", "steps_per_round", "updates_per_round", "batch_size"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    set_round_seconds(args, dt)  # --round-seconds: the round's steps and updates from its physical length
    round_time = args.num_envs * args.steps_per_round * dt
    if not args.total_time >= round_time:
        raise ValueError(f"--total-time {args.total_time} s is shorter than one round ({round_time:g} s)")
    if not 0 < args.buffer_time < math.inf:
        raise ValueError(f"--buffer-time must be positive and finite, got {args.buffer_time}")
    if round(args.buffer_time / dt) < args.batch_size:
        raise ValueError(f"--buffer-time {args.buffer_time:g} s holds {round(args.buffer_time / dt)} transitions at "
                         f"dt {dt:g}, fewer than --batch-size ({args.batch_size})")  # fmt: skip
    rows, available = buffer_rows(args, dt), psutil.virtual_memory().available
    needed = rows * 4 * (2 * obs_dim + action_dim + 2)  # (s, a, r, terminated, s') in float32 per transition
    # The buffer and, while a checkpoint is written, a copy of its rows: both in host memory on the CPU; on a GPU
    # the buffer in its memory (2 GiB left to CUDA itself) and the copy in host memory.
    copies, where = 2, ""
    if device is not None and device.type == "cuda":
        gpu_available = max(0, torch.cuda.mem_get_info(device)[0] - 2**31)
        copies, where = 1, "on the GPU (2 GiB kept for CUDA) " if gpu_available < available else "in host memory "
        available = min(available, gpu_available)
    if copies * needed > available:
        raise ValueError(f"the replay buffer needs {needed / 1e9:.1f} GB for {rows} transitions, and as much "
                         f"again in host memory to write a checkpoint of it (--buffer-time {args.buffer_time:g} s "
                         f"at dt {dt:g}), but {where}{available / 1e9:.1f} GB are available: lower --buffer-time "
                         "(or --total-time)")  # fmt: skip
    if not 0 < args.gamma <= 1:
        raise ValueError(f"--gamma must be in (0, 1], got {args.gamma}")
    for name in ("eval_every", "hidden_size", "learning_rate", "policy_learning_rate", "ou_kappa", "ou_sigma"):
        if not 0 < getattr(args, name) < math.inf:
            raise ValueError(f"--{name.replace('_', '-')} must be positive and finite, got {getattr(args, name)}")
    if args.checkpoint_every is not None and not 0 < args.checkpoint_every < math.inf:
        raise ValueError(f"--checkpoint-every must be positive and finite, got {args.checkpoint_every}")
    if args.checkpoint_every is not None:  # a checkpoint holds the replay memory's filled rows
        check_disk(args.resume or "runs", needed + 2**24)


def buffer_rows(args, dt):
    """Replay capacity in transitions: --buffer-time physical seconds at this dt (the paper's Discussion: a
    buffer of a fixed number of transitions covers less physical time as dt shrinks), and never more than
    the run collects."""
    num_rounds = int(args.total_time / (args.num_envs * args.steps_per_round * dt) + 1e-9)
    return min(round(args.buffer_time / dt), num_rounds * args.num_envs * args.steps_per_round)


def mlp(inputs, outputs, hidden_size):
    # The paper's network (appendix "Global hyperparameters").
    return nn.Sequential(
        nn.Linear(inputs, hidden_size), nn.LayerNorm(hidden_size), nn.ReLU(),
        nn.Linear(hidden_size, hidden_size), nn.LayerNorm(hidden_size), nn.ReLU(),
        nn.Linear(hidden_size, outputs),
    )  # fmt: skip


class Normalizer(nn.Module):
    """Running mean and std of every observation seen; the identity until updated."""

    def __init__(self, obs_dim):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("mean", torch.zeros(obs_dim))
        self.register_buffer("var", torch.ones(obs_dim))

    def update(self, obs):
        # Merge the batch's moments into the running ones (Chan et al.), on device, no sync.
        batch_count, batch_mean = obs.shape[0], obs.mean(0)
        delta, total = batch_mean - self.mean, self.count + batch_count
        merged_squares = self.var * self.count + obs.var(0, unbiased=False) * batch_count
        self.var.copy_((merged_squares + delta**2 * self.count * batch_count / total) / total)
        self.mean.add_(delta * batch_count / total)
        self.count.copy_(total)

    def forward(self, obs):
        # A std floor of 0.1 (as in the authors' code): near-constant features (BipedalWalker's lidar and
        # contact flags) are centred, not multiplied by up to 1 / their tiny std.
        return (obs - self.mean) / self.var.sqrt().clamp_min(0.1)


class QNetwork(nn.Module):
    """Q_psi(s, a)."""

    def __init__(self, obs_dim, action_dim, hidden_size, normalizer):
        super().__init__()
        self.normalizer, self.net = normalizer, mlp(obs_dim + action_dim, 1, hidden_size)

    def forward(self, obs, action):
        return self.net(torch.cat([self.normalizer(obs), action], -1)).squeeze(-1)


class Actor(nn.Module):
    """pi_phi(s) in [-1, 1]^d (tanh); mapped affinely onto the env's action box when acting."""

    def __init__(self, obs_dim, action_dim, hidden_size, normalizer):
        super().__init__()
        self.normalizer, self.net = normalizer, mlp(obs_dim, action_dim, hidden_size)

    def forward(self, obs):
        return torch.tanh(self.net(self.normalizer(obs)))


class OUNoise:
    """Ornstein-Uhlenbeck process dz = -kappa z dt + sigma dB (eq. orn_uhl), one per env,
    started from its stationary law N(0, sigma^2 / (2 kappa)) and never reset."""

    def __init__(self, shape, kappa, sigma, dt, device):
        # The exact step: z(t + dt) given z(t) is N(z(t) e^(-kappa dt), sigma^2 (1 - e^(-2 kappa dt)) / (2 kappa)),
        # so the process has the same law at every dt. (The authors' Euler step z += -kappa z dt + sigma sqrt(dt) N
        # inflates the std by 11% at dt 0.05 and diverges for kappa dt >= 2.)
        self.decay = math.exp(-kappa * dt)
        self.scale = sigma * math.sqrt((1 - self.decay**2) / (2 * kappa))
        self.z = torch.randn(shape, device=device) * sigma / math.sqrt(2 * kappa)

    def step(self):
        self.z.mul_(self.decay).add_(self.scale * torch.randn_like(self.z))
        return self.z


class ReplayBuffer:
    """Ring buffer of (s, a, r, terminated, s') on the training device."""

    def __init__(self, capacity, obs_dim, action_dim, device):
        self.capacity, self.size, self.position = capacity, 0, 0
        # torch.empty, which deterministic mode (on the CPU) fills with NaN: the memory is all committed here, and
        # a row read before it is written would be NaN, not a silent zero. Only filled rows are ever sampled.
        self.fields = [torch.empty((capacity, dim), device=device) for dim in (obs_dim, action_dim, 1, 1, obs_dim)]

    def add(self, *transition):
        rows = torch.arange(self.position, self.position + len(transition[0])) % self.capacity
        for field, values in zip(self.fields, transition, strict=True):
            field[rows] = torch.as_tensor(values, dtype=torch.float32, device=field.device).reshape(len(rows), -1)
        self.position = (self.position + len(rows)) % self.capacity
        self.size = min(self.size + len(rows), self.capacity)

    def sample(self, num_batches, batch_size):
        """`num_batches` batches in one gather: (obs, action, reward, terminated, next_obs)."""
        index = torch.randint(self.size, (num_batches, batch_size), device=self.fields[0].device)
        obs, action, reward, terminated, next_obs = (field[index] for field in self.fields)
        return obs, action, reward.squeeze(-1), terminated.squeeze(-1), next_obs

    def state_dict(self):  # the filled rows only
        # Host tensors: the filled rows copied (from a GPU, straight to host memory); a full ring on the CPU as it is.
        fields = [field[: self.size].to("cpu", copy=True) if self.size < self.capacity else field.cpu()
                  for field in self.fields]  # fmt: skip
        return {"capacity": self.capacity, "size": self.size, "position": self.position, "fields": fields}

    def load_state_dict(self, state):
        # A larger --total-time can enlarge a buffer that never wrapped (see buffer_rows): rows keep their places.
        self.size = state["size"]
        self.position = state["position"] if state["capacity"] == self.capacity else self.size
        for field, saved in zip(self.fields, state["fields"], strict=True):
            field[: self.size].copy_(saved)


# What update() returns, per gradient step: the TD loss mean(td^2), mean Q, mean |Q(s, a) - Q(s, pi(s))|,
# the terminal transitions' part of the TD loss mean(d td^2), and the share of terminal transitions d in the batch.
TRAINING_STATS = ("losses/td", "values/q", "values/action_gap", "losses/td_terminal", "batch/terminal_share")
# Per round: the mean size of the exploration noise |a - pi(s)| against the policy's |pi(s)|, terminations per
# physical second of interaction, and RMSprop's denominators, sqrt of its running mean of squared gradients over
# each network's parameters.
ROUND_STATS = ("exploration/noise_size", "exploration/action_size", "training/failures_per_second",
               "optimizer/grad_rms_qf", "optimizer/grad_rms_actor")  # fmt: skip
# runs/<run_name>/diagnostics.csv, every --eval-every / 10 physical seconds: the means over the rounds since the
# last row, and the terminal transitions' share of the squared TD error (losses/td_terminal / losses/td).
DIAGNOSTICS = (*TRAINING_STATS, *ROUND_STATS, "batch/terminal_td_share")
# The training loop's bookkeeping, as a checkpoint keeps it.
COUNTERS = ("physical_time", "env_steps", "updates", "next_eval", "next_log", "last_eval", "next_checkpoint",
            "eval_seconds", "wall_time")  # fmt: skip


def update(batch, qf, target_qf, actor, target_actor, optimizer, dt, gamma, reward_scale, tau):
    """One gradient step of Alg. "DDPG". Returns TRAINING_STATS, no host sync."""
    obs, action, reward, terminated, next_obs = batch
    q = qf(obs, action)  # Q^i = Q_psi(s, a)
    policy_q = qf(obs, actor(obs))  # Q(s, pi(s))
    with torch.no_grad():  # Q~^i = r + (1-d) gamma Q_psi'(s', pi_phi'(s')), reward r*dt0 (or r*dt), gamma**dt
        target = reward * reward_scale + (1 - terminated) * gamma**dt * target_qf(next_obs, target_actor(next_obs))
    td = q - target
    critic_objective = (td.detach() * q).mean()  # d/dpsi = mean(td dQ/dpsi) = Delta-psi
    actor_objective = -policy_q.mean()  # -d/dphi = Delta-phi, the gradient of Q(s, pi(s))
    optimizer.zero_grad()
    # Each objective moves only its own parameters, as the paper's separate Delta's do.
    critic_objective.backward(inputs=list(qf.parameters()))
    actor_objective.backward(inputs=list(actor.parameters()))
    optimizer.step()  # psi and phi both updated from the same batch and parameters
    with torch.no_grad():  # psi' <- tau psi' + (1 - tau) psi, phi' likewise, after every gradient step
        for network, target_network in ((qf, target_qf), (actor, target_actor)):
            torch._foreach_lerp_(list(target_network.parameters()), list(network.parameters()), 1 - tau)
    return torch.stack([(td**2).mean(), q.mean(), (q - policy_q).abs().mean(), (terminated * td**2).mean(),
                        terminated.mean()]).detach()  # fmt: skip


def gradient_rms(optimizer, network):
    """sqrt of RMSprop's running mean of squared gradients, over all of a network's parameters (after a step)."""
    squares = [optimizer.state[parameter]["square_avg"].flatten() for parameter in network.parameters()]
    return torch.cat(squares).mean().sqrt()


def graphed(train_round, modules, optimizer):
    """`train_round` as one CUDA graph, for a GPU: small networks at batch 256 are bound by the launches of a
    round's ten thousand or so kernels, not by their arithmetic, and a graph launches them all at once. The same
    kernels on the same numbers (PyTorch's whole-network capture), captured at the first round, after any
    --resume load; every round replays it. Capture needs a warm-up (the optimizer's lazy state, cuBLAS's
    workspaces), which is undone: the first replay starts from the state the run had."""
    graph, static_batches, static_stats = torch.cuda.CUDAGraph(), [], None

    def replay(batches):
        nonlocal static_stats
        if not static_batches:
            saved = [{name: tensor.clone() for name, tensor in module.state_dict().items()} for module in modules]
            saved_optimizer = {parameter: {name: tensor.clone() for name, tensor in state.items()}
                               for parameter, state in optimizer.state.items()}  # fmt: skip
            static_batches.extend(field.clone() for field in batches)  # the graph reads its batches from here
            side_stream = torch.cuda.Stream()
            side_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side_stream):
                train_round(static_batches)
            torch.cuda.current_stream().wait_stream(side_stream)
            with torch.cuda.graph(graph):
                static_stats = train_round(static_batches)
            for module, state in zip(modules, saved, strict=True):
                module.load_state_dict(state)  # in place: the graph keeps the tensors' addresses
            for parameter, state in optimizer.state.items():
                for name, tensor in state.items():
                    if parameter in saved_optimizer:  # a resumed run's state
                        tensor.copy_(saved_optimizer[parameter][name])
                    else:  # a fresh run: RMSprop (momentum 0, not centred) starts from a zero step and average
                        tensor.zero_()
        for static, field in zip(static_batches, batches, strict=True):
            static.copy_(field)
        graph.replay()
        return static_stats

    return replay


def env_step(envs, action, action_low, action_high):
    """Step with actions in [-1, 1] mapped onto the action box. Returns the next observations, the
    rewards, the termination flags and the transitions' true next observations: at a time-limit
    truncation the last observation of the episode, so that the update bootstraps through it.
    (The official code treats truncation as termination; only termination stops bootstrapping.)"""
    next_obs, reward, terminated, _, infos = envs.step(action_low + (action + 1) / 2 * (action_high - action_low))
    real_next_obs = next_obs.copy()
    if "_final_obs" in infos:
        real_next_obs[infos["_final_obs"]] = np.stack(infos["final_obs"][infos["_final_obs"]])
    return next_obs, reward, terminated, real_next_obs


def evaluate(actor, eval_envs, action_low, action_high):
    """Mean scaled return of one deterministic episode in each evaluation env."""
    # On the CPU, as a copy (on a CPU machine the same network, so the same numbers): a step of the few evaluation
    # envs is a forward pass too small for a GPU, which spends it in kernel launches and a sync per step.
    actor = copy.deepcopy(actor).cpu()
    obs, _ = eval_envs.reset()
    returns = np.full(eval_envs.num_envs, np.nan)
    while np.isnan(returns).any():
        with torch.no_grad():
            action = actor(torch.as_tensor(obs, dtype=torch.float32)).numpy()
        obs, _, _, _, infos = eval_envs.step(action_low + (action + 1) / 2 * (action_high - action_low))
        if "final_info" in infos:
            finished = infos["final_info"]["_episode"] & np.isnan(returns)
            returns[finished] = infos["final_info"]["episode"]["r"][finished]
    return float(returns.mean())


def make_vector_env(args, dt, num_envs, seed):
    thunks = [lambda i=i: make_env(args.env_id, dt, args.time_limit, seed + i) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


if __name__ == "__main__":
    args, resumed = parse_args(Args, __doc__ + "\n" + settings_help(), os.path.basename(__file__))
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (read when CUDA starts)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    if resumed and resumed.get("device", "cpu") != device.type:  # (no key: a checkpoint from before the GPU path)
        sys.exit(f"error: {args.resume} ran on {resumed.get('device', 'cpu')} and would continue on {device.type} "
                 "with other numbers: resume it where it ran (CUDA_VISIBLE_DEVICES= hides a GPU)")  # fmt: skip
    if args.eval_model:  # evaluate a saved model in the env and at the dt it was trained with
        checkpoint = torch.load(args.eval_model, map_location=device)  # weights_only: loading runs no code
        for name in ("env_id", "dt", "time_limit", "hidden_size"):
            setattr(args, name, checkpoint["args"][name])
    try:  # refuse bad input before any work
        probe = make_env(args.env_id, dt=args.dt, time_limit=args.time_limit)
        if not isinstance(probe.action_space, gym.spaces.Box):
            raise ValueError(f"{args.env_id} has discrete actions: use dqn_baseline.py")
        dt = probe.get_wrapper_attr("dt")
        if probe.get_wrapper_attr("max_steps") is None:  # evaluation runs whole episodes
            raise ValueError(f"{args.env_id} has no episode time limit: pass --time-limit (seconds)")
        for name, setting in env_settings(probe).items():  # the env's defaults for what was left unset
            if hasattr(args, name) and getattr(args, name) is None:
                setattr(args, name, setting)
        check_args(args, dt, probe.observation_space.shape[0], probe.action_space.shape[0], device)
    except (ValueError, gym.error.Error) as error:
        sys.exit(f"error: {error}")
    run_name = f"{args.env_id}__{args.exp_name}__dt{dt:g}__{args.seed}__{int(time.time())}"
    wandb_id = None  # W&B's id of the run: a resumed run goes on as the same W&B run
    if resumed:
        run_name, wandb_id = resumed["run_name"], resumed["wandb_id"]
    elif not args.eval_model:  # runs/<run_name>, made now: a run started in the same second gets a name of its own
        run_name = new_run_dir(run_name)
    if args.track:
        import wandb

        try:
            wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, group=args.wandb_group,
                       name=run_name, config=vars(args), save_code=True, id=wandb_id,
                       resume="allow" if wandb_id else None)  # fmt: skip
        except wandb.errors.UsageError as error:
            if not resumed:  # no run: its folder goes (and runs/, if that leaves it empty)
                os.removedirs(os.path.join("runs", run_name))
            sys.exit(f"error: W&B: {error}. Run `wandb login`, or set WANDB_MODE=offline to log locally.")
        wandb.define_metric("physical_time")
        wandb.define_metric("*", step_metric="physical_time")  # the paper's x axis
        wandb_id = wandb.run.id

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)  # same seed, same numbers, on a GPU too (with cuBLAS's setting above)
    # Deterministic mode also fills each new tensor with NaN, a guard against reading unwritten memory: on the CPU
    # it stays (the tests run there); on a GPU it would add a kernel to most ops an update or a step launches.
    torch.utils.deterministic.fill_uninitialized_memory = device.type == "cpu"

    eval_envs = make_vector_env(args, dt, args.num_eval_envs, args.seed + args.num_envs)
    obs_dim, action_dim = probe.observation_space.shape[0], probe.action_space.shape[0]
    action_low, action_high = probe.action_space.low, probe.action_space.high
    normalizer = Normalizer(obs_dim).to(device)
    qf = QNetwork(obs_dim, action_dim, args.hidden_size, normalizer).to(device)
    actor = Actor(obs_dim, action_dim, args.hidden_size, normalizer).to(device)
    networks = {"normalizer": normalizer, "qf": qf, "actor": actor}

    def act(obs):  # the deterministic policy on one observation, for the videos
        with torch.no_grad():
            action = actor(torch.as_tensor(obs[None], dtype=torch.float32, device=device))[0].cpu().numpy()
        return action_low + (action + 1) / 2 * (action_high - action_low)

    if args.eval_model:
        for name, network in networks.items():
            network.load_state_dict(checkpoint[name])
        if len(checkpoint.get("eval_envs", [])) == args.num_eval_envs:  # model.pt: the run's final evaluation again
            restore_envs(eval_envs, checkpoint["eval_envs"])
        scaled_return = evaluate(actor, eval_envs, action_low, action_high)
        print(f"{args.eval_model}: mean scaled return {scaled_return:.2f} over {args.num_eval_envs} episodes")
        if args.capture_video:  # one episode, in a videos/ folder next to the model file
            videos_dir = os.path.join(os.path.dirname(args.eval_model), "videos")
            model_name = os.path.splitext(os.path.basename(args.eval_model))[0]
            EvaluationVideos(args.env_id, dt, args.time_limit, videos_dir, args.seed).record(act, model_name)
        sys.exit(0)
    preemption = Preemption()  # from here on, SIGTERM stops the run at the end of a round, with a checkpoint
    target_qf, target_actor = copy.deepcopy(qf), copy.deepcopy(actor)
    target_qf.normalizer = target_actor.normalizer = normalizer  # targets see the current normalisation
    targets = {"target_qf": target_qf, "target_actor": target_actor}
    # RMSprop without momentum; unscaled: reward r*dt0, learning rates alpha * dt0, smoothing 1 - dt0 (appendix).
    time_scale = dt if args.scaled else args.ref_dt
    optimizer = torch.optim.RMSprop(
        [{"params": qf.parameters(), "lr": args.learning_rate * time_scale},
         {"params": actor.parameters(), "lr": args.policy_learning_rate * time_scale}],
        alpha=1 - time_scale, momentum=0, foreach=True,  # foreach: the same arithmetic as the per-tensor loop, faster
        capturable=device.type == "cuda",  # its step counts on the GPU, as a CUDA graph needs; the same arithmetic
    )  # fmt: skip
    envs = make_vector_env(args, dt, args.num_envs, args.seed)
    buffer = ReplayBuffer(buffer_rows(args, dt), obs_dim, action_dim, device)
    noise = OUNoise((args.num_envs, action_dim), args.ou_kappa, args.ou_sigma, dt, device)

    def train_round(batches):  # Alg. lines "for k = 1, nb_learn": one gradient step on each batch
        return torch.stack([update([field[k] for field in batches], qf, target_qf, actor, target_actor, optimizer, dt,
                                   args.gamma, time_scale, args.tau)
                            for k in range(args.updates_per_round)])  # fmt: skip

    if device.type == "cuda":  # the same round, launched at once (see graphed)
        train_round = graphed(train_round, [*networks.values(), *targets.values()], optimizer)

    run_dir = args.resume or os.path.join("runs", run_name)
    try:
        run_lock = claim_run_dir(run_dir)  # held until the process ends: no second process writes this run
    except ValueError as error:
        sys.exit(f"error: {error}")
    if resumed:  # drop what was logged after the checkpoint: the resumed run logs it again
        with open(os.path.join(run_dir, "evals.csv"), "r+b") as file:
            file.truncate(resumed["evals_csv_bytes"])
    evals_file = open(os.path.join(run_dir, "evals.csv"), "a" if resumed else "w", newline="")
    evals_csv = csv.writer(evals_file)
    if not resumed:
        evals_csv.writerow(["physical_time", "env_steps", "updates", "wall_time", "scaled_return"])
    diagnostics_path = os.path.join(run_dir, "diagnostics.csv")
    window, window_rounds = torch.zeros(len(DIAGNOSTICS) - 1, dtype=torch.float64), 0  # sums since the last row
    if resumed and "diagnostics" in resumed:  # (a checkpoint older than diagnostics.csv: a new file from here)
        with open(diagnostics_path, "r+b") as file:
            file.truncate(resumed["diagnostics"]["csv_bytes"])
        window, window_rounds = resumed["diagnostics"]["window"], resumed["diagnostics"]["rounds"]
    diagnostics_file = open(diagnostics_path, "a", newline="")
    diagnostics_csv = csv.writer(diagnostics_file)
    if diagnostics_file.tell() == 0:
        diagnostics_csv.writerow(["physical_time", "env_steps", "updates", *DIAGNOSTICS])
    round_time = args.num_envs * args.steps_per_round * dt  # physical seconds of interaction per round
    num_rounds = int(args.total_time / round_time + 1e-9)
    physical_time, env_steps, updates, next_eval, next_log, last_eval = 0.0, 0, 0, 0.0, 0.0, float("nan")
    next_checkpoint, completed, eval_seconds, wall_time, final_eval_envs = 0.0, False, 0.0, 0.0, None
    if resumed:
        (physical_time, env_steps, updates, next_eval, next_log, last_eval, next_checkpoint, eval_seconds,
         wall_time) = (resumed["counters"][name] for name in COUNTERS)  # fmt: skip
    if args.capture_video:  # a separate env, so that the evaluation envs' episodes stay as they are
        videos = EvaluationVideos(args.env_id, dt, args.time_limit, os.path.join(run_dir, "videos"), args.seed)

    def save_model(path, eval_envs_state=None):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        checkpoint = {"args": vars(args), "optimizer": optimizer.state_dict()}
        checkpoint |= {name: network.state_dict() for name, network in networks.items()}
        if eval_envs_state:  # the evaluation envs as the final evaluation found them: --eval-model repeats it
            checkpoint["eval_envs"] = eval_envs_state
        torch.save(checkpoint, path)

    def save_state():  # runs/<run_name>/checkpoint.pt: all that --resume needs to go on as if never stopped
        counters = (physical_time, env_steps, updates, next_eval, next_log, last_eval, next_checkpoint, eval_seconds,
                    time.time() - start)  # fmt: skip
        state = {"script": os.path.basename(__file__), "run_name": run_name, "args": vars(args), "device": device.type,
                 "wandb_id": wandb_id, "counters": dict(zip(COUNTERS, counters, strict=True)),
                 "networks": {name: network.state_dict() for name, network in (networks | targets).items()},
                 "optimizer": optimizer.state_dict(), "replay": buffer.state_dict(), "noise": noise.z,
                 "envs": [env_state(env) for env in envs.envs], "obs": torch.from_numpy(obs),
                 "eval_envs": [env_state(env) for env in eval_envs.envs], "random": random_state(),
                 "evals_csv_bytes": evals_file.tell(),  # evals.csv and diagnostics.csv up to here
                 "diagnostics": {"csv_bytes": diagnostics_file.tell(), "window": window,
                                 "rounds": window_rounds}}  # fmt: skip
        if args.capture_video:
            state["videos"] = {"evaluations": videos.evaluations, "env": env_state(videos.env)}
        save_checkpoint(state, os.path.join(run_dir, CHECKPOINT))

    def write_run_info(**results):  # runs/<run_name>/run.json: what ran and how it ended (read by sweeps/)
        info = {"script": os.path.basename(__file__), "run_name": run_name, "dt": dt, "args": vars(args),
                "versions": library_versions(), "machine": machine_info(device), "wandb_id": wandb_id,
                **results}  # fmt: skip
        save_json(info, os.path.join(run_dir, "run.json"))  # whole or not at all, whenever the run stops

    write_run_info(completed=False)
    start = time.time() - wall_time  # a resumed run's wall time goes on from the checkpoint's

    def log_eval(final=False):
        global last_eval, eval_seconds, final_eval_envs
        evaluation_start = time.time()
        if final:
            final_eval_envs = [env_state(env) for env in eval_envs.envs]
        last_eval = evaluate(actor, eval_envs, action_low, action_high)
        eval_seconds += time.time() - evaluation_start
        wall_time = time.time() - start
        evals_csv.writerow([f"{physical_time:.6f}", env_steps, updates, f"{wall_time:.2f}", f"{last_eval:.4f}"])
        evals_file.flush()
        progress.console.print(f"physical time {physical_time:8.1f} s   scaled return {last_eval:9.2f}   "
                               f"wall {wall_time:6.0f} s")  # fmt: skip
        if args.capture_video:
            videos.record(act, f"physical-time-{physical_time:.0f}s", final)
        if args.track:
            wandb.log({"physical_time": physical_time, "eval/scaled_return": last_eval, "env_steps": env_steps})

    obs, _ = envs.reset(seed=args.seed)
    if resumed:  # the state the checkpoint saved, in place of the fresh one just made
        for name, network in (networks | targets).items():
            network.load_state_dict(resumed["networks"][name])
        optimizer.load_state_dict(resumed["optimizer"])
        buffer.load_state_dict(resumed["replay"])
        noise.z.copy_(resumed["noise"])
        obs = restore_envs(envs, resumed["envs"], resumed["obs"].numpy())
        restore_envs(eval_envs, resumed["eval_envs"])
        if args.capture_video and "videos" in resumed:
            videos.evaluations = resumed["videos"]["evaluations"]
            set_env_state(videos.env, resumed["videos"]["env"])
        set_random_state(resumed["random"])
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
               TextColumn("eval {task.fields[last_eval]:.1f}"), TextColumn("{task.fields[sps]:.0f} SPS"),
               TimeRemainingColumn()]  # fmt: skip
    with Progress(*columns, disable=not sys.stdout.isatty()) as progress:
        task = progress.add_task("physical time", total=num_rounds * round_time, completed=physical_time,
                                 last_eval=last_eval, sps=0)  # fmt: skip
        try:
            first_round = env_steps // (args.num_envs * args.steps_per_round)  # 0, or where the checkpoint was
            for _ in range(first_round, num_rounds):
                if physical_time >= next_eval:
                    log_eval()
                    next_eval += args.eval_every
                if args.checkpoint_every and physical_time >= next_checkpoint:
                    save_model(os.path.join(run_dir, "checkpoints", f"{physical_time:.1f}s.pt"))
                    next_checkpoint += args.checkpoint_every
                    save_state()
                noise_size, action_size, failures = torch.zeros((), device=device), torch.zeros((), device=device), 0
                for _ in range(args.steps_per_round):  # Alg. lines "for j = 1, nb_steps"
                    obs_tensor = torch.as_tensor(obs, dtype=torch.float32, device=device)
                    if args.normalize_obs:
                        normalizer.update(obs_tensor)
                    with torch.no_grad():  # a = clip(pi(s) + z), z the OU process (Sec. 4.2)
                        policy_action = actor(obs_tensor)
                        action = (policy_action + noise.step()).clamp(-1, 1)
                        noise_size += (action - policy_action).abs().mean()
                        action_size += policy_action.abs().mean()
                        action = action.cpu().numpy()
                    next_obs, reward, terminated, real_next_obs = env_step(envs, action, action_low, action_high)
                    failures += int(terminated.sum())
                    buffer.add(obs, action, reward, terminated, real_next_obs)
                    obs = next_obs
                physical_time += round_time
                env_steps += args.num_envs * args.steps_per_round
                stats = train_round(buffer.sample(args.updates_per_round, args.batch_size)).cpu()
                if not torch.isfinite(stats).all():
                    first = updates + int((~torch.isfinite(stats)).any(1).nonzero()[0])
                    sys.exit(f"error: non-finite loss at update {first} (physical time {physical_time:.1f} s)")
                updates += args.updates_per_round
                sps = env_steps / (time.time() - start)
                progress.update(task, completed=physical_time, last_eval=last_eval, sps=sps)
                round_stats = [noise_size / args.steps_per_round, action_size / args.steps_per_round,
                               torch.tensor(failures / round_time, device=device),
                               gradient_rms(optimizer, qf), gradient_rms(optimizer, actor)]  # fmt: skip
                window += torch.cat([stats.mean(0), torch.stack(round_stats).cpu()])
                window_rounds += 1
                if physical_time >= next_log:  # diagnostics.csv and W&B: the means over the rounds since the last log
                    means = (window / window_rounds).tolist()
                    diagnostics = dict(zip(DIAGNOSTICS, [*means, means[3] / means[0]], strict=True))
                    diagnostics_csv.writerow([f"{physical_time:.6f}", env_steps, updates,
                                              *(f"{mean:.6g}" for mean in diagnostics.values())])  # fmt: skip
                    diagnostics_file.flush()
                    window, window_rounds = torch.zeros_like(window), 0
                    if args.track:
                        updates_per_second = updates / (time.time() - start)
                        wandb.log({"physical_time": physical_time, **diagnostics, "charts/SPS": sps,
                                   "charts/updates_per_second": updates_per_second})  # fmt: skip
                    next_log += args.eval_every / 10
                if preemption.requested:
                    break
            if preemption.requested:  # SIGTERM: the state at the end of this round, to go on from with --resume
                save_state()
                progress.console.print(f"stopped by SIGTERM: checkpoint saved; go on with --resume {run_dir}",
                                       soft_wrap=True)  # fmt: skip
            else:
                if args.checkpoint_every:  # the state before the final evaluation: --resume can extend the run
                    save_state()
                elif os.path.exists(os.path.join(run_dir, CHECKPOINT)):  # a resumed run's old state: now stale
                    os.remove(os.path.join(run_dir, CHECKPOINT))
                log_eval(final=True)
                if args.checkpoint_every:
                    save_model(os.path.join(run_dir, "checkpoints", f"{physical_time:.1f}s.pt"))
                completed = True
        except KeyboardInterrupt:
            progress.console.print("interrupted: keeping what was logged")
    evals_file.close()
    diagnostics_file.close()
    if args.save_model:
        save_model(os.path.join(run_dir, "model.pt"), final_eval_envs)
    wall_time = time.time() - start
    checkpoint_path = os.path.join(run_dir, CHECKPOINT)
    write_run_info(completed=completed, physical_time=physical_time, env_steps=env_steps, updates=updates,
                   wall_time=wall_time, eval_wall_time=eval_seconds, final_scaled_return=last_eval,
                   stopped_by=None if completed else "SIGTERM" if preemption.requested else "Ctrl-C",
                   checkpoint=checkpoint_path if os.path.exists(checkpoint_path) else None)  # fmt: skip
    print(f"{run_name}: scaled return {last_eval:.2f} after {physical_time:g} physical s ({env_steps} env steps, "
          f"{updates} updates, {wall_time:.1f} s wall, {eval_seconds:.1f} s evaluating) -> {run_dir}")  # fmt: skip
    if args.track:
        wandb.finish()
