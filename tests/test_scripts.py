"""The four scripts end to end through their command line: outputs, optimizer scalings, seeds,
the W&B sweep-agent form, bad input, interruption."""

import dataclasses
import importlib
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time

import gymnasium
import mujoco
import pytest
import torch
from helpers import ROOT, TINY, read_csv, read_evals, run_script, with_ctrl_c

import harness.args
from dt_wrappers import make_env
from harness.settings import ENV_SETTINGS

CONTINUOUS, DISCRETE = ["dau_continuous.py", "ddpg_baseline.py"], ["dau_discrete.py", "dqn_baseline.py"]
SCRIPTS = CONTINUOUS + DISCRETE
# script -> (an env of its action type at dt 0.01, the other type's env, the scripts it should point to)
ACTION_TYPES = {
    "dau_continuous.py": (["--env-id", "Pendulum-v1"], "CartPole-v1", "dau_discrete.py or dqn_baseline.py"),
    "ddpg_baseline.py": (["--env-id", "Pendulum-v1"], "CartPole-v1", "dau_discrete.py or dqn_baseline.py"),
    "dau_discrete.py": (["--env-id", "CartPole-v1"], "Pendulum-v1", "dau_continuous.py or ddpg_baseline.py"),
    "dqn_baseline.py": (["--env-id", "CartPole-v1"], "Pendulum-v1", "dau_continuous.py or ddpg_baseline.py"),
}


SLOW = pytest.mark.slow  # the quick tier (-m "not slow") runs each script end to end once, at its native env


@pytest.mark.parametrize(
    "script,env_args,dt,total_time",
    [(script, ["--env-id", "Pendulum-v1"], 0.05, 5.0) for script in CONTINUOUS]
    + [pytest.param(script, ["--env-id", "HalfCheetah-v4", "--dt", "0.005"], 0.005, 0.6, marks=SLOW)
       for script in CONTINUOUS]
    + [(script, ["--env-id", "CartPole-v1"], 0.02, 2.0) for script in DISCRETE]
    + [
        pytest.param(script, ["--env-id", "Acrobot-v1", "--dt", "0.05", "--normalize-obs", "True"], 0.05, 5.0,
                     marks=SLOW)
        for script in DISCRETE
    ],
)  # fmt: skip
def test_smoke_writes_a_well_formed_evals_csv(script, env_args, dt, total_time, tmp_path):
    result = run_script(script, *env_args, *TINY, "--total-time", str(total_time), "--save-model",
                        "--checkpoint-every", str(4 * 10 * dt), cwd=tmp_path)  # fmt: skip
    rows = read_evals(tmp_path)
    assert list(rows[0]) == ["physical_time", "env_steps", "updates", "wall_time", "scaled_return"]
    round_time = 4 * 10 * dt  # 4 envs x 10 steps
    assert float(rows[-1]["physical_time"]) == pytest.approx(round_time * int(total_time / round_time + 1e-9))
    assert all(math.isfinite(float(r["scaled_return"])) for r in rows)
    assert int(rows[-1]["updates"]) == 2 * int(rows[-1]["env_steps"]) // 40
    assert "scaled return" in result.stdout.splitlines()[-1]
    (run_json,) = tmp_path.glob("runs/*/run.json")
    run = json.loads(run_json.read_text())
    assert run["completed"] and run["script"] == script and run["dt"] == pytest.approx(dt)
    assert run["final_scaled_return"] == pytest.approx(float(rows[-1]["scaled_return"]), abs=1e-4)
    # What the numbers ran on, from the interpreter that ran them (the same here: the scripts run under sys.executable).
    assert run["versions"]["torch"] == torch.__version__ and run["versions"]["gymnasium"] == gymnasium.__version__
    assert run["versions"]["python"] == platform.python_version() and run["versions"]["mujoco"] == mujoco.__version__
    # A checkpoint every round (4 envs x 10 steps) and at the end; each loads and evaluates like model.pt.
    checkpoints = sorted(tmp_path.glob("runs/*/checkpoints/*s.pt"), key=lambda path: float(path.name[:-4]))
    num_rounds = int(total_time / round_time + 1e-9)
    assert [float(path.name[:-4]) for path in checkpoints] == pytest.approx(
        [round_time * k for k in range(num_rounds + 1)], abs=0.05
    )
    for model in [*tmp_path.glob("runs/*/model.pt"), checkpoints[1]]:
        evaluation = run_script(script, "--eval-model", str(model), "--num-eval-envs", "2", cwd=tmp_path)
        assert "mean scaled return" in evaluation.stdout


