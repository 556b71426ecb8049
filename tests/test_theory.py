"""The paper's theorems, checked on the linear-quadratic test bed (tests/lq_env.py) where
V, Q_dt and A are known exactly. Each test is named after the statement it checks."""

import math

import numpy as np
import pytest

from dt_wrappers import make_env
from tests import lq_env as lq

DTS = np.array([0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001])
GAIN = 2.0  # a stabilising linear policy a = -k s, not the optimal one
GRID = [(s, a) for s in np.linspace(-1, 1, 5) for a in np.linspace(-3, 3, 5)]


def loglog_slope(dts, errors):
    return np.polyfit(np.log(dts), np.log(errors), 1)[0]


def test_the_env_matches_the_closed_forms():
    """The exact V_dt of the closed forms is what the env's own rollouts (through dt_wrappers) return."""
    for dt in (0.05, 0.01):
        env = make_env("tests.lq_env:LinearQuadratic-v0", dt=dt, time_limit=60.0)
        obs, _ = env.reset(seed=0)
        start, discounted_return = obs[0], 0.0
        for k in range(round(60.0 / dt)):
            obs, reward, *_ = env.step(np.array([-GAIN * obs[0]], dtype=np.float32))
            discounted_return += lq.GAMMA ** (k * dt) * reward * dt  # sum gamma^(k dt) r dt (eq. 3)
        assert discounted_return == pytest.approx(-lq.discrete_value_coefficient(GAIN, dt) * start**2, rel=1e-6)
        assert env.get_wrapper_attr("ref_dt") == lq.NATIVE_DT and env.unwrapped.dt == dt


def test_the_closed_form_advantage_vanishes_on_the_policy_and_the_riccati_gain_is_optimal():
    for s in np.linspace(-1, 1, 7):
        assert lq.advantage(s, -GAIN * s, GAIN) == pytest.approx(0, abs=1e-12)
    best = lq.optimal_gain()
    assert all(lq.value_coefficient(best) < lq.value_coefficient(best + step) for step in (-0.5, -0.1, 0.1, 0.5))
    # at the optimum no action has a positive advantage (Theorem on policy improvement)
    assert max(lq.advantage(s, a, best) for s, a in GRID) <= 1e-12


def test_theorem_1_v_dt_converges_to_v():
    """V_dt -> V as dt -> 0, at least linearly (log-log slope >= 0.9)."""
    errors = [abs(lq.discrete_value_coefficient(GAIN, dt) - lq.value_coefficient(GAIN)) for dt in DTS]
    assert errors[-1] < 1e-3 and loglog_slope(DTS, errors) >= 0.9


def test_theorem_2_there_is_no_q_function_in_continuous_time():
    """Q_dt(s, a) - V_dt(s) = O(dt): the action gap shrinks linearly (log-log slope about 1)."""
    small = DTS[DTS <= 0.02]
    for s, a in GRID:
        gaps = np.array(
            [abs(lq.discrete_q(s, a, GAIN, dt) + lq.discrete_value_coefficient(GAIN, dt) * s**2) for dt in DTS]
        )
        assert np.all(gaps <= (abs(lq.advantage(s, a, GAIN)) + 1) * DTS), (s, a)  # O(dt) everywhere
        # where A is not tiny, the O(dt^2) term is negligible below dt 0.02 and the slope is 1
        if abs(lq.advantage(s, a, GAIN)) >= 0.2:
            assert loglog_slope(small, gaps[DTS <= 0.02]) == pytest.approx(1.0, abs=0.05), (s, a)


def test_theorem_3_the_rescaled_advantage_has_a_limit():
    """(Q_dt - V_dt) / dt -> A(s, a) = r + V' F + log(gamma) V, with an O(dt) error."""
    for s, a in GRID:
        errors = []
        for dt in DTS:
            rescaled = (lq.discrete_q(s, a, GAIN, dt) + lq.discrete_value_coefficient(GAIN, dt) * s**2) / dt
            errors.append(abs(rescaled - lq.advantage(s, a, GAIN)))
        scale = max(1.0, abs(lq.advantage(s, a, GAIN)))
        assert errors[-1] < 0.01 * scale, (s, a)
        if errors[0] > 1e-9:
            assert loglog_slope(DTS, errors) >= 0.9, (s, a)


def test_dt_wrappers_keeps_the_lq_task_physical():
    """Scaled return of one episode under the policy: the same at dt 0.05 and 0.001 up to the O(dt)
    quadrature error, and a 5 s episode at every dt."""
    returns = {}
    for dt in (0.05, 0.001):
        env = make_env("tests.lq_env:LinearQuadratic-v0", dt=dt)
        obs, _ = env.reset(seed=3)
        while True:
            obs, _, terminated, truncated, info = env.step(np.array([-GAIN * obs[0]], dtype=np.float32))
            if terminated or truncated:
                break
        assert info["episode"]["t"] == pytest.approx(lq.EPISODE_SECONDS)
        returns[dt] = info["episode"]["r"]
    assert returns[0.001] == pytest.approx(returns[0.05], rel=0.1)
    assert not math.isclose(returns[0.001], 0)
