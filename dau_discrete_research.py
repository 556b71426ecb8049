"""Deep Advantage Updating (DAU) for discrete actions, with the research options beyond the paper, free to combine.

dau_discrete.py (the paper's Alg. 1) plus the options of the studies in
docs/research/, each off by default; with every option off it computes what dau_discrete.py computes, to the bit (a
test), and `diff dau_discrete.py dau_discrete_research.py` shows exactly the options. None is recommended: each study's
page gives its verdict under the rule of docs/benchmarks.md (no worse than the paper's DAU at every dt, better at some).

- Exploration and V's level (docs/research/exploration.md, value_level.md): --exploration ou-scaled (the OU noise
  times the advantages' running spread), --value-update greedy|exploring (V's target without -dt A) and
  --value-learning-rate (alpha_V apart from alpha_A).
- TD noise that grows like 1 / dt (docs/research/td_noise.md): --learning-rate-reference-dt (the learning rates
  alpha * sqrt(dt DT0), the paper's Discussion on RMSprop), --terminal-rows (more rows per batch from the terminal
  transitions, stratified: the same expected update) and --weight-decay (decoupled, as AdamW).
- Where an episode ends (docs/research/failure_boundary.md, horizon.md): --advantage-without-terminal-rows (a
  terminal row's TD error is V's O(1) jump), --advantage-rate-clip c (A's TD rate td / dt clipped to [-c, c] value/s,
  as DQN clips its TD error) and --value-horizon H (V's target over round(H / dt) steps of its env, cut at an
  episode's end or a noise-changed action, as Watkins' Q(lambda); a row's flag is set when it is written, so its
  fixed point is the value of the greedy actions of the policies that wrote the memory, not of today's).
- The authors' code (docs/research/authors_code.md, "What differs from ours"): --buffer-transitions N, a ring of N
  transitions at every dt (the paper's appendix and their code: 1000000), in place of --buffer-time's physical
  seconds; --squared-loss (their mean((Q - target)^2), without Alg. 1's 1 / dt), --truncation-as-termination (a
  time limit's target r dt), --first-round-steps F (their first updates after 19 vector steps) and --zero-last-bias.

    python dau_discrete_research.py --dt 0.0005 --value-horizon 0.01
    python dau_discrete_research.py --dt 0.002 --exploration ou-scaled --terminal-rows 64

Writes runs/<run_name>/evals.csv (scaled return vs physical time); --track logs to W&B.
"""