@pytest.mark.parametrize("dt", [0.01, pytest.param(0.002, marks=SLOW)])
@pytest.mark.parametrize(
    "script,scaled",
    [("dau_continuous.py", True), ("ddpg_baseline.py", True), ("ddpg_baseline.py", False),
     ("dau_discrete.py", True), ("dqn_baseline.py", True), ("dqn_baseline.py", False)],
)  # fmt: skip
def test_optimizer_follows_dt_or_the_reference_dt(script, scaled, dt, tmp_path):
    """DAU: lr alpha dt, RMSprop smoothing 1 - dt; unscaled baselines: dt0 = 0.01 instead of dt. DDPG's actor by
    default: unscaled, the critic's alpha~^Q dt0 (appendix, "alpha^pi = alpha~^Q dt0"); scaled, Pendulum's alpha~^pi
    (0.02) times dt."""
    args = ["--scaled"] if scaled and script.endswith("baseline.py") else []
    policy = ["--policy-learning-rate", "0.03"] if script == "dau_continuous.py" else []
    env_args = ACTION_TYPES[script][0]
    run_script(script, *env_args, "--dt", str(dt), *TINY, "--total-time", str(40 * dt), "--save-model",
               "--learning-rate", "0.05", *policy, *args, cwd=tmp_path)  # fmt: skip
    (model,) = tmp_path.glob("runs/*/model.pt")
    groups = torch.load(model)["optimizer"]["param_groups"]
    time_scale = dt if scaled else 0.01
    actor_rate = {"dau_continuous.py": 0.03, "ddpg_baseline.py": 0.02 if scaled else 0.05}.get(script)
    expected = [0.05 * time_scale] + ([actor_rate * time_scale] if actor_rate else [])
    assert [g["lr"] for g in groups] == pytest.approx(expected)
    assert all(g["alpha"] == pytest.approx(1 - time_scale) and g["momentum"] == 0 for g in groups)


@pytest.mark.slow
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_same_seed_same_returns(script, threads, tmp_path):
    """The same command on the same machine with the same number of torch threads gives the same evaluations
    (docs/common.md, "Reproducibility and speed": not across thread counts, nor on a CPU that takes another path)."""
    returns = []
    for attempt in ("a", "b"):
        (tmp_path / attempt).mkdir()
        run_script(script, *ACTION_TYPES[script][0], *TINY, "--dt", "0.01", "--total-time", "1.2", "--seed", "3",
                   cwd=tmp_path / attempt, env={"OMP_NUM_THREADS": threads})  # fmt: skip
        returns.append([row["scaled_return"] for row in read_evals(tmp_path / attempt)])
        # run.json says what the numbers reproduce on: the thread count the run had, its CPU, its device.
        (run_json,) = (tmp_path / attempt).glob("runs/*/run.json")
        machine = json.loads(run_json.read_text())["machine"]
        device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
        assert machine["torch_threads"] == int(threads) and machine["device"] == device and machine["cpu"]
        assert machine["mkl_cbwr"] == os.environ.get("MKL_CBWR")  # MKL's pinned path, if any, moves the numbers too
    assert returns[0] == returns[1] and len(set(returns[0])) > 1


