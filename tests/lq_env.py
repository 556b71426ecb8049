"""A linear-quadratic test bed whose value and advantage functions are known exactly.

Continuous-time dynamics ds/dt = alpha s + beta a (diagonal, `dim` independent copies),
reward rate -(q |s|^2 + r |a|^2), physical discount gamma per second. The env integrates
exactly over its step `dt` with the action held (the paper's near-continuous MDP), and has
a writable `dt`, so dt_wrappers supports it like Pendulum:

    python dau_continuous.py --env-id tests.lq_env:LinearQuadratic-v0 --dt 0.01

Closed forms, for a linear policy a = -k s (all per coordinate; with lam = alpha - beta k
the closed-loop rate, and ln = log(gamma)):
- continuous time: V(s) = -P s^2 with P = (q + r k^2) / (-(2 lam + ln)) (needs 2 lam + ln < 0);
- the paper's advantage (supplementary theorem): A(s, a) = r(s, a) + V'(s) F(s, a) + ln V(s)
  = -q s^2 - r a^2 - 2 P s (alpha s + beta a) - ln P s^2, which vanishes at a = -k s;
- time step dt: s' = E s + B a with E = exp(alpha dt), B = (E - 1) beta / alpha; under the
  policy s' = rho s with rho = E - B k, so V_dt(s) = -P_dt s^2 with
  P_dt = (q + r k^2) dt / (1 - gamma^dt rho^2), and
  Q_dt(s, a) = -(q s^2 + r a^2) dt - gamma^dt P_dt (E s + B a)^2;
- optimal gain: k* = P* beta / r, P* the positive root of (beta^2 / r) P^2 - (2 alpha + ln) P - q = 0
  (the discounted scalar Riccati equation).
"""

import math

import gymnasium as gym
import numpy as np

ALPHA, BETA, Q_COST, R_COST, GAMMA = -0.5, 1.0, 1.0, 0.2, 0.8
NATIVE_DT, EPISODE_SECONDS, ACTION_BOUND, RESET_RANGE = 0.05, 5.0, 5.0, 2.0


def transition(dt, alpha=ALPHA, beta=BETA):
    """(E, B) such that s' = E s + B a when a is held for dt."""
    growth = math.exp(alpha * dt)
    return growth, (growth - 1) * beta / alpha


def value_coefficient(k, gamma=GAMMA, alpha=ALPHA, beta=BETA, q=Q_COST, r=R_COST):
    """P with V(s) = -P s^2 for the policy a = -k s, in continuous time."""
    rate = 2 * (alpha - beta * k) + math.log(gamma)
    if rate >= 0:
        raise ValueError(f"the gain {k} does not stabilise the discounted system")
    return (q + r * k**2) / -rate


def advantage(s, a, k, gamma=GAMMA, alpha=ALPHA, beta=BETA, q=Q_COST, r=R_COST):
    """A(s, a) = r(s, a) + V'(s) F(s, a) + log(gamma) V(s) for the policy a = -k s."""
    p = value_coefficient(k, gamma, alpha, beta, q, r)
    return -q * s**2 - r * a**2 - 2 * p * s * (alpha * s + beta * a) - math.log(gamma) * p * s**2


def discrete_value_coefficient(k, dt, gamma=GAMMA, alpha=ALPHA, beta=BETA, q=Q_COST, r=R_COST):
    """P_dt with V_dt(s) = -P_dt s^2: the exact value of the policy a = -k s held for dt."""
    growth, gain = transition(dt, alpha, beta)
    closed_loop = growth - gain * k
    return (q + r * k**2) * dt / (1 - gamma**dt * closed_loop**2)


def discrete_q(s, a, k, dt, gamma=GAMMA, alpha=ALPHA, beta=BETA, q=Q_COST, r=R_COST):
    """Q_dt(s, a): hold a for dt, then follow a = -k s."""
    growth, gain = transition(dt, alpha, beta)
    p_dt = discrete_value_coefficient(k, dt, gamma, alpha, beta, q, r)
    return -(q * s**2 + r * a**2) * dt - gamma**dt * p_dt * (growth * s + gain * a) ** 2


def optimal_gain(gamma=GAMMA, alpha=ALPHA, beta=BETA, q=Q_COST, r=R_COST):
    """k* = P* beta / r from the discounted scalar Riccati equation."""
    drift = 2 * alpha + math.log(gamma)
    p = (drift + math.sqrt(drift**2 + 4 * q * beta**2 / r)) / (2 * beta**2 / r)
    return p * beta / r


def linear_policy_return(k, dt, s0):
    """The scaled return of one episode from s0 (what the scripts report: the rewards times
    dt / NATIVE_DT, summed over EPISODE_SECONDS) under a = -k s, in closed form: the state after n
    steps is rho^n s0, so the return is -(q + r k^2) s0^2 (1 - rho^(2N)) / (1 - rho^2) dt / NATIVE_DT."""
    growth, gain = transition(dt)
    rho_squared, steps = (growth - gain * k) ** 2, round(EPISODE_SECONDS / dt)
    return -(Q_COST + R_COST * k**2) * s0**2 * (1 - rho_squared**steps) / (1 - rho_squared) * dt / NATIVE_DT


def policy_return(policy, dt, s0):
    """The scaled return of one episode from each initial state in s0 under `policy` (states (n, 1) ->
    actions (n, 1)), stepped exactly as the env steps: actions clipped to the bound, held for dt."""
    growth, gain = transition(dt)
    state, total = np.asarray(s0, dtype=np.float64).reshape(-1, 1), 0.0
    for _ in range(round(EPISODE_SECONDS / dt)):
        action = np.clip(policy(state), -ACTION_BOUND, ACTION_BOUND)
        total = total - (Q_COST * state**2 + R_COST * action**2)
        state = growth * state + gain * action
    return total[:, 0] * dt / NATIVE_DT


class LinearQuadratic(gym.Env):
    """`dim` independent copies of ds/dt = alpha s + beta a with reward rate -(q |s|^2 + r |a|^2)."""

    metadata = {"render_modes": [], "render_fps": round(1 / NATIVE_DT)}

    def __init__(self, dim=1):
        self.dt = NATIVE_DT
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (dim,), np.float64)
        self.action_space = gym.spaces.Box(-ACTION_BOUND, ACTION_BOUND, (dim,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = self.np_random.uniform(-RESET_RANGE, RESET_RANGE, self.observation_space.shape)
        return self.state.copy(), {}

    def step(self, action):
        action = np.clip(np.asarray(action, dtype=np.float64), -ACTION_BOUND, ACTION_BOUND)
        reward = -(Q_COST * np.sum(self.state**2) + R_COST * np.sum(action**2))  # a rate: dt-free
        growth, gain = transition(self.dt)
        self.state = growth * self.state + gain * action
        return self.state.copy(), float(reward), False, False, {}


gym.register("LinearQuadratic-v0", entry_point=LinearQuadratic, max_episode_steps=round(EPISODE_SECONDS / NATIVE_DT))