import math
import os
from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

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
    env_id: str = "CartPole-v1"
    """a discrete-action environment supported by dt_wrappers"""
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
    buffer_transitions: int | None = None
    """N: a replay memory of N transitions at every dt, N dt seconds, in place of --buffer-time;
    the appendix's cyclic buffer and the authors' code: N = 1000000; None: --buffer-time"""
    squared_loss: bool = False
    """the authors' loss mean((Q - target)^2), gradients 2 td dV and 2 td dt dA (Alg. 1's times 2 dt and 2 dt^2);
    False: Alg. 1's td / dt dV and td / dt dA"""
    truncation_as_termination: bool = False
    """a time-limit truncation ends the return as a termination does: its target r dt (the authors' code);
    False: r dt + gamma^dt V(s'), s' the episode's last state (Alg. 1's for an episode the limit cuts)"""
    first_round_steps: int | None = None
    """F: the first updates after F vector steps, then every --steps-per-round, the same rounds and budget;
    the authors' code: 19 (their updates after vector steps 19, 29, ...); None: after --steps-per-round (Alg. 1)"""
    zero_last_bias: bool = False
    """V's and A's last layers' biases start at 0 (the authors' code), their weights as without; False: PyTorch's"""
    gamma: float = 0.8
    """discount per physical second; a step is discounted by gamma**dt"""
    learning_rate: float = 0.1
    """alpha_A, and alpha_V unless --value-learning-rate: the learning rates are alpha * dt"""
    value_learning_rate: float | None = None
    """alpha_V, V's learning rate alpha_V * dt (Alg. 1 has both; the paper sets them equal); None: --learning-rate"""
    learning_rate_reference_dt: float | None = None
    """DT0: the learning rates alpha * sqrt(dt * DT0), alpha * dt at dt = DT0 (beyond the paper);
    its Discussion's rule for TD errors whose variance grows like 1 / dt. None: alpha * dt (Alg. 1)"""
    terminal_rows: int = 0
    """N_T: a batch is --batch-size uniform rows plus N_T rows drawn from the terminal transitions (beyond the paper);
    stratified so that the expected update is Alg. 1's. 0: uniform rows only (Alg. 1)"""
    weight_decay: float = 0.0
    """lambda: after each step the weights shrink by 1 - lr * lambda (beyond the paper);
    outside RMSprop's normalisation (decoupled, as AdamW). 0: none (Alg. 1)"""
    advantage_without_terminal_rows: bool = False
    """A's step leaves out terminal rows, V's keeps them (beyond the paper: their td is V's jump); False: Alg. 1"""
    value_horizon: float | None = None
    """H: V's target over the next round(H / dt) steps of its env (at least one), one physical horizon at any dt;
    cut at an episode's end or a non-greedy action (beyond the paper). None: one step (Alg. 1)"""
    advantage_rate_clip: float | None = None
    """c: A's step takes clip(td / dt, -c, c), c in value/s at every dt, V's not (beyond the paper); None: Alg. 1"""
    exploration: Literal["ou", "epsilon", "ou-scaled"] = "ou"
    """ou: argmax of the advantages plus an OU process (Sec. 4.2); epsilon: epsilon-greedy (collapses as dt -> 0);
    ou-scaled: the OU noise times the advantages' running spread over actions (beyond the paper)"""
    epsilon: float = 0.1
    """probability of a uniformly random action per step, with --exploration epsilon"""
    ou_kappa: float = 7.5
    """stiffness of the Ornstein-Uhlenbeck exploration noise (per second)"""
    ou_sigma: float = 1.5
    """scale of the Ornstein-Uhlenbeck exploration noise (per sqrt(second))"""
    normalize_obs: bool | None = None
    """normalise observations by their running mean and std (True or False); None: the env's default (table above)"""
    hidden_size: int = 256
    """width of the two hidden layers"""
    value_update: Literal["all", "greedy", "exploring"] = "all"
    """all: V learns from every transition (Alg. 1). Beyond the paper, V's target without -dt A:
    greedy: only from the transitions whose action is argmax A now (A = 0 there);
    exploring: from every transition, with r dt + gamma^dt V(s') as target (the exploring policy's value)"""


def check_args(args):
    """Refuse values of this script's own flags that cannot give a meaningful run (the harness checks the rest)."""
    if not 0 <= args.epsilon <= 1:
        raise ValueError(f"--epsilon must be in [0, 1], got {args.epsilon}")
    options_on = ("value_horizon", "advantage_rate_clip", "value_learning_rate", "learning_rate_reference_dt",
                  "first_round_steps")  # fmt: skip
    require_positive(args, *[name for name in options_on if getattr(args, name) is not None])
    if args.buffer_transitions is not None and args.buffer_transitions < max(args.batch_size, args.num_envs):
        raise ValueError(
            f"--buffer-transitions must hold a batch and a step of every env (at least "
            f"{max(args.batch_size, args.num_envs)}), got {args.buffer_transitions}"
        )
    if args.terminal_rows < 0 or not 0 <= args.weight_decay < math.inf:
        raise ValueError(
            f"--terminal-rows and --weight-decay must be >= 0, got {args.terminal_rows}, {args.weight_decay}"
        )
    return 1 if args.value_horizon else 0  # floats a replay row holds beyond (s, a, r, d, s'): `follows`


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


class Value(nn.Module):
    """V_theta(s)."""

    def __init__(self, obs_dim, hidden_size, normalizer):
        super().__init__()
        self.normalizer, self.net = normalizer, mlp(obs_dim, 1, hidden_size)

    def forward(self, obs):
        return self.net(self.normalizer(obs)).squeeze(-1)


class Advantage(nn.Module):
    """Abar_psi(s, .) for all actions; the advantage is A(s, a) = Abar(s, a) - max_a' Abar(s, a') (Alg. 1)."""

    def __init__(self, obs_dim, num_actions, hidden_size, normalizer):
        super().__init__()
        self.normalizer, self.net = normalizer, mlp(obs_dim, num_actions, hidden_size)

    def forward(self, obs):
        return self.net(self.normalizer(obs))


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