@pytest.mark.slow
@pytest.mark.parametrize("script", DISCRETE)
def test_training_depends_on_neither_the_budget_nor_the_evaluation_schedule(script, tmp_path):
    """A run with a longer budget is the shorter run continued: the same evaluations up to the shorter one's end
    (so the 12600-s CartPole grid's runs continue the 1800-s grid's). Evaluating more often leaves the learned
    networks as they are; only the evaluation envs' next episodes move on (docs/reproduce.md)."""
    # dt 2^-7: rounds of 0.3125 s, so that physical time adds up exactly and the longer run evaluates at 5 s too
    common = [*ACTION_TYPES[script][0], *TINY[:-2], "--dt", "0.0078125", "--seed", "3", "--save-model"]
    runs = {"short": ("5", "1.25"), "long": ("10", "1.25"), "often": ("5", "0.3125")}
    for name, (total_time, eval_every) in runs.items():
        (tmp_path / name).mkdir()
        run_script(script, *common, "--total-time", total_time, "--eval-every", eval_every, cwd=tmp_path / name)
    logged = {
        name: [(row["physical_time"], row["updates"], row["scaled_return"]) for row in read_evals(tmp_path / name)]
        for name in runs
    }
    assert logged["long"][: len(logged["short"])] == logged["short"] and len(logged["long"]) > len(logged["short"])
    assert len(logged["often"]) > len(logged["short"])
    short, often = (torch.load(next((tmp_path / name).glob("runs/*/model.pt"))) for name in ("short", "often"))
    assert short.keys() == often.keys() and len(short) > 2
    for key in short.keys() - {"args", "eval_envs"}:  # the networks and the optimizer's state, tensor by tensor
        flat_short, flat_often = (torch.utils._pytree.tree_flatten(model[key]) for model in (short, often))
        assert flat_short[1] == flat_often[1], key
        for leaf, other in zip(flat_short[0], flat_often[0], strict=True):
            assert torch.equal(leaf, other) if isinstance(leaf, torch.Tensor) else leaf == other, key


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_sweep_agent_key_value_form_and_tracking_offline(script, tmp_path):
    """What a W&B agent runs: --key=value pairs and --track (from ${args_no_boolean_flags}). Its run name ends in
    the start second, which another grid point of the same script, env, dt and seed (another value of some other
    argument) may share on a fast machine, as on the GPU machine: here every name the run can take in the next two
    minutes is another run's folder, which stays as it was, and the run gets one of its own."""
    env_id = ACTION_TYPES[script][0][1]
    prefix, now = f"{env_id}__{script[:-3]}__dt0.01__2__", int(time.time())
    for second in range(now, now + 120):
        (tmp_path / "runs" / f"{prefix}{second}").mkdir(parents=True)
        (tmp_path / "runs" / f"{prefix}{second}" / "evals.csv").write_text("another run's\n")
    run_script(script, f"--env-id={env_id}", "--dt=0.01", "--seed=2", "--total-time=0.4",
               "--num-envs=4", "--num-eval-envs=2", "--updates-per-round=2", "--batch-size=16", "--time-limit=0.5",
               "--track", "--wandb-group=sweep", cwd=tmp_path, env={"WANDB_MODE": "offline"})  # fmt: skip
    (run_json,) = tmp_path.glob("runs/*/run.json")
    run = json.loads(run_json.read_text())
    assert run_json.parent.name == run["run_name"] and re.fullmatch(re.escape(prefix) + r"\d+_2", run["run_name"])
    assert len(read_csv(run_json.parent / "evals.csv")) >= 2
    others = [path for path in tmp_path.glob("runs/*/evals.csv") if path.parent != run_json.parent]
    assert len(others) == 120 and all(path.read_text() == "another run's\n" for path in others)
    assert list(tmp_path.glob("wandb/offline-run-*"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_tracking_without_an_api_key_says_how_to_fix_it(script, tmp_path):
    env = {"WANDB_MODE": "online", "WANDB_API_KEY": "", "HOME": str(tmp_path), "NETRC": str(tmp_path / "none")}
    result = run_script(
        script, *ACTION_TYPES[script][0], *TINY, "--total-time", "2", "--track", cwd=tmp_path, env=env, check=False
    )
    assert result.returncode != 0 and "wandb login" in result.stderr and "WANDB_MODE=offline" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "runs").exists()


def env_defaults(module, env="Pendulum"):
    """The script's Args with what it takes from the env's settings filled in, as after its probe."""
    return dataclasses.replace(module.Args(), **{key: value for key, value in ENV_SETTINGS[env].items()
                                                 if hasattr(module.Args, key)})  # fmt: skip


def check_all(args, dt, row_floats=2 * 3 + 1 + 2):
    """What a script's Run checks of the shared flags before any work (Pendulum's sizes by default)."""
    harness.args.check_run_args(args, dt)
    harness.args.check_memory(args, dt, row_floats, torch.device("cpu"))


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"num_envs": 0}, "--num-envs must be at least 1"),
        ({"num_eval_envs": 0}, "--num-eval-envs must be at least 1"),
        ({"steps_per_round": 0}, "--steps-per-round must be at least 1"),
        ({"updates_per_round": 0}, "--updates-per-round must be at least 1"),
        ({"buffer_time": 2.0}, "--buffer-time 2 s is less than one step of all 256 envs (2.56 s at dt 0.01)"),
        (
            {"buffer_time": 2.0, "num_envs": 4},
            "--buffer-time 2 s holds 200 transitions at dt 0.01, fewer than --batch-size (256)",
        ),  # fmt: skip
        ({"buffer_time": math.inf}, "--buffer-time must be positive and finite"),
        ({"buffer_time": 1e9, "total_time": 1e9}, "lower --buffer-time"),
        ({"total_time": 1.0}, "shorter than one round"),
        ({"learning_rate": math.nan}, "--learning-rate must be positive and finite"),
        ({"learning_rate": 0.0}, "--learning-rate must be positive and finite"),
        ({"ou_sigma": -1.0}, "--ou-sigma must be positive and finite"),
        ({"eval_every": -1.0}, "--eval-every must be positive"),
        ({"gamma": 1.5}, "--gamma must be in"),
        ({"checkpoint_every": 0.0}, "--checkpoint-every must be positive"),
    ],
)
def test_the_shared_checks_refuse_meaningless_arguments(changes, message):
    defaults = env_defaults(importlib.import_module("dau_continuous"))
    with pytest.raises(ValueError, match=re.escape(message)):
        check_all(dataclasses.replace(defaults, **changes), 0.01)
    check_all(defaults, 0.01)  # Pendulum's defaults pass


