"""dau_continuous.py and ddpg_baseline.py: update rules against the paper, truncation, evaluation, learning."""

import copy
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import assert_batch_stats, fixed_batch, flat, per_sample_gradient, read_evals, run_script

import dau_continuous as dau
import ddpg_baseline as ddpg
import harness.envs
from dt_wrappers import make_env


@pytest.mark.parametrize("dt", [0.01, 0.001])
def test_dau_update_applies_the_papers_deltas(dt, float64):
    """Alg. "Continuous DAU": Delta-theta = mean((Q - Q~) dV/dtheta) / dt,
    Delta-psi = mean((Q - Q~) d(Abar(s,a) - Abar(s,pi(s)))/dpsi) / dt, Delta-phi = mean(dAbar(s,pi(s))/dphi),
    with Q = V(s) + dt (Abar(s,a) - Abar(s,pi(s))) and Q~ = r dt + (1-d) gamma^dt V(s'). With SGD at lr 1
    the parameter change is exactly -Delta-theta, -Delta-psi and +Delta-phi."""
    torch.manual_seed(0)
    obs_dim, action_dim, gamma = 3, 2, 0.8
    normalizer = dau.Normalizer(obs_dim)
    value, advantage = dau.Value(obs_dim, 16, normalizer), dau.Advantage(obs_dim, action_dim, 16, normalizer)
    actor = dau.Actor(obs_dim, action_dim, 16, normalizer)
    batch = fixed_batch(obs_dim, action_dim)
    before = [copy.deepcopy(m) for m in (value, advantage, actor)]
    v0, a0, pi0 = before
    expected_theta, expected_psi, expected_phi, tds = 0, 0, 0, []
    for obs, action, reward, terminated, next_obs in zip(*batch, strict=True):
        with torch.no_grad():
            policy_action = pi0(obs[None])
            target = reward * dt + (1 - terminated) * gamma**dt * v0(next_obs[None])
        advantage_taken = a0(obs[None], action[None]) - a0(obs[None], policy_action)
        q = v0(obs[None]) + dt * advantage_taken
        td = (q - target).item()
        tds.append(td)
        expected_theta += td * per_sample_gradient(v0(obs[None]).sum(), list(v0.parameters())) / dt
        expected_psi += td * per_sample_gradient(advantage_taken.sum(), list(a0.parameters())) / dt
        expected_phi += per_sample_gradient(a0(obs[None], pi0(obs[None])).sum(), list(pi0.parameters()))
    n = len(batch[0])
    optimizer = torch.optim.SGD([*value.parameters(), *advantage.parameters(), *actor.parameters()], lr=1.0)
    assert_batch_stats(dau, dau.update(batch, value, advantage, actor, optimizer, dt, gamma), tds, batch[3])
    torch.testing.assert_close(flat(v0) - flat(value), expected_theta / n, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(flat(a0) - flat(advantage), expected_psi / n, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(flat(actor) - flat(pi0), expected_phi / n, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("reward_scale", [0.01, 0.001])
def test_ddpg_update_applies_the_papers_deltas(reward_scale, float64):
    """Alg. "DDPG": Q~ = r dt0 + (1-d) gamma^dt Q'(s', pi'(s')), Delta-psi = mean((Q - Q~) dQ/dpsi),
    Delta-phi = mean(dQ(s,pi(s))/dphi), then psi' <- tau psi' + (1 - tau) psi after the step."""
    torch.manual_seed(0)
    obs_dim, action_dim, gamma, dt, tau = 3, 2, 0.8, 0.002, 0.9
    normalizer = ddpg.Normalizer(obs_dim)
    qf, actor = ddpg.QNetwork(obs_dim, action_dim, 16, normalizer), ddpg.Actor(obs_dim, action_dim, 16, normalizer)
    target_qf, target_actor = (
        ddpg.QNetwork(obs_dim, action_dim, 16, normalizer),
        ddpg.Actor(obs_dim, action_dim, 16, normalizer),
    )
    batch = fixed_batch(obs_dim, action_dim)
    q0, pi0, tq0, tpi0 = (copy.deepcopy(m) for m in (qf, actor, target_qf, target_actor))
    expected_psi, expected_phi, tds = 0, 0, []
    for obs, action, reward, terminated, next_obs in zip(*batch, strict=True):
        with torch.no_grad():
            target = reward * reward_scale + (1 - terminated) * gamma**dt * tq0(next_obs[None], tpi0(next_obs[None]))
        q = q0(obs[None], action[None])
        tds.append((q - target).item())
        expected_psi += tds[-1] * per_sample_gradient(q.sum(), list(q0.parameters()))
        expected_phi += per_sample_gradient(q0(obs[None], pi0(obs[None])).sum(), list(pi0.parameters()))
    n = len(batch[0])
    optimizer = torch.optim.SGD([*qf.parameters(), *actor.parameters()], lr=1.0)
    stats = ddpg.update(batch, qf, target_qf, actor, target_actor, optimizer, dt, gamma, reward_scale, tau)
    assert_batch_stats(ddpg, stats, tds, batch[3])
    torch.testing.assert_close(flat(q0) - flat(qf), expected_psi / n, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(flat(actor) - flat(pi0), expected_phi / n, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(flat(target_qf), tau * flat(tq0) + (1 - tau) * flat(qf))
    torch.testing.assert_close(flat(target_actor), tau * flat(tpi0) + (1 - tau) * flat(actor))


def test_advantage_of_the_policy_action_is_zero():
    """A(s, a) = Abar(s, a) - Abar(s, pi(s)) (eq. Aparam) vanishes at a = pi(s), so Q(s, pi(s)) = V(s):
    the update's own A is zero for the policy's actions and not for others."""
    torch.manual_seed(1)
    normalizer = dau.Normalizer(3)
    advantage, actor = dau.Advantage(3, 2, 32, normalizer), dau.Actor(3, 2, 32, normalizer)
    obs = torch.randn(64, 3)
    policy_action = actor(obs)
    value = dau.Value(3, 32, normalizer)
    zero = torch.zeros(64)
    batch = [obs, policy_action.detach(), zero, zero + 1, obs]
    with torch.no_grad():
        v = value(obs)
    td_loss, mean_value, mean_abs_advantage, *_ = dau.update(
        batch, value, advantage, actor, torch.optim.SGD(value.parameters(), lr=0.0), 0.01, 0.8
    )
    assert mean_abs_advantage == 0 and td_loss == pytest.approx((v**2).mean().item(), rel=1e-5)
    batch[1] = -batch[1]
    assert dau.update(batch, value, advantage, actor, torch.optim.SGD(value.parameters(), lr=0.0), 0.01, 0.8)[2] > 0


@pytest.mark.parametrize("module", [dau, ddpg], ids=lambda module: module.__name__)
def test_truncation_keeps_the_final_observation_and_termination_stops_bootstrapping(module):
    # Pendulum never terminates: a 3-step time limit truncates every third step.
    envs = gym.vector.SyncVectorEnv(
        [lambda: make_env("Pendulum-v1", dt=0.01, time_limit=0.03)] * 2,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs.reset(seed=0)
    low, high = envs.single_action_space.low, envs.single_action_space.high
    action = np.array([[0.5], [-0.25]], dtype=np.float32)
    for _ in range(3):
        next_obs, reward, terminated, real_next_obs = module.env_step(envs, action, low, high)
    assert not terminated.any()
    for i in range(2):  # the same episode alone: its last observation is what the transition stores
        alone = make_env("Pendulum-v1", dt=0.01, time_limit=0.03)
        alone.reset(seed=i)
        for _ in range(3):
            last_obs, *_, truncated, _ = alone.step(low + (action[i] + 1) / 2 * (high - low))
        assert truncated
        np.testing.assert_array_equal(real_next_obs[i], last_obs)
        assert not np.array_equal(next_obs[i], last_obs)  # next_obs already starts the next episode
    # Hopper falls and terminates: the flag reaches the buffer and zeroes the bootstrap term.
    hopper = gym.vector.SyncVectorEnv(
        [lambda: make_env("Hopper-v4", dt=0.008)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    hopper.reset(seed=0)
    hop_low, hop_high = hopper.single_action_space.low, hopper.single_action_space.high
    for _ in range(2000):
        _, _, terminated, _ = module.env_step(hopper, np.ones((1, 3), dtype=np.float32), hop_low, hop_high)
        if terminated.any():
            break
    assert terminated.all()


@pytest.mark.parametrize("module", [dau, ddpg], ids=lambda module: module.__name__)
def test_evaluate_scores_the_first_episode_of_each_env_with_the_deterministic_policy(module):
    args = SimpleNamespace(env_id="Pendulum-v1", time_limit=0.5)
    eval_envs = harness.envs.make_vector_env(args, 0.05, 3, seed=10)
    space = eval_envs.single_action_space

    class Policy(torch.nn.Module):  # a fixed, state-dependent deterministic policy in [-1, 1]
        def forward(self, obs):
            return torch.tanh(obs[:, :1] - obs[:, 2:3])

    policy = Policy()

    expected = []
    for i in range(3):
        env = make_env("Pendulum-v1", dt=0.05, time_limit=0.5, seed=10 + i)
        obs, _ = env.reset()
        while True:
            action = policy(torch.as_tensor(obs[None], dtype=torch.float32))[0].numpy()
            obs, _, terminated, truncated, info = env.step(space.low + (action + 1) / 2 * (space.high - space.low))
            if terminated or truncated:
                expected.append(info["episode"]["r"])
                break
    scaled_return = module.evaluate(policy, eval_envs, space.low, space.high)
    assert scaled_return == pytest.approx(np.mean(expected), rel=1e-5)
    assert len(set(np.round(expected, 3))) == 3  # three different episodes were averaged


def test_the_update_bootstraps_on_truncation_but_not_on_termination():
    """Same transition, terminated or not: the target differs by exactly gamma^dt V(s') (scaled by 1/dt
    into the TD loss), so a truncated transition (stored with terminated = 0) bootstraps."""
    torch.manual_seed(0)
    normalizer = dau.Normalizer(3)
    value, advantage, actor = (
        dau.Value(3, 16, normalizer),
        dau.Advantage(3, 1, 16, normalizer),
        dau.Actor(3, 1, 16, normalizer),
    )
    obs, next_obs = torch.randn(1, 3), torch.randn(1, 3)
    frozen = torch.optim.SGD([*value.parameters(), *advantage.parameters(), *actor.parameters()], lr=0.0)
    dt, gamma = 0.01, 0.8
    losses = {}
    for terminated in (0.0, 1.0):
        batch = [obs, torch.zeros(1, 1), torch.zeros(1), torch.tensor([terminated]), next_obs]
        losses[terminated] = dau.update(batch, value, advantage, actor, frozen, dt, gamma)[0].item()
    with torch.no_grad():
        q = value(obs) + dt * (advantage(obs, torch.zeros(1, 1)) - advantage(obs, actor(obs)))
        bootstrap = gamma**dt * value(next_obs)
    assert losses[1.0] == pytest.approx(q.item() ** 2, rel=1e-5)
    assert losses[0.0] == pytest.approx((q - bootstrap).item() ** 2, rel=1e-5)


@pytest.mark.slow
def test_dau_learns_pendulum_at_dt_0_01(tmp_path):
    """The issue's learning criterion: a mean scaled return of at least -250 within 1800 physical seconds
    (measured: -118 at dt 0.01, ~60 s wall on 2 cores)."""
    run_script(
        "dau_continuous.py", "--dt", "0.01", "--total-time", "1800", "--eval-every", "600", cwd=tmp_path, timeout=900
    )
    rows = read_evals(tmp_path)
    assert float(rows[0]["scaled_return"]) < -600  # it starts far from the goal...
    assert float(rows[-1]["scaled_return"]) >= -250  # ...and learns