class RunningSpread:
    """--exploration ou-scaled (beyond the paper): the RMS over envs and actions of Abar(s, a) - mean_a' Abar(s, a'),
    an exponential average over physical time with time constant 1 / kappa (the noise's correlation time), its
    weights e^(-kappa t) normalised by their sum (so from the first step on). The noise times this has the same law
    at every dt, and argmax(A + spread z) is the same when A (its last ~1 / kappa seconds) is multiplied by any c > 0:
    A's drifting scale cannot end exploration."""

    def __init__(self, kappa, dt, device):
        self.decay = math.exp(-kappa * dt)
        self.mean_square, self.weight = torch.zeros((), device=device), torch.zeros((), device=device)

    def update(self, values):
        deviation = values - values.mean(-1, keepdim=True)
        self.mean_square.mul_(self.decay).add_((1 - self.decay) * deviation.pow(2).mean())
        self.weight.mul_(self.decay).add_(1 - self.decay)
        return (self.mean_square / self.weight).sqrt()

    def state_dict(self):
        return {"mean_square": self.mean_square, "weight": self.weight}

    def load_state_dict(self, state):
        self.mean_square.copy_(state["mean_square"])
        self.weight.copy_(state["weight"])


class ReplayBuffer:
    """Ring buffer of (s, a, r, terminated, s') on the training device. With --value-horizon (`env_rows`: each add
    writes one row per env, so an env's next row is env_rows further on) a row also holds whether it continues its
    env's previous row's return (`follows`), and a sampled row brings what its env's next rows give V's target."""

    def __init__(self, capacity, obs_dim, device, env_rows=None):
        self.capacity, self.size, self.position = capacity, 0, 0
        # torch.empty, which deterministic mode (on the CPU) fills with NaN: the memory is all committed here, and
        # a row read before it is written would be NaN, not a silent zero. Only filled rows are ever sampled.
        self.fields = [torch.empty((capacity, dim), device=device) for dim in (obs_dim, 1, 1, 1, obs_dim)]
        self.env_rows = env_rows
        if env_rows:  # --value-horizon: one float more per row
            self.fields.append(torch.empty((capacity, 1), device=device))

    def add(self, *transition):
        rows = torch.arange(self.position, self.position + len(transition[0])) % self.capacity
        for field, values in zip(self.fields, transition, strict=True):
            field[rows] = torch.as_tensor(values, dtype=torch.float32, device=field.device).reshape(len(rows), -1)
        self.position = (self.position + len(rows)) % self.capacity
        self.size = min(self.size + len(rows), self.capacity)

    def follows(self, obs, greedy=True):
        """--value-horizon: whether each env's row about to be added continues its previous row's return: the same
        episode (that row's s' is this s: no termination or truncation between) and a greedy action (`greedy`)."""
        if self.size < len(obs):  # the first rows follow none
            return torch.zeros(len(obs), dtype=torch.bool, device=obs.device)
        previous = torch.arange(self.position - len(obs), self.position, device=obs.device) % self.capacity
        return greedy & (self.fields[4][previous] == obs).all(-1)

    def rows_ahead(self, index, steps):
        """--value-horizon: each sampled row's env's next steps - 1 rows, reached while written after it and each
        following the one before: their rewards (0 where not reached), how many are reached, the last reached row's
        d and s' (or the row's own)."""
        ahead = self.env_rows * torch.arange(1, steps, device=index.device)
        rows = (index[..., None] + ahead) % self.capacity
        written = ((self.position - 1 - index) % self.capacity)[..., None] >= ahead  # not past the newest row
        reached = torch.where(written, self.fields[5][rows, 0], 0).cumprod(-1)
        last = (index + self.env_rows * reached.sum(-1).long()) % self.capacity
        rewards = torch.where(reached > 0, self.fields[2][rows, 0], 0)
        return rewards, reached.sum(-1), self.fields[3][last, 0], self.fields[4][last]

    def sample(self, num_batches, batch_size, terminal_rows=0, steps=1):
        """`num_batches` batches in one gather: (obs, action, reward, terminated, next_obs); with --terminal-rows N_T,
        N_T rows more from the terminal transitions and each row's weight in the batch's mean (stratified_weights);
        with --value-horizon (`steps` n), what each row's next n - 1 rows of its env give V's target (rows_ahead)."""
        index = torch.randint(self.size, (num_batches, batch_size), device=self.fields[0].device)
        if terminal_rows:
            terminal = self.fields[3][: self.size, 0].nonzero().squeeze(-1)  # the buffer's terminal rows
            pick = torch.randint(max(len(terminal), 1), (num_batches, terminal_rows), device=index.device)
            index = torch.cat([index, terminal[pick] if len(terminal) else pick], 1)  # (none yet: weight 0 below)
        obs, action, reward, terminated, next_obs = (field[index] for field in self.fields[:5])
        batch = [obs, action.long(), reward.squeeze(-1), terminated.squeeze(-1), next_obs]
        if terminal_rows:
            batch.append(stratified_weights(batch[3], batch_size, len(terminal), self.size))
        return batch if self.env_rows is None else [*batch, *self.rows_ahead(index, steps)]

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


