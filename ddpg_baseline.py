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
import math
import os
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from dt_wrappers import check_dt
from harness.args import RunArgs, require_positive
from harness.envs import make_vector_env
from harness.gpu import graphed
from harness.run import Run


# A None default below is the env's own, from the paper's per-environment settings in harness/settings.py
# (filled in by Run); --help prints them as a table above the arguments, the "table above".
@dataclass
class Args(RunArgs):  # RunArgs: the flags that run the experiment (--seed, --track, --resume, ...), harness/args.py
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment (part of the run name)"""
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
    """physical seconds each env steps per round, at every dt: --steps-per-round becomes round(this / dt);
    with updates_per_round / steps_per_round updates per step. None: --steps-per-round steps at any dt (the paper's)"""
    batch_size: int = 256
    """transitions per gradient step (paper: N)"""
    buffer_time: float | None = None
    """replay memory in physical seconds of interaction (summed over all training envs), the same at every dt;
    None: the env's default (table above)"""
    gamma: float = 0.8
    """discount per physical second; a step is discounted by gamma**dt"""
    learning_rate: float = 0.1
    """alpha_Q: the critic learning rate is alpha * dt0 (alpha * dt with --scaled)"""
    policy_learning_rate: float | None = None
    """alpha_pi: the policy learning rate is alpha_pi * dt0 (alpha_pi * dt with --scaled);
    None: --learning-rate unscaled (the appendix's alpha~^Q dt0), the env's default with --scaled (table above)"""
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

    def __post_init__(self):
        # Appendix, unscaled variant: "alpha^pi = alpha~^Q dt0", the critic's alpha for the actor too (the authors'
        # code agrees at dt0; issue 84). The scaled variant's alpha~^pi is the env's (harness/settings.py).
        if self.policy_learning_rate is None and not self.scaled:
            self.policy_learning_rate = self.learning_rate


def check_args(args):
    """Refuse values of this script's own flags that cannot give a meaningful run (the harness checks the rest)."""
    check_dt(args.ref_dt)
    if not 0 <= args.tau < 1:
        raise ValueError(f"--tau must be in [0, 1), got {args.tau}")
    require_positive(args, "policy_learning_rate")


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
    """Ornstein-Uhlenbeck process dz = -kappa z dt + sigma dB (the paper's Sec. 4.2), one per env,
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

    def state_dict(self):
        return {"z": self.z}

    def load_state_dict(self, state):
        self.z.copy_(state["z"])


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
    """Mean scaled return of one deterministic episode in each evaluation env, `actor` a copy on
    the CPU (harness/evaluations.py)."""
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


if __name__ == "__main__":
    # Arguments checked, run folder, W&B, seeds and evaluation envs: harness/run.py.
    run = Run(Args, description=__doc__, script_file=__file__, action_space=gym.spaces.Box, check_args=check_args)
    args, dt, device = run.args, run.dt, run.device
    # run.probe: an env made as the training envs are, to read their spaces (harness/run.py)
    obs_dim, action_dim = run.probe.observation_space.shape[0], run.probe.action_space.shape[0]
    action_low, action_high = run.probe.action_space.low, run.probe.action_space.high
    normalizer = Normalizer(obs_dim).to(device)
    qf = QNetwork(obs_dim, action_dim, args.hidden_size, normalizer).to(device)
    actor = Actor(obs_dim, action_dim, args.hidden_size, normalizer).to(device)
    networks = {"normalizer": normalizer, "qf": qf, "actor": actor}  # what model.pt keeps

    def act(obs):  # the deterministic policy on one observation, for the videos
        with torch.no_grad():
            action = actor(torch.as_tensor(obs[None], dtype=torch.float32, device=device))[0].cpu().numpy()
        return action_low + (action + 1) / 2 * (action_high - action_low)

    def evaluate_policy(networks):  # the last, the policy, alone: its copy on the CPU when due (harness/evaluations.py)
        return evaluate(networks["actor"], run.eval_envs, action_low, action_high)

    run.evaluate_saved_model(networks, evaluate=evaluate_policy, act=act)  # --eval-model: evaluates, then exits
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
    envs = make_vector_env(args, dt, args.num_envs, args.seed, args.env_workers)  # --env-workers: in K processes
    # run.replay_rows: --buffer-time in transitions at this dt, at most what the run collects
    buffer = ReplayBuffer(run.replay_rows, obs_dim, action_dim, device)
    noise = OUNoise((args.num_envs, action_dim), args.ou_kappa, args.ou_sigma, dt, device)

    def train_round(batches):  # Alg. lines "for k = 1, nb_learn": one gradient step on each batch
        return torch.stack([update(batch=[field[k] for field in batches], qf=qf, target_qf=target_qf, actor=actor,
                               target_actor=target_actor, optimizer=optimizer, dt=dt, gamma=args.gamma,
                               reward_scale=time_scale, tau=args.tau)
                            for k in range(args.updates_per_round)])  # fmt: skip

    train_round = graphed(train_round, device)  # on a GPU, the round launched at once as one CUDA graph
    obs, _ = envs.reset(seed=args.seed)
    # What --resume restores; harness/loop.py looks the optimizer up under "optimizer" to save it in model.pt.
    state = networks | targets | {"optimizer": optimizer, "replay": buffer, "noise": noise}
    # Returns the observations to go on from: on a --resume, the checkpoint's in place of the reset's.
    obs = run.start(envs, obs, state=state, networks=networks, evaluate=evaluate_policy, act=act,
                    diagnostics=DIAGNOSTICS)  # fmt: skip
    with run:  # Ctrl-C stops after the evaluation in flight (twice: at once); SIGTERM after the round with a checkpoint
        for _ in run.rounds():  # evaluations and checkpoints fall between rounds, at multiples of their intervals
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
            stats = train_round(buffer.sample(args.updates_per_round, args.batch_size))
            round_stats = [noise_size / args.steps_per_round, action_size / args.steps_per_round,
                           torch.tensor(failures / run.round_time, device=device),  # round_time: one round, envs summed
                           gradient_rms(optimizer, qf), gradient_rms(optimizer, actor)]  # fmt: skip
            run.end_round(stats=stats, round_stats=round_stats, obs=obs)  # diagnostics.csv, W&B; obs: checkpoints