@pytest.mark.parametrize(
    "script,changes,message",
    [
        ("dau_continuous.py", {"policy_learning_rate": 0.0}, "--policy-learning-rate must be positive"),
        ("ddpg_baseline.py", {"policy_learning_rate": math.inf}, "--policy-learning-rate must be positive"),
        ("ddpg_baseline.py", {"tau": 1.0}, "--tau must be in [0, 1)"),
        ("ddpg_baseline.py", {"ref_dt": 0.0}, "dt must be a finite number of seconds > 0"),
        ("dqn_baseline.py", {"tau": -0.1}, "--tau must be in [0, 1)"),
        ("dqn_baseline.py", {"ref_dt": 1.5}, "dt must be below 1 s"),
        ("dqn_baseline.py", {"epsilon": 1.5}, "--epsilon must be in [0, 1]"),
        ("dau_discrete.py", {"epsilon": -0.5}, "--epsilon must be in [0, 1]"),
    ],
)
def test_each_script_refuses_meaningless_values_of_its_own_flags(script, changes, message):
    module = importlib.import_module(script[: -len(".py")])
    defaults = env_defaults(module, "Pendulum" if script in CONTINUOUS else "CartPole")
    with pytest.raises(ValueError, match=re.escape(message)):
        module.check_args(dataclasses.replace(defaults, **changes))
    module.check_args(defaults)  # the env's defaults pass


def test_checkpoints_that_cannot_fit_on_the_disk_are_refused(monkeypatch):
    """--checkpoint-every with HalfCheetah's replay memory at dt 0.005 (6.0e6 transitions, 1.0 GB): refused on a
    disk with 1.5 GB free, since a checkpoint is written beside the previous one; accepted with 2.5 GB."""
    import shutil

    module = importlib.import_module("dau_continuous")
    args = dataclasses.replace(env_defaults(module, "HalfCheetah"), checkpoint_every=3000.0)
    row_floats = 2 * 17 + 6 + 2
    checkpoint_gb = (2343 * 2560 * 4 * row_floats + 2**24) / 1e9
    for free_gb, refused in ((1.5, True), (2.5, False)):
        usage = shutil._ntuple_diskusage(100 * 10**9, 0, int(free_gb * 1e9))
        monkeypatch.setattr("harness.args.shutil.disk_usage", lambda path, usage=usage: usage)
        if refused:
            message = f"a checkpoint of this run takes up to {checkpoint_gb:.2f} GB and is written beside the last"
            with pytest.raises(ValueError, match=re.escape(message) + ".*run without --checkpoint-every"):
                check_all(args, 0.005, row_floats)
        else:
            check_all(args, 0.005, row_floats)
    monkeypatch.setattr("harness.args.shutil.disk_usage", lambda path: shutil._ntuple_diskusage(10**11, 0, 10**9))
    check_all(dataclasses.replace(args, checkpoint_every=None), 0.005, row_floats)  # no checkpoints