def stratified_weights(terminated, batch_size, terminal_count, size):
    """--terminal-rows: each row's weight in the batch's mean. Over a buffer of `size` rows, `terminal_count` of them
    terminal (share d), the mean of f is mean((1 - d_i) f) over uniform rows plus d times the mean of f over terminal
    rows: the first `batch_size` rows (uniform) weigh (1 - d_i) / batch_size, the others d / N_T. Same expectation as
    the uniform mean (a test), and the O(1) terminal jumps' variance falls from about d / batch_size to d^2 / N_T."""
    uniform, terminal = terminated[:, :batch_size], terminated[:, batch_size:]
    share = terminal_count / size
    return torch.cat([(1 - uniform) / batch_size, torch.full_like(terminal, share / terminal.shape[1])], 1)


# What update() returns, per gradient step: the TD loss mean(td^2), mean V, mean |A|, the terminal transitions' part
# of the TD loss mean(d td^2), and the share of terminal transitions d in the batch.
TRAINING_STATS = ("losses/td", "values/v", "values/abs_advantage", "losses/td_terminal", "batch/terminal_share")
# Per round: how often the OU noise changed the greedy action, terminations per physical second of interaction,
# and RMSprop's denominators, sqrt of its running mean of squared gradients over each network's parameters.
ROUND_STATS = ("exploration/changed_action", "training/failures_per_second", "optimizer/grad_rms_value",
               "optimizer/grad_rms_advantage")  # fmt: skip
# runs/<run_name>/diagnostics.csv, every --eval-every / 10 physical seconds: the means over the rounds since the
# last row, and the terminal transitions' share of the squared TD error (losses/td_terminal / losses/td).
DIAGNOSTICS = (*TRAINING_STATS, *ROUND_STATS, "batch/terminal_td_share")


def horizon_target(reward, rewards_ahead, steps_ahead, terminated, next_obs, value, dt, gamma):
    """--value-horizon: V's target over the m = 1 + steps_ahead steps reached (rows_ahead), in physical time as
    Alg. 1's one-step target: sum_k gamma^(k dt) r_k dt + gamma^(m dt) (1 - d) V(s_m); at m = 1 Alg. 1's to the bit."""
    discounts = gamma ** (dt * torch.arange(1, rewards_ahead.shape[-1] + 1, device=reward.device))
    returns = reward + (discounts * rewards_ahead).sum(-1)
    return returns * dt + (1 - terminated) * gamma**dt * gamma ** (dt * steps_ahead) * value(next_obs)


def batch_mean(values, weight):
    """The batch's mean; with --terminal-rows the stratified weights' sum, whose expectation is the same."""
    return values.mean() if weight is None else (values * weight).sum()


