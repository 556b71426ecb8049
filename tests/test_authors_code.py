"""sweeps/authors_code.py, the runner of the authors' own DAU and unscaled baselines: its shims
(sweeps/authors_shims.py) change nothing their algorithm sees.

The shims' tests need no copy of the authors' code. The tests that run their code skip unless a checkout of
ctallec/continuous-rl is named by $DAU_AUTHORS_CHECKOUT (docs/research/authors_code.md says how to get one)."""

import dataclasses
import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from helpers import ROOT, read_csv

from dt_wrappers import make_env
from harness import run_info
from sweeps import authors_code
from sweeps import authors_shims as shims

CHECKOUT = os.environ.get(authors_code.CHECKOUT_VARIABLE)
needs_checkout = pytest.mark.skipif(
    not CHECKOUT, reason=f"no checkout of ctallec/continuous-rl (set {authors_code.CHECKOUT_VARIABLE})"
)
ACTIONS = [1, 1, 0, 1, 0] * 1000  # pushes right more than left: a fall within 5000 steps at dt 0.0005 too


def old_api_trajectory(dt, seed):
    """(observation, reward, done) of the shim's CartPole at tau = dt, as their make_env sets it, until done."""
    env = shims.old_api_cartpole().unwrapped
    env.tau = dt
    env.seed(seed)
    steps = [(env.reset(), None, False)]
    for action in ACTIONS:
        observation, reward, done, info = env.step(np.int64(action))
        assert info == {}
        steps.append((observation, reward, done))
        if done:
            break
    return steps


@pytest.mark.parametrize("dt", [0.01, 0.0005])
def test_the_old_api_cartpole_is_gymnasiums_with_tau_dt(dt):
    """Their env: Gym's old reset/step over Gymnasium's CartPole with tau = dt. The same trajectory, state for state,
    as Gymnasium's CartPole-v1 (its time limit removed, as their `.unwrapped`) with tau = dt and the same seed and
    actions; and the same observations and rewards as our own env at that dt (dt_wrappers: CartPole's +1 is already a
    rate, so our scaled return, sum(r dt) / 0.02, is theirs times dt / 0.02, as the runner writes it)."""
    theirs = old_api_trajectory(dt, seed=7)
    reference = gym.make("CartPole-v1").unwrapped
    reference.tau = dt
    ours = make_env("CartPole-v1", dt, seed=7)
    assert np.array_equal(theirs[0][0], reference.reset(seed=7)[0])
    assert np.array_equal(theirs[0][0], ours.reset()[0])
    for (observation, reward, done), action in zip(theirs[1:], ACTIONS, strict=False):
        expected, expected_reward, terminated, truncated, _ = reference.step(action)
        assert np.array_equal(observation, expected) and reward == expected_reward and done == terminated
        assert not truncated
        our_observation, our_reward, *_ = ours.step(action)
        assert np.array_equal(observation, our_observation) and our_reward == reward
    assert theirs[-1][2], "the sequence should end in a fall"
    later = shims.old_api_cartpole()
    later.seed(7)
    first = later.reset()
    assert not np.array_equal(later.reset(), first)  # only the first reset takes the seed, as Gym's seed() did


@pytest.mark.parametrize("dt", [0.01, 0.0005])
def test_the_old_api_pendulum_is_gymnasiums_with_dt_dt(dt):
    """Their `continuous_pendulum`: Gym's old reset/step over Gymnasium's Pendulum with dt = dt (their make_env sets
    `env.dt` on the unwrapped env). The same trajectory, state for state, as Gymnasium's Pendulum-v1 (its time limit
    removed, as their `.unwrapped`) at that dt with the same seed and torques (pushing with the swing, so that the
    speed reaches Pendulum's limit of 8); never done; the same observations and rewards as our env at that dt, whose
    scaled return, sum(r dt) / 0.05, is theirs times dt / 0.05 (the runner's)."""
    theirs = shims.old_api_pendulum().unwrapped
    theirs.dt = dt
    theirs.seed(5)
    reference = gym.make("Pendulum-v1").unwrapped
    reference.dt = dt
    ours = make_env("Pendulum-v1", dt, seed=5)
    first = theirs.reset()
    assert np.array_equal(first, reference.reset(seed=5)[0]) and np.array_equal(first, ours.reset()[0])
    fastest, their_sum, our_sum = 0.0, 0.0, 0.0
    observation = first
    for _ in range(int(6 / dt)):
        torque = 2.0 if observation[2] >= 0 else -2.0
        observation, reward, done, info = theirs.step(np.array([torque]))
        expected, expected_reward, terminated, truncated, _ = reference.step(np.array([torque]))
        assert np.array_equal(observation, expected) and reward == expected_reward
        assert not (done or terminated or truncated) and info == {}
        our_observation, our_reward, *_ = ours.step(np.array([torque], dtype=np.float32))
        assert np.allclose(observation, our_observation, atol=1e-6) and np.isclose(our_reward, reward, rtol=1e-6)
        fastest = max(fastest, abs(float(observation[2])))
        their_sum, our_sum = their_sum + reward, our_sum + our_reward * dt
    assert fastest == 8.0  # the clipped speed was reached: the one place Gym's v0 moved in another order
    assert np.isclose(our_sum / 0.05, their_sum * dt / authors_code.NATIVE_DT["Pendulum-v1"])


