"""The parts the four scripts share, each script's own copy, tested in each: exploration noise, observation
normalisation and replay memory, all in physical time (the replay memory's size is harness.args.buffer_rows)."""

import dataclasses
import importlib
import math

import numpy as np
import pytest
import torch

import harness.args
from harness.settings import ENV_SETTINGS

MODULES = [
    importlib.import_module(name) for name in ("dau_continuous", "ddpg_baseline", "dau_discrete", "dqn_baseline")
]


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
@pytest.mark.parametrize("dt", [0.05, 0.01, 0.001])
def test_ou_noise_has_the_continuous_processes_law_at_every_dt(module, dt):
    """Stationary std sigma / sqrt(2 kappa) = 0.387 and autocorrelation exp(-kappa lag) = 0.472 at a lag of
    0.1 s, exactly at every dt (sampling error 0.3%). The authors' Euler step fails this: its std is 11% too
    large at dt 0.05 and 1.9% at dt 0.01, its autocorrelation 0.391 and 0.459."""
    torch.manual_seed(0)
    kappa, sigma, lag = 7.5, 1.5, 0.1
    noise = module.OUNoise((100_000,), kappa, sigma, dt, "cpu")
    for _ in range(round(1.0 / dt)):  # 1 s: the law must stay stationary, not drift to the scheme's own
        noise.step()
    start = noise.z.clone()
    for _ in range(round(lag / dt)):
        noise.step()
    assert noise.z.std().item() == pytest.approx(sigma / math.sqrt(2 * kappa), rel=0.01)
    correlation = np.corrcoef(start.numpy(), noise.z.numpy())[0, 1]
    assert correlation == pytest.approx(math.exp(-kappa * lag), abs=0.008)


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_ou_noise_is_stable_when_kappa_dt_exceeds_2(module):
    """kappa dt = 2.5: the Euler step multiplies z by 1 - kappa dt = -1.5 each step and diverges."""
    torch.manual_seed(0)
    noise = module.OUNoise((10_000,), 10.0, 1.5, 0.25, "cpu")
    for _ in range(100):
        noise.step()
    assert noise.z.std().item() == pytest.approx(1.5 / math.sqrt(20), rel=0.05)


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_normalizer_tracks_the_mean_and_std_of_everything_seen(module):
    data = np.random.default_rng(0).normal([1.0, -5.0], [2.0, 0.3], size=(1000, 2)).astype(np.float32)
    normalizer = module.Normalizer(2)
    torch.testing.assert_close(normalizer(torch.tensor(data)), torch.tensor(data))  # identity before any update
    for chunk in np.split(data, [3, 250, 600]):
        normalizer.update(torch.tensor(chunk))
    torch.testing.assert_close(normalizer.mean, torch.tensor(data.mean(0)), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(normalizer.var, torch.tensor(data.var(0)), rtol=1e-3, atol=1e-6)
    expected = (data - data.mean(0)) / data.std(0)
    torch.testing.assert_close(normalizer(torch.tensor(data)), torch.tensor(expected), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_normalizer_does_not_blow_up_near_constant_features(module):
    """A lidar ray that always reads 1.0 (up to 1e-6) and a contact flag that is almost always 0: a
    reading off by 0.5 must stay of order 1 after normalisation (std floor 0.1, as in the authors' code),
    not be multiplied by 1e4 or more."""
    rng = np.random.default_rng(0)
    lidar = 1.0 + 1e-6 * rng.standard_normal(5000)
    contact = (rng.random(5000) < 1e-3).astype(np.float64)
    normalizer = module.Normalizer(2)
    normalizer.update(torch.tensor(np.stack([lidar, contact], 1), dtype=torch.float32))
    normalized = normalizer(torch.tensor([[0.5, 1.0]]))
    assert normalized.abs().max().item() <= 10.0 + 1e-4
    assert normalized[0, 0].item() == pytest.approx(-5.0, rel=1e-3)  # (0.5 - 1.0) / 0.1


def pendulum_args(module, **changes):
    settings = {key: value for key, value in ENV_SETTINGS["Pendulum"].items() if hasattr(module.Args, key)}
    return dataclasses.replace(module.Args(), **(settings | changes))


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_a_full_buffer_covers_the_same_physical_time_at_every_dt(module):
    """--buffer-time 20 s: after 60 s of interaction (4 envs) the buffer holds exactly the last 20 s,
    at dt 0.01 (2000 transitions) as at dt 0.001 (20000): the paper's Discussion on buffer size."""
    oldest = {}
    for dt in (0.01, 0.001):
        args = pendulum_args(module, num_envs=4, steps_per_round=10, total_time=60.0, buffer_time=20.0)
        rows = harness.args.buffer_rows(args, dt)
        assert rows * dt == pytest.approx(20.0)
        action_dims = (1,) if module.__name__ in ("dau_continuous", "ddpg_baseline") else ()
        buffer = module.ReplayBuffer(rows, 1, *action_dims, "cpu")
        steps = round(60.0 / (4 * dt))
        for step in range(steps):  # each transition's observation is the physical time it was collected at
            physical_time = np.full((4, 1), step * 4 * dt)
            buffer.add(physical_time, np.zeros((4, 1)), np.zeros(4), np.zeros(4), physical_time)
        stored = buffer.fields[0][: buffer.size, 0]
        assert buffer.size == rows
        oldest[dt] = stored.min().item()
    assert oldest[0.01] == pytest.approx(40.0, abs=0.05) and oldest[0.001] == pytest.approx(40.0, abs=0.005)


def test_the_buffer_never_allocates_more_than_the_run_collects():
    """Pendulum at its native dt 0.05 for 1800 s collects 14 whole rounds of 256 x 10 transitions: the
    buffer has 35,840 rows, not the 200,000 that its 10,000 s of memory would hold; HalfCheetah at dt 0.005
    for 30,000 s collects 2343 rounds, 6.0e6 transitions (about 1 GB at 168 bytes a transition)."""
    module = MODULES[0]  # harness.args.buffer_rows, the same for every script
    assert harness.args.buffer_rows(pendulum_args(module), 0.05) == 14 * 2560
    assert harness.args.buffer_rows(pendulum_args(module, total_time=1e6), 0.05) == 200_000
    cheetah = dataclasses.replace(pendulum_args(module), total_time=30_000.0, buffer_time=50_000.0)
    assert harness.args.buffer_rows(cheetah, 0.005) == 2343 * 2560


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_the_buffer_samples_filled_rows_only(module):
    """The rows not yet filled hold whatever memory held (poisoned with NaN here): no batch may reach them."""
    action_dims = (1,) if module.__name__ in ("dau_continuous", "ddpg_baseline") else ()
    buffer = module.ReplayBuffer(1000, 1, *action_dims, "cpu")
    for field in buffer.fields:
        field.fill_(math.nan)
    values = np.arange(30, dtype=np.float32).reshape(30, 1)
    buffer.add(values, np.zeros((30, 1)), np.zeros(30), np.zeros(30), values)
    obs, action, reward, terminated, next_obs = buffer.sample(50, 64)
    assert torch.isfinite(torch.cat([obs.flatten(), action.float().flatten(), reward.flatten()])).all()
    assert set(obs.flatten().tolist()) == set(range(30))  # every filled row, and only those


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
@pytest.mark.parametrize("filled,capacity_after", [(7, 10), (10, 10), (25, 10), (10, 16)])
def test_the_buffer_state_round_trips_and_grows_in_place(module, filled, capacity_after):
    """state_dict keeps the filled rows only (7 of 10), or all rows of a full or wrapped ring (25 into 10);
    loaded into a buffer of the same capacity, or into a larger one (a longer --total-time, possible only for
    a ring that never wrapped), every row is where it was and the next rows go where they would have gone."""
    action_dims = (1,) if module.__name__ in ("dau_continuous", "ddpg_baseline") else ()
    before = module.ReplayBuffer(10, 1, *action_dims, "cpu")
    for row in range(filled):
        before.add(np.full((1, 1), row), np.zeros((1, 1)), np.zeros(1), np.zeros(1), np.full((1, 1), row))
    state = before.state_dict()
    assert state["fields"][0].shape[0] == min(filled, 10)
    after = module.ReplayBuffer(capacity_after, 1, *action_dims, "cpu")
    after.load_state_dict(state)
    assert (after.size, after.position) == (before.size, before.position if capacity_after == 10 else filled)
    torch.testing.assert_close(after.fields[0][: after.size], before.fields[0][: before.size])
    after.add(np.full((1, 1), 99), np.zeros((1, 1)), np.zeros(1), np.zeros(1), np.full((1, 1), 99))
    assert after.fields[0][filled % 10 if capacity_after == 10 else filled, 0] == 99