def update(batch, value, advantage, optimizer, dt, gamma, options):
    """One gradient step of Alg. 1 (discrete DAU), with the research options of `options` (an Args; with every option
    off, Alg. 1's step to the bit, a test). Returns TRAINING_STATS, no host sync."""
    obs, action, reward, terminated, next_obs, *extra = batch
    weight = extra.pop(0) if options.terminal_rows else None  # --terminal-rows: each row's weight in the mean
    advantages = advantage(obs)
    state_value = value(obs)
    advantage_taken = advantages.gather(1, action).squeeze(1) - advantages.max(1).values  # Abar(s,a) - max Abar(s,.)
    q = state_value + dt * advantage_taken  # Q^i = V(s) + dt A(s, a)
    with torch.no_grad():  # no target network: DAU bootstraps on V itself
        target = reward * dt + (1 - terminated) * gamma**dt * value(next_obs)  # Q~^i = r dt + (1-d) gamma^dt V(s')
        value_target = horizon_target(reward, *extra, value, dt, gamma) if extra else target  # --value-horizon's
    td = q - target
    # With td/dt detached, the gradient of mean(td/dt (V + A)) is the paper's Delta's (one-step targets):
    # d/dtheta = mean(td/dt dV/dtheta) = Delta-theta and d/dpsi = mean(td/dt dA/dpsi) = Delta-psi. (The
    # official code minimises (Q - target)^2, without the 1/dt: factors of order dt that RMSprop cancels only
    # where its eps is small against the gradients, not at fine dt; --squared-loss's.)
    # Beyond the paper: V's TD error over the horizon, without -dt A (exploring), or from greedy rows only; A's
    # without the terminal rows, (1 - d) td, and its rate clipped. Options off: td / dt for both, Alg. 1's gradients.
    value_td = q - value_target
    if options.value_update == "exploring":  # V(s) - r dt - gamma^dt V(s'): the exploring policy's value
        value_td = value_td - dt * advantage_taken
    value_term = value_td.detach() / dt * state_value
    if options.value_update == "greedy":  # V's step from the transitions where A(s, a) = 0 only
        value_term = value_term * (advantage_taken.detach() == 0)
    advantage_rate = ((1 - terminated) * td if options.advantage_without_terminal_rows else td).detach() / dt
    if options.advantage_rate_clip is not None:  # V's rate is not clipped: its jump at a failure is what V must learn
        advantage_rate = advantage_rate.clamp(-options.advantage_rate_clip, options.advantage_rate_clip)
    if options.squared_loss:  # the authors' mean((Q - target)^2), its gradients 2 td dV and 2 td dt dA (their
        # code/critics/off_policy/advantage.py:86-94 at 8f3c655; authors_code.md, row "the loss's scale")
        value_term, advantage_rate = 2 * dt * value_term, 2 * dt**2 * advantage_rate
    critic_objective = batch_mean(value_term + advantage_rate * advantage_taken, weight)
    optimizer.zero_grad()
    critic_objective.backward()
    optimizer.step()  # theta and psi both updated from the same batch and parameters
    if options.weight_decay:  # decoupled: w <- w (1 - lr lambda), which RMSprop's denominators do not divide
        with torch.no_grad():
            for group in optimizer.param_groups:
                for parameter in group["params"]:
                    parameter.mul_(1 - group["lr"] * options.weight_decay)
    return torch.stack([batch_mean(td**2, weight), batch_mean(state_value, weight),
                        batch_mean(advantage_taken.abs(), weight), batch_mean(terminated * td**2, weight),
                        batch_mean(terminated, weight)]).detach()  # fmt: skip


def gradient_rms(optimizer, network):
    """sqrt of RMSprop's running mean of squared gradients, over all of a network's parameters (after a step)."""
    squares = [optimizer.state[parameter]["square_avg"].flatten() for parameter in network.parameters()]
    return torch.cat(squares).mean().sqrt()


def explore(values, noise, exploration, epsilon, noise_scale=None):
    """pi_explore: argmax_a (values[a] + z[a]), z an OU process with one component per action (Sec. 4.2), times
    noise_scale if given (--exploration ou-scaled); or epsilon-greedy, which tends to a deterministic policy as
    dt -> 0 (Theorem on epsilon-greedy)."""
    if exploration == "ou":
        return (values + noise.step()).argmax(-1)
    if exploration == "ou-scaled":
        return (values + noise_scale * noise.step()).argmax(-1)
    random_action = torch.randint_like(values[..., 0], values.shape[-1], dtype=torch.long)
    explore_now = torch.rand_like(values[..., 0]) < epsilon
    return torch.where(explore_now, random_action, values.argmax(-1))


def env_step(envs, action):
    """Step the envs. Returns the next observations, the rewards, the termination flags and the
    transitions' true next observations: at a time-limit truncation the last observation of the
    episode, so that the update bootstraps through it; and the truncation flags.
    (The official code treats truncation as termination, --truncation-as-termination; here only termination stops
    bootstrapping.)"""
    next_obs, reward, terminated, truncated, infos = envs.step(action)
    real_next_obs = next_obs.copy()
    if "_final_obs" in infos:
        real_next_obs[infos["_final_obs"]] = np.stack(infos["final_obs"][infos["_final_obs"]])
    return next_obs, reward, terminated, real_next_obs, truncated