def test_the_gym_shim_is_gymnasium_under_gyms_names(monkeypatch):
    modules = shims.gym_module()
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    import gym as shimmed
    from gym.spaces import Discrete

    env = shimmed.make("CartPole-v1")
    assert isinstance(env.action_space, Discrete) and Discrete is gym.spaces.Discrete
    assert issubclass(type(env), shimmed.Env) and issubclass(shimmed.Wrapper, gym.Wrapper)
    shimmed.logger.debug("their TimeLimit calls this; Gymnasium's logger has no debug")
    assert isinstance(shimmed.make("Pendulum-v0").action_space, gym.spaces.Box)
    with pytest.raises(ValueError, match="CartPole-v1 and Pendulum-v0 only"):
        shimmed.make("Acrobot-v1")


class CountingEnv:
    """An old-API env whose episode ends after `length` steps; its observation is (seed, steps, resets)."""

    def __init__(self, length):
        self.length, self.steps, self.resets, self.seeded = length, 0, 0, None
        self.observation_space = self.action_space = None
        self.unwrapped = self

    def seed(self, seed):
        self.seeded = seed

    def reset(self):
        self.steps, self.resets = 0, self.resets + 1
        return np.array([self.seeded, self.steps, self.resets])

    def step(self, action):
        self.steps += 1
        return np.array([self.seeded, self.steps, self.resets]), float(action), self.steps == self.length, {"x": action}


def test_the_vector_env_steps_resets_and_stacks_as_their_subproc_vec_env():
    """Their SubprocVecEnv's worker: step, and if done, reset and send the reset observation with the step's reward
    and done; the infos' entries stacked by key. Each env is seeded once, before its first reset."""
    envs = [CountingEnv(2), CountingEnv(3)]
    vector = shims.SerialVecEnv(envs, seeds=[11, 12])
    assert vector.reset().tolist() == [[11, 0, 1], [12, 0, 1]]
    observations, rewards, dones, infos = vector.step([5, 6])
    assert observations.tolist() == [[11, 1, 1], [12, 1, 1]] and rewards.tolist() == [5, 6]
    observations, rewards, dones, infos = vector.step([7, 8])
    assert observations.tolist() == [[11, 0, 2], [12, 2, 1]]  # the first is done: its reset observation
    assert dones.tolist() == [True, False] and infos["x"].tolist() == [7, 8]


def test_toimage_scales_an_array_to_bytes():
    image = shims.toimage(np.array([[0.5, 1.0], [1.5, 2.5]]))
    assert np.asarray(image).tolist() == [[0, 64], [128, 255]]
    assert np.asarray(shims.toimage(np.ones((2, 3)))).tolist() == [[0, 0, 0], [0, 0, 0]]


def test_the_argload_shim_adds_logdir():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--dt", type=float)
    loader = shims.argload_module().ArgumentLoader(parser, to_reload=["dt"])
    args = loader.parse_args(["--dt", "0.01", "--logdir", "somewhere"])
    assert args.dt == 0.01 and args.logdir == "somewhere"


def test_the_updates_are_their_agents_count():
    """OfflineAgent.learn: 50 gradient steps at every vector step count c with c % 10 == 9 and c > 10."""
    assert authors_code.updates_done(10, 10) == 0  # c = 9 is inside the warm-up
    assert authors_code.updates_done(19, 10) == authors_code.updates_done(28, 10) == 50
    assert authors_code.updates_done(29, 10) == 100