@pytest.mark.parametrize("script", SCRIPTS)
def test_bad_input_is_refused_before_any_work(script, tmp_path):
    """Through the command line: a one-line error, no traceback, no run directory."""
    env_args, other_env, other_script = ACTION_TYPES[script]
    for args, message in [
        (["--dt", "0"], "dt must be a finite number of seconds > 0"),
        (["--dt", "2"], "dt must be below 1 s"),
        (["--dt", "0.01", "--buffer-time", "2", "--num-envs", "4"], "fewer than --batch-size (256)"),
        (["--dt", "0.01", "--buffer-time", "2"], "less than one step of all 256 envs"),
        (["--buffer-time", "1e9", "--total-time", "1e9"], "GB are available: lower --buffer-time"),
        (["--env-id", other_env], f"actions: use {other_script}"),
        (["--env-id", "NoSuchEnv-v0"], "NoSuchEnv"),
    ]:
        result = run_script(script, *env_args, *args, cwd=tmp_path, check=False, timeout=60)
        assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr, args
        assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("script", SCRIPTS)
def test_non_finite_loss_stops_the_run_and_says_where(script, tmp_path):
    args = [*ACTION_TYPES[script][0], *TINY, "--dt", "0.01", "--total-time", "2", "--learning-rate", "1e38"]
    result = run_script(script, *args, cwd=tmp_path, check=False)
    assert result.returncode != 0 and "non-finite loss at update" in result.stderr and "physical time" in result.stderr
    assert len(read_evals(tmp_path)) >= 1  # what was logged before is kept
    (run_json,) = (tmp_path / "runs").glob("*/run.json")  # and run.json says why it stopped (sweeps/ read it)
    run = json.loads(run_json.read_text())
    assert run["stopped_by"] == "non-finite loss" and not run["completed"] and run["updates"] > 0