def evaluate(advantage, eval_envs):
    """Mean scaled return of one greedy episode (argmax_a A(s, a)) in each evaluation env, `advantage` a copy on
    the CPU (harness/evaluations.py)."""
    obs, _ = eval_envs.reset()
    returns = np.full(eval_envs.num_envs, np.nan)
    while np.isnan(returns).any():
        with torch.no_grad():
            action = advantage(torch.as_tensor(obs, dtype=torch.float32)).argmax(-1).numpy()
        obs, _, _, _, infos = eval_envs.step(action)
        if "final_info" in infos:
            finished = infos["final_info"]["_episode"] & np.isnan(returns)
            returns[finished] = infos["final_info"]["episode"]["r"][finished]
    return float(returns.mean())


if __name__ == "__main__":
    # Arguments checked, run folder, W&B, seeds and evaluation envs: harness/run.py.
    run = Run(Args, description=__doc__, script_file=__file__, action_space=gym.spaces.Discrete, check_args=check_args)
    args, dt, device = run.args, run.dt, run.device
    # run.probe: an env made as the training envs are, to read their spaces (harness/run.py)
    obs_dim, num_actions = run.probe.observation_space.shape[0], int(run.probe.action_space.n)
    normalizer = Normalizer(obs_dim).to(device)
    value = Value(obs_dim, args.hidden_size, normalizer).to(device)
    advantage = Advantage(obs_dim, num_actions, args.hidden_size, normalizer).to(device)
    networks = {"normalizer": normalizer, "value": value, "advantage": advantage}  # what model.pt keeps
    if args.zero_last_bias:  # after every draw: the same weights (their code/models.py:29-30 at 8f3c655;
        for network in (value, advantage):  # authors_code.md, row "the last layer's bias")
            nn.init.zeros_(network.net[-1].bias)

    def act(obs):  # the deterministic policy on one observation, for the videos
        with torch.no_grad():
            return advantage(torch.as_tensor(obs[None], dtype=torch.float32, device=device))[0].argmax().item()

    def evaluate_policy(networks):  # the last, the policy, alone: its copy on the CPU when due (harness/evaluations.py)
        return evaluate(networks["advantage"], run.eval_envs)

    run.evaluate_saved_model(networks, evaluate=evaluate_policy, act=act)  # --eval-model: evaluates, then exits
    targets = {}  # DAU has no target networks: it bootstraps on V itself
    # RMSprop without momentum, learning rates alpha * dt and smoothing 1 - dt (Alg. 1); with a reference step DT0,
    # alpha * dt * sqrt(DT0 / dt) = alpha * sqrt(dt DT0): RMSprop already multiplies the steps by O(sqrt dt) when the
    # TD error's variance grows like 1 / dt (paper, Discussion, "Near-continuous RL and RMSProp").
    reference_scale = math.sqrt((args.learning_rate_reference_dt or dt) / dt)  # (DT0 = dt: 1.0, Alg. 1's to the bit)
    groups = [{"params": [*value.parameters(), *advantage.parameters()],
               "lr": args.learning_rate * dt * reference_scale}]  # fmt: skip
    if args.value_learning_rate is not None:  # alpha_V apart from alpha_A
        groups = [{"params": value.parameters(), "lr": args.value_learning_rate * dt * reference_scale},
                  {"params": advantage.parameters(), "lr": args.learning_rate * dt * reference_scale}]  # fmt: skip
    optimizer = torch.optim.RMSprop(
        groups,
        alpha=1 - dt, momentum=0, foreach=True,  # foreach: the same arithmetic as the per-tensor loop, faster
        capturable=device.type == "cuda",  # its step counts on the GPU, as a CUDA graph needs; the same arithmetic
    )  # fmt: skip
    envs = make_vector_env(args, dt, args.num_envs, args.seed, args.env_workers)  # --env-workers: in K processes
    # run.replay_rows: --buffer-time in transitions at this dt (--buffer-transitions: a ring of N transitions, N dt
    # seconds, at every dt), at most what the run collects
    buffer = ReplayBuffer(run.replay_rows, obs_dim, device, args.num_envs if args.value_horizon else None)
    value_horizon_steps = max(1, round(args.value_horizon / dt)) if args.value_horizon else 1  # its n, >= 1
    noise = OUNoise((args.num_envs, num_actions), args.ou_kappa, args.ou_sigma, dt, device)
    spread = RunningSpread(args.ou_kappa, dt, device)  # --exploration ou-scaled's measure of A's scale

    def train_round(batches):  # Alg. lines "for k = 1, nb_learn": one gradient step on each batch
        return torch.stack([update(batch=[field[k] for field in batches], value=value, advantage=advantage,
                               optimizer=optimizer, dt=dt, gamma=args.gamma, options=args)
                            for k in range(args.updates_per_round)])  # fmt: skip

    train_round = graphed(train_round, device)  # on a GPU, the round launched at once as one CUDA graph
    # --first-round-steps F: the updates after vector steps F, F + steps_per_round, ...: after this step of a round,
    # from the round of step F on (their code/agents/off_policy/offline_agent.py:49, 80, 91 at 8f3c655;
    # authors_code.md, row "when the updates come")
    first_round_steps = args.first_round_steps or args.steps_per_round
    learning_step = (first_round_steps - 1) % args.steps_per_round + 1
    obs, _ = envs.reset(seed=args.seed)
    # What --resume restores; harness/loop.py looks the optimizer up under "optimizer" to save it in model.pt.
    state = networks | targets | {"optimizer": optimizer, "replay": buffer, "noise": noise}
    if args.exploration == "ou-scaled":
        state["spread"] = spread
    # Returns the observations to go on from: on a --resume, the checkpoint's in place of the reset's.
    obs = run.start(envs, obs, state=state, networks=networks, evaluate=evaluate_policy, act=act,
                    diagnostics=DIAGNOSTICS)  # fmt: skip
    run.loop.clock.rounds_without_updates = (first_round_steps - 1) // args.steps_per_round  # the updates it counts
    with run:  # Ctrl-C stops after the evaluation in flight (twice: at once); SIGTERM after the round with a checkpoint
        for _ in run.rounds():  # evaluations and checkpoints fall between rounds, at multiples of their intervals
            changed_action, failures = torch.zeros((), device=device), 0  # this round's, for diagnostics.csv
            learns = run.loop.clock.rounds_done >= run.loop.clock.rounds_without_updates  # (Alg. 1: every round)
            stats, round_stats = torch.empty(0, len(TRAINING_STATS)), []  # a round without updates: out of the logs
            for step in range(1, args.steps_per_round + 1):  # Alg. lines "for j = 1, nb_steps"
                obs_tensor = torch.as_tensor(obs, dtype=torch.float32, device=device)
                if args.normalize_obs:
                    normalizer.update(obs_tensor)
                with torch.no_grad():  # a = argmax_a (A(s, a) + z[a]) (Sec. 4.2)
                    advantages = advantage(obs_tensor)
                    noise_scale = spread.update(advantages) if args.exploration == "ou-scaled" else None
                    action = explore(advantages, noise, args.exploration, args.epsilon, noise_scale)
                    changed_action += (action != advantages.argmax(-1)).float().mean()
                    # --value-horizon: whether each row continues its env's previous row's return (a greedy action)
                    continues = ([buffer.follows(obs_tensor, action == advantages.argmax(-1))]
                                 if args.value_horizon else [])  # fmt: skip
                    action = action.cpu().numpy()
                next_obs, reward, terminated, real_next_obs, truncated = env_step(envs, action)
                failures += int(terminated.sum())
                # --truncation-as-termination: d = 1 at a time limit too, the target r dt (their code/envs/wrappers.py:
                # 55-59, code/critics/off_policy/advantage.py:80 at 8f3c655; authors_code.md, row "time-limit
                # truncation"); s' the episode's last state, which d masks out, as theirs masks the reset's
                done = terminated | truncated if args.truncation_as_termination else terminated
                buffer.add(obs, action, reward, done, real_next_obs, *continues)
                obs = next_obs
                if step == learning_step and learns:  # Alg. lines "for k = 1, nb_learn" (at the round's end)
                    batches = buffer.sample(args.updates_per_round, args.batch_size, args.terminal_rows,
                                            value_horizon_steps)  # fmt: skip
                    stats = train_round(batches)
            if learns:
                round_stats = [changed_action / args.steps_per_round,
                               torch.tensor(failures / run.round_time, device=device),  # round_time: envs summed
                               gradient_rms(optimizer, value), gradient_rms(optimizer, advantage)]  # fmt: skip
            run.end_round(stats=stats, round_stats=round_stats, obs=obs)  # diagnostics.csv, W&B; obs: checkpoints