def test_our_tools_read_its_runs_as_the_authors_dau():
    """harness/archive.py: its own label beside our DAU's on one scale, and DAU's algorithm (compare.py reads it)."""
    from harness import archive
    from sweeps.migrate_runs import described

    run = {"script": "authors_code.py", "args": {"env_id": "CartPole-v1", "dt": 0.01, "seed": 1}}
    run |= described(run)  # a run of their DAU from before --algo, as the migration rewrote it
    assert archive.label(run) == "DAU-authors" and archive.algorithm(run) == "DAU"
    for algo, label, algorithm in [("ddau", "DAU-authors", "DAU"), ("dqn", "DQN-authors", "DQN"),
                                   ("ddpg", "DDPG-authors", "DDPG")]:  # fmt: skip
        run = {"script": "authors_code.py", "args": {"env_id": "CartPole-v1", "dt": 0.01, "seed": 1, "algo": algo}}
        run |= described(run)
        assert archive.label(run) == label and archive.algorithm(run) == algorithm
    probe = {"env_id": "Pendulum-v1", "dt": 0.01, "seed": 1, "algo": "ddpg", "target_tau": 0.9}  # their options on
    assert described({"script": "authors_code.py", "args": probe})["label"] == "DDPG-authors+target_tau=0.9"
    probe = probe | {"target_tau": 0.0, "no_training_time_limit": True}
    assert (
        described({"script": "authors_code.py", "args": probe})["label"] == "DDPG-authors+no_training_time_limit=True"
    )
    # Their round's settings too (128 envs, issue 84), each against its default there, which the label leaves out.
    # every argument their runs record (run.json), as a run of the runner has them
    recorded = dataclasses.asdict(authors_code.Args(algo="ddpg", env_id="Pendulum-v1"))
    assert described({"script": "authors_code.py", "args": recorded})["label"] == "DDPG-authors"
    probe = recorded | {"num_envs": 128}
    assert described({"script": "authors_code.py", "args": probe})["label"] == "DDPG-authors+num_envs=128"
    defaults = authors_code.Args()
    assert run_info.OTHER_CODE_OPTIONS == {name: getattr(defaults, name) for name in run_info.OTHER_CODE_OPTIONS}
    before = {"env_id": "CartPole-v1", "dt": 0.01, "seed": 1}  # a run of their DAU from before --algo: the same point
    assert described({"script": "authors_code.py", "args": before})["identity"] == described(
        {"script": "authors_code.py", "args": before | {"algo": "ddau"}})["identity"]  # fmt: skip


def test_their_baselines_command_lines_are_their_daus_with_noscale():
    """Their DQN on CartPole and DDPG on Pendulum: their DAU's flags (the paper's settings) with --algo, their env id
    and --noscale; their DAU's command line is what the kept runs of it ran (run.json's argv)."""
    dau = authors_code.authors_argv(authors_code.Args(dt=0.001), "runs/x")
    kept = sorted((ROOT / "docs" / "results" / "authors_cartpole").glob("*dt0.001__1__*/run.json"))
    assert dau == json.loads(kept[0].read_text())["authors_code"]["argv"][:-1] + ["runs/x"]
    assert "--noscale" not in dau
    for algo, env_id, their_env in [("dqn", "CartPole-v1", "cartpole"), ("ddpg", "Pendulum-v1", "continuous_pendulum")]:
        argv = authors_code.authors_argv(authors_code.Args(algo=algo, env_id=env_id, dt=0.001), "runs/x")
        assert argv[:4] == ["--algo", algo, "--env_id", their_env] and argv.count("--noscale") == 1
        assert [part for part in argv if part not in ("--noscale", algo, their_env)] == [
            part for part in dau if part not in ("ddau", "cartpole")]  # fmt: skip
    probe = authors_code.authors_argv(authors_code.Args(algo="ddpg", env_id="Pendulum-v1", target_tau=0.9,
                                                        no_training_time_limit=True), "runs/x")  # fmt: skip
    assert "--time_limit" not in probe and probe[probe.index("--tau") + 1] == "0.9"