@pytest.mark.slow
def test_the_cards_command_runs_and_ctrl_c_keeps_the_log(tmp_path):
    """`python dau_continuous.py --env-id HalfCheetah-v4 --dt 0.005`, exactly, interrupted after its
    first evaluation (a full run takes minutes): it ends cleanly and the evaluation stays on disk."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "dau_continuous.py"), "--env-id", "HalfCheetah-v4", "--dt", "0.005"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=with_ctrl_c,
    )  # fmt: skip
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None:
        files = list(tmp_path.glob("runs/*/evals.csv"))
        if files and len(files[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-2000:]
    assert "interrupted" in stdout and "HalfCheetah-v4__dau_continuous__dt0.005" in stdout
    rows = read_evals(tmp_path)
    assert float(rows[0]["physical_time"]) == 0 and math.isfinite(float(rows[0]["scaled_return"]))
    (run_json,) = tmp_path.glob("runs/*/run.json")
    assert json.loads(run_json.read_text())["completed"] is False  # the sweep executor will run it again


@pytest.mark.slow
@pytest.mark.parametrize(
    "script,env_id",
    [("dau_continuous.py", "Pendulum-v1"), ("dau_discrete.py", "CartPole-v1"),
     pytest.param("dau_continuous.py", "HalfCheetah-v4", marks=pytest.mark.skipif(
         torch.cuda.is_available(), reason="a CPU figure for HalfCheetah: on the H200 machine (the suite's 14 workers "
         "beside it) 11.8%, 1.0 s an evaluation on the CPU against 7.6 s of training an interval on the GPU "
         "(docs/common.md, On a GPU)")),
     ("dau_continuous.py", "Ant-v4"), ("dau_continuous.py", "BipedalWalker-v3")],
)  # fmt: skip
def test_evaluation_takes_under_10_percent_of_the_wall_time_at_the_defaults(script, env_id, tmp_path):
    """Each env's defaults (its native dt, its evaluation interval): the wall seconds spent on evaluations (at the
    start and the end: run.json's eval_wait_time) and training are timed apart, and a full run, which evaluates
    once per interval, would spend under 10% of its wall time evaluating (measured alone on 2 cores: Pendulum
    6.1%, CartPole 6.4%, HalfCheetah 6.5%, Ant 5.4%, BipedalWalker 4.4%; 11-13% for CartPole, HalfCheetah and Ant
    at half their interval). Training is timed over one interval, or over 10 rounds where an interval has more
    (HalfCheetah 23, Ant and BipedalWalker 39: a round costs the same all along, with no warm-up phase). One torch
    thread here, as every test under xdist: with two, a test on the other core can stall the updates many times
    over; one thread slows training, not evaluation, so the share it measures is if anything smaller."""
    eval_every = ENV_SETTINGS[env_id.split("-")[0]]["eval_every"]
    round_time = 256 * 10 * make_env(env_id).get_wrapper_attr("ref_dt")  # the default round: 256 envs x 10 steps
    total_time = min(eval_every, 10 * round_time)
    run_script(script, "--env-id", env_id, "--total-time", str(total_time), cwd=tmp_path, timeout=600)
    (run_json,) = tmp_path.glob("runs/*/run.json")
    run = json.loads(run_json.read_text())
    per_evaluation = run["eval_wait_time"] / len(read_evals(tmp_path))  # training's wall seconds on evaluations
    per_interval = (run["wall_time"] - run["eval_wait_time"]) / run["physical_time"] * eval_every
    assert per_evaluation / (per_evaluation + per_interval) < 0.10, (per_evaluation, per_interval)


@pytest.mark.slow
@pytest.mark.parametrize("script", CONTINUOUS)
def test_the_speed_benchmark_reads_where_the_loop_spends_its_time(script):
    """tests/benchmark_update.py splits a run's wall time into updates, evaluations and env stepping from the
    script's last line: one round at dt 0.05 (256 envs x 10 steps, 50 updates) must read back as exactly that,
    and stepping the same envs alone is a part of the training time (the wall time outside the evaluations)."""
    import benchmark_update

    updates, vector_steps, wall, evaluating = benchmark_update.time_script(script, 0.05, 128.0)
    assert (updates, vector_steps) == (50, 10)
    assert 0 < evaluating < wall
    assert 0 < benchmark_update.env_stepping_seconds(0.05, vector_steps) < wall - evaluating


@pytest.mark.slow
@pytest.mark.parametrize("script,env_id", [("dau_discrete.py", "CartPole-v1"), ("ddpg_baseline.py", "Pendulum-v1")])
def test_round_seconds_is_the_papers_round_at_dt_001_and_keeps_its_updates_per_second(script, env_id, tmp_path):
    """--round-seconds 0.1 at dt 0.01 runs the paper's round (10 steps, here 2 updates): the same evals.csv as
    without it. At dt 0.002 its rounds are 50 steps and 10 updates, 0.4 physical s as at dt 0.01, and it does
    as many updates per physical second as the paper's rounds (10 steps, 2 updates) at dt 0.002."""
    common = ["--env-id", env_id, *TINY, "--total-time", "8", "--eval-every", "2"]
    logged = {}
    for name in ("paper 0.01", "0.01", "paper 0.002", "0.002"):
        args = ["--dt", name.split()[-1]] + ([] if name.startswith("paper") else ["--round-seconds", "0.1"])
        (tmp_path / name).mkdir()
        run_script(script, *common, *args, cwd=tmp_path / name)
        rows = read_evals(tmp_path / name)
        logged[name] = [(float(row["physical_time"]), int(row["updates"]), row["scaled_return"]) for row in rows]
    assert logged["0.01"] == logged["paper 0.01"]
    (run_json,) = (tmp_path / "0.002").glob("runs/*/run.json")
    run_args = json.loads(run_json.read_text())["args"]
    assert (run_args["steps_per_round"], run_args["updates_per_round"], run_args["round_seconds"]) == (50, 10, 0.1)
    # Evaluated where the dt 0.01 runs are (rounds of 0.4 s), with 5 times their updates, as the paper's rounds at
    # dt 0.002 (which end elsewhere: 0.08 s) have done by the end.
    assert [row[0] for row in logged["0.002"]] == [row[0] for row in logged["paper 0.01"]]
    assert [row[1] for row in logged["0.002"]] == [5 * row[1] for row in logged["paper 0.01"]]
    assert logged["0.002"][-1][:2] == pytest.approx(logged["paper 0.002"][-1][:2])