def test_the_runner_refuses_bad_input_before_any_work(tmp_path, monkeypatch):
    """No checkout, or a folder that is not theirs, or an env it does not run: one line saying which flag fixes it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(authors_code.CHECKOUT_VARIABLE, raising=False)
    for args, message in [
        ({}, "pass --checkout PATH or set DAU_AUTHORS_CHECKOUT"),
        ({"checkout": str(tmp_path)}, "is not a checkout of ctallec/continuous-rl (no code/main.py)"),
        ({"checkout": str(tmp_path), "env_id": "Pendulum-v1"}, "their ddau on CartPole-v1 only (--env-id CartPole-v1)"),
        ({"checkout": str(tmp_path), "algo": "ddpg"}, "their ddpg on Pendulum-v1 only (--env-id Pendulum-v1)"),
        ({"checkout": str(tmp_path), "dt": 0.0}, "a time step in (0, 0.05]"),
        ({"checkout": str(tmp_path), "total_time": -1.0}, "--total-time -1.0: a positive number"),
    ]:
        with pytest.raises(SystemExit) as refused:
            authors_code.run(authors_code.Args(**args))
        assert message in str(refused.value), refused.value
        assert not (tmp_path / "runs").exists()


# --- With a checkout of their code ---------------------------------------------------------------------------------


def run_theirs(tmp_path, *args):
    """One short run of theirs in a fresh interpreter (their modules live in sys.modules): evals.csv rows, run.json."""
    result = subprocess.run([sys.executable, "-m", "sweeps.authors_code", "--num-envs", "4",
                             "--num-eval-envs", "2", "--time-limit", "0.5", "--eval-every", "0.4", *args],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    return read_csv(run_dir / "evals.csv"), json.loads((run_dir / "run.json").read_text())


@needs_checkout
@pytest.mark.slow
def test_their_code_runs_seeded_and_is_written_as_our_runs(tmp_path):
    """The same seed gives the same evaluations (their code sets none: the runner does), another seed others; the
    evaluations are at our schedule, the counts their agent's, the commit theirs, and our tools read the run."""
    first = tmp_path / "first"
    rows, run = run_theirs(first.mkdir() or first, "--dt", "0.01", "--seed", "3", "--total-time", "1.2")
    again, _ = run_theirs((tmp_path / "again").mkdir() or tmp_path / "again", "--dt", "0.01", "--seed", "3",
                          "--total-time", "1.2")  # fmt: skip
    other, _ = run_theirs((tmp_path / "other").mkdir() or tmp_path / "other", "--dt", "0.01", "--seed", "4",
                          "--total-time", "1.2")  # fmt: skip
    assert [row["physical_time"] for row in rows] == ["0.000000", "0.400000", "0.800000", "1.200000"]
    assert [int(row["updates"]) for row in rows] == [authors_code.updates_done(10 * k, 10) for k in range(4)]
    returns = [row["scaled_return"] for row in rows]
    assert returns == [row["scaled_return"] for row in again] and returns != [row["scaled_return"] for row in other]
    assert run["completed"] and run["updates"] == 100 and run["authors_code"]["uncommitted_changes"] is False
    commit = subprocess.run(["git", "-C", CHECKOUT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert run["authors_code"]["commit"] == commit.strip() and "--algo" in run["authors_code"]["argv"]
    from harness import archive
    from sweeps import run_local

    sweep = run_local.load_sweep(ROOT / "sweeps" / "authors" / "cartpole.yaml", ["dt=0.01", "seed=3", "total_time=1.2",
                                 "eval_every=0.4", "num_envs=4", "num_eval_envs=2", "time_limit=0.5"])  # fmt: skip
    (point,) = run_local.grid(sweep)
    assert run_local.point_identity(sweep, point) == archive.identity(run) == run["identity"]
    assert archive.label(run) == "DAU-authors+num_envs=4" and archive.algorithm(run) == "DAU"  # 4 envs, not 256


@needs_checkout
def test_the_vector_env_is_their_subproc_vec_env_on_cartpole():
    """The shims against their own vector env (256 processes in their runs; 3 here): the same observations, rewards,
    dones and time-limit flags, step for step, over their TimeLimit and the shim's CartPole."""
    code = f"""
import sys, json, numpy as np
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from sweeps import authors_shims
theirs = authors_shims.install_shims(Path({CHECKOUT!r}) / "code")
from envs.utils import make_env
from envs.vecenv import SubprocVecEnv
def envs():
    made = [make_env("cartpole", dt=0.01, time_limit=0.3) for _ in range(3)]
    for env, seed in zip(made, [5, 6, 7]):
        env.unwrapped.seed(seed)  # before the processes start: each takes its copy of the env
    return made
pair = [SubprocVecEnv(envs()), authors_shims.SerialVecEnv(envs())]
out = [[vector.reset().tolist()] for vector in pair]
rng = np.random.default_rng(0)
for _ in range(60):
    actions = rng.integers(0, 2, 3)
    for vector, record in zip(pair, out):
        obs, rew, done, info = vector.step(actions)
        record.append([obs.tolist(), rew.tolist(), done.tolist(), info["time_limit"].tolist()])
pair[0].close()
print(json.dumps(out))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    subproc, serial = json.loads(result.stdout.splitlines()[-1])
    assert subproc == serial
    assert any(any(step[3]) for step in serial[1:]) and any(any(step[2]) for step in serial[1:])  # limits and falls
