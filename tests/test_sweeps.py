"""The sweep files and the local executor: valid grids, the agent's command runs, resumability."""

import dataclasses
import errno
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import archive
import gymnasium as gym
import numpy as np
import psutil
import pytest
import robustness
import run_local
import torch
from helpers import ROOT, TINY_SWEEP, executor, run_script, start_and_signal, with_ctrl_c

import dau_discrete
from harness.checkpoint import CHECKPOINT
from harness.settings import ENV_SETTINGS

SWEEP_FILES = sorted((ROOT / "sweeps" / "paper").glob("*.yaml"))
SCRIPT_PAIRS = {"dau_continuous.py": "ddpg_baseline.py", "dau_discrete.py": "dqn_baseline.py"}


def finished(cwd):
    return sorted(run_local.finished_runs(Path(cwd, "runs")), key=lambda run: (run["script"], run["dt"]))


def test_every_sweep_file_is_a_grid_over_dt_and_seeds_with_a_baseline_twin(monkeypatch):
    monkeypatch.chdir(ROOT)
    sweeps = {path.stem: run_local.load_sweep(path) for path in SWEEP_FILES}
    assert len(sweeps) == 13  # the paper's ten, and three of the research variants' (no baseline twin)
    for name, sweep in sweeps.items():
        parameters = sweep["parameters"]
        assert len(parameters["dt"]["values"]) >= 4 and len(parameters["seed"]["values"]) >= 3, name
        assert all(0 < dt < 1 for dt in parameters["dt"]["values"]), name
        assert "--track" in sweep["command"], name
        assert len(run_local.grid(sweep)) == len(parameters["dt"]["values"]) * len(parameters["seed"]["values"])
        if sweep["program"] in SCRIPT_PAIRS:  # the baseline twin runs the same env, grid and budget
            twin = sweeps[name.rsplit("_", 1)[0] + "_" + SCRIPT_PAIRS[sweep["program"]].split("_")[0]]
            for key in ("env_id", "dt", "seed", "total_time", "eval_every", "normalize_obs", "policy_learning_rate"):
                assert parameters.get(key) == twin["parameters"].get(key), (name, key)


CLASSIC_DTS, MUJOCO_DTS = [0.01, 0.005, 0.002, 0.001, 0.0005], [0.05, 0.02, 0.01, 0.005, 0.002]
BIPEDAL_DTS = CLASSIC_DTS[:4]
# The paper's experiments (../shared/REFERENCE.md, section 1): env, dt range, budget (its figures' x axis).
PAPER = {
    "pendulum": ("Pendulum-v1", CLASSIC_DTS, 6120),
    "cartpole": ("CartPole-v1", CLASSIC_DTS, 12600),
    "bipedal": ("BipedalWalker-v3", BIPEDAL_DTS, 57600),
    "ant": ("Ant-v4", MUJOCO_DTS, 504000),
    "halfcheetah": ("HalfCheetah-v4", MUJOCO_DTS, 504000),
}


def test_every_sweep_file_has_the_papers_grid_and_the_settings_table(monkeypatch):
    """The paper's env, dt range and budget; the per-environment settings come from harness.settings.ENV_SETTINGS
    (checked against the paper in test_dt_wrappers), and a file that sets one anyway must agree with it."""
    monkeypatch.chdir(ROOT)
    for path in SWEEP_FILES:
        sweep = run_local.load_sweep(path)
        env_id, dts, budget = PAPER[path.stem.split("_")[0]]
        parameters = sweep["parameters"]
        assert parameters["env_id"]["value"] == env_id and parameters["dt"]["values"] == dts, path.name
        assert parameters["total_time"]["value"] == budget, path.name
        settings = ENV_SETTINGS[gym.spec(env_id).name]
        for key in set(parameters) & set(settings) - {"total_time", "eval_every"}:  # the budget is the sweep's
            assert parameters[key]["value"] == settings[key], (path.name, key)
        assert sweep.get("project") == "dau"  # an agent's runs go to the sweep's project, not wandb.init's


def test_the_agent_command_is_wandbs(monkeypatch):
    monkeypatch.chdir(ROOT)
    sweep = run_local.load_sweep(ROOT / "sweeps" / "paper" / "bipedal_dau.yaml")
    command = run_local.agent_command(sweep, run_local.grid(sweep)[0])
    assert command[:4] == ["/usr/bin/env", sys.executable, "dau_continuous.py", "--track"]
    assert "--dt=0.01" in command and "--seed=1" in command and "--env_id=BipedalWalker-v3" in command
    overridden = run_local.load_sweep(
        ROOT / "sweeps" / "paper" / "bipedal_ddpg.yaml", ["normalize_obs=False", "tau=0.5"]
    )
    command = run_local.agent_command(overridden, run_local.grid(overridden)[0])
    assert "--normalize_obs=False" in command and "--tau=0.5" in command  # what tyro's None/True/False takes


@pytest.mark.slow
@pytest.mark.parametrize("dt,files", [(0.05, ["ant", "halfcheetah"]), (0.01, ["pendulum", "cartpole", "bipedal"])])
def test_each_sweep_files_agent_command_runs_its_script(dt, files, workdir):
    """One grid point of every file, exactly as the agent runs it; only the budget (one round) is changed, and the
    episodes' length (1 physical second; no sweep file or table sets it). Evaluating full episodes at the start and
    the end was 9.4 s of an Ant run's 24 and made these two tests 79 s instead of 45; the evaluation-share tests
    play full episodes at every env's defaults."""
    sweep_files = [f"sweeps/paper/{name}_{algorithm}.yaml" for name in files for algorithm in ("dau", "ddpg", "dqn")]
    sweep_files = [path for path in sweep_files if (ROOT / path).exists()]
    # The README's rows (sweeps/readme/) too: a point the same as another file's (the same arguments, so the same
    # command) runs once, and its run stands for both.
    readme = [f"sweeps/readme/{name}_{algorithm}{budget}.yaml" for name in files for algorithm in ("dau", "ddpg", "dqn")
              for budget in ("", "_12600")]  # fmt: skip
    readme = [path for path in readme if (ROOT / path).exists()]
    overrides = [f"total_time={256 * 10 * dt}", "time_limit=1.0", "seed=1", f"dt={dt}"]
    result = executor(*sweep_files, *readme, "--override", *overrides, cwd=workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = finished(workdir)
    sweeps = [run_local.load_sweep(ROOT / path, overrides) for path in sweep_files + readme]
    points = {run_local.point_identity(sweep, point) for sweep in sweeps for point in run_local.grid(sweep)}
    assert len(sweep_files) == 2 * len(files) and len(readme) == {0.05: 4, 0.01: 8}[dt]
    assert sorted(archive.identity(run) for run in runs) == sorted(points)  # each file's point ran
    for run in runs:
        assert run["dt"] == dt and run["args"]["track"] and run["args"]["seed"] == 1
        settings = ENV_SETTINGS[gym.spec(run["args"]["env_id"]).name]  # the table reaches every agent's run
        for key in set(settings) & set(run["args"]) - {"total_time", "eval_every"}:  # the budget is the sweep's
            assert run["args"][key] == settings[key], (run["script"], key)
        assert math.isfinite(run["final_scaled_return"]) and run["updates"] == 50 and run["args"]["time_limit"] == 1
    assert len(list(workdir.glob("wandb/offline-run-*"))) == len(runs)


@pytest.mark.slow
def test_a_sweep_can_override_every_per_environment_setting(workdir):
    """Through W&B's own command construction: normalisation off and on for HalfCheetah (whose default is
    on), and the other settings of the table, reach the script; a YAML boolean, which
    ${args_no_boolean_flags} would turn into a bare flag or drop, is refused before any run."""
    sweep = TINY_SWEEP.replace("dqn_baseline.py", "ddpg_baseline.py").replace("CartPole-v1", "HalfCheetah-v4")
    sweep = sweep.replace("dt: {values: [0.02, 0.01]}", "dt: {value: 0.05}")
    (workdir / "override.yaml").write_text(
        sweep + '  normalize_obs: {values: ["False", "True"]}\n  tau: {value: 0.5}\n  buffer_time: {value: 40}\n'
        "  policy_learning_rate: {value: 0.01}\n  eval_every: {value: 0.4}\n"
    )
    result = executor("override.yaml", "--override", "total_time=2", cwd=workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = finished(workdir)
    assert sorted(run["args"]["normalize_obs"] for run in runs) == [False, True]
    for run in runs:
        assert (run["args"]["tau"], run["args"]["buffer_time"], run["args"]["policy_learning_rate"]) == (0.5, 40, 0.01)
        assert run["args"]["eval_every"] == 0.4
    (workdir / "boolean.yaml").write_text(sweep + "  normalize_obs: {value: false}\n")
    refused = executor("boolean.yaml", cwd=workdir, timeout=120)
    assert refused.returncode != 0 and "write the value as a string" in refused.stderr


@pytest.mark.slow
def test_the_executor_runs_a_grid_once_in_the_hours_given_and_resumes_after_an_interruption(workdir):
    """--hours: a finished run of the same script and env (another seed) measures 1000 s per round; the dt
    0.01 point needs 2 rounds (2000 s), more than the 1800 s of --hours 0.5, its dt 0.02 twin one round. With
    one worker the twin, which fits, goes first, though the schedule puts the finest dt first; then the dt 0.01
    point starts all the same, saying that it would stop at a checkpoint at the deadline (here it ends in
    seconds)."""
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    measured = workdir / "measured" / "CartPole-v1__dqn_baseline__dt0.01__99__1"
    measured.mkdir(parents=True)
    args = {"env_id": "CartPole-v1", "seed": 99, "updates_per_round": 2, "total_time": 0.8, "dt": 0.01}
    info = {"script": "dqn_baseline.py", "dt": 0.01, "args": args, "completed": True, "updates": 6, "wall_time": 3000}
    (measured / "run.json").write_text(json.dumps(info))
    first = executor("tiny.yaml", "--results", "measured", "--hours", "0.5", "--workers", "1", cwd=workdir)
    assert first.returncode == 0, first.stdout + first.stderr
    started = re.search(r"started dqn_baseline env_id=CartPole-v1 dt=0.01 seed=4: needs about 33 min, (29|30) min "
                        "left; it will stop at a checkpoint", first.stdout)  # fmt: skip
    assert started, first.stdout
    assert first.stdout.index("done    dqn_baseline env_id=CartPole-v1 dt=0.02") < started.start()
    assert "2 runs finished, 0 failed" in first.stdout and "not started" not in first.stdout
    runs = finished(workdir)
    assert [run["dt"] for run in runs] == [0.01, 0.02] and all(run["script"] == "dqn_baseline.py" for run in runs)
    assert len(list(workdir.glob("runs/*/evals.csv"))) == 2

    # An unrelated run's run.json cut short is refused in one line and the call goes on (issue 66).
    (workdir / "runs" / "Pendulum-v1__other__dt0.01__1__1").mkdir()
    (workdir / "runs" / "Pendulum-v1__other__dt0.01__1__1" / "run.json").write_text('{"script": "dau_cont')
    second = executor("tiny.yaml", cwd=workdir)
    assert second.returncode == 0 and second.stderr.count("is not a whole run.json") == 1, second.stderr
    assert "refused runs/Pendulum-v1__other__dt0.01__1__1/run.json" in second.stderr
    assert "2 already finished, 0 to run" in second.stdout and len(list(workdir.glob("runs/*/evals.csv"))) == 2
    shutil.rmtree(workdir / "runs" / "Pendulum-v1__other__dt0.01__1__1")
    # runs/ gone (a new session), its finished runs kept by collect.py: still done.
    (workdir / "runs").rename(workdir / "kept")
    later = executor("tiny.yaml", "--results", "kept", "--dry-run", cwd=workdir)
    assert "2 already finished, 0 to run" in later.stdout, later.stdout + later.stderr
    (workdir / "kept").rename(workdir / "runs")

    # A run that was interrupted (completed: false) is run again; finished ones are not.
    (run_json,) = [path for path in workdir.glob("runs/*/run.json") if "dt0.01_" in str(path)]
    run_json.write_text(json.dumps({**json.loads(run_json.read_text()), "completed": False}))
    third = executor("tiny.yaml", "--override", "total_time=0.8", cwd=workdir)
    assert "1 already finished, 1 to run" in third.stdout, third.stdout + third.stderr
    assert len(list(workdir.glob("runs/*/evals.csv"))) == 3 and len(finished(workdir)) == 2


@pytest.mark.parametrize(
    "args,message",
    [
        (["sweeps/paper/pendulum_dau.yaml", "--override", "no_such_arg=1"], "'no_such_arg' is not an argument of"),
        (["sweeps/paper/pendulum_dau.yaml", "--override", "seed"], "expected KEY=VALUE"),
        (["sweeps/paper/pendulum_dau.yaml", "--workers", "0"], "--workers must be at least 1"),
        (["sweeps/paper/pendulum_dau.yaml", "--hours", "0"], "--hours must be positive"),
        (["missing.yaml"], "missing.yaml"),
        (["random.yaml"], "only `method: grid`"),
    ],
)
def test_bad_input_is_refused_before_any_run(args, message, workdir):
    (workdir / "random.yaml").write_text("program: dau_continuous.py\nmethod: random\n")
    result = executor(*args, cwd=workdir, timeout=120)
    assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr
    assert not (workdir / "runs").exists()


def test_no_wandb_credentials_is_refused_before_any_run(workdir):
    env = {"WANDB_MODE": "online", "WANDB_API_KEY": "", "HOME": str(workdir), "NETRC": str(workdir / "none")}
    result = executor("sweeps/paper/cartpole_dau.yaml", cwd=workdir, env=env, timeout=120)
    assert result.returncode != 0 and "wandb login" in result.stderr and "WANDB_MODE=offline" in result.stderr
    assert not (workdir / "runs").exists()


def write_run(runs_dir, script, dt, seed, returns, eval_every=150.0, start_time=1, wall_time=60.0, **args):
    run_dir = Path(runs_dir, f"Pendulum-v1__{script[:-3]}__dt{dt:g}__{seed}__{start_time}")
    run_dir.mkdir(parents=True)
    rows = ["physical_time,env_steps,updates,wall_time,scaled_return"]
    rows += [f"{k * eval_every + 0.5 * dt},0,0,0,{value}" for k, value in enumerate(returns)]
    (run_dir / "evals.csv").write_text("\n".join(rows) + "\n")
    given = {"env_id": "Pendulum-v1", "dt": dt, "seed": seed, "total_time": 600.0, "eval_every": 150.0}
    run_args = archive.resolved_args(script, given | args)  # as the script records them: labelled DAU, DDPG-...
    info = {"script": script, "run_name": run_dir.name, "dt": dt, "args": run_args, "completed": True}
    (run_dir / "run.json").write_text(json.dumps(info | {"wall_time": wall_time}))
    return run_dir


def test_the_robustness_table_and_figure(tmp_path):
    import plot

    for seed, shift in ((1, 0.0), (2, 20.0)):  # DAU: every dt ends near -150; DDPG: -300 at dt 0.01, -1000 at 0.001
        write_run(tmp_path, "dau_continuous.py", 0.01, seed, [-1400, -600, -200, -160 + shift, -140 + shift])
        write_run(tmp_path, "dau_continuous.py", 0.001, seed, [-1400, -900, -300, -170 + shift, -150 + shift],
                  wall_time=540.0 + 120 * seed)  # fmt: skip
        write_run(tmp_path, "ddpg_baseline.py", 0.01, seed, [-1400, -500, -300, -300, -300 + shift], scaled=False)
        write_run(tmp_path, "ddpg_baseline.py", 0.001, seed, [-1400, -1000, -1000, -1000, -1000 + shift])
    unfinished = write_run(tmp_path, "dau_continuous.py", 0.01, 3, [-1400, 0])
    info = json.loads((unfinished / "run.json").read_text())
    (unfinished / "run.json").write_text(json.dumps({**info, "completed": False}))  # ignored

    runs = plot.load_runs(tmp_path)
    table = plot.robustness_table(runs).splitlines()
    # Run scores: the mean of the evaluations over the second half of 600 s (physical times 300, 450, 600): DAU
    # -166.7 / -153.3 at dt 0.01 and -206.7 / -193.3 at 0.001; DDPG -300 / -293.3 and -1000 / -993.3. Untrained
    # -1400, best -160 (DAU at dt 0.01): the score is (return + 1400) / 1240. Intervals of a mean of two runs: a
    # bootstrap draws both of one (1/4 each) or one of each (1/2), so the 95% interval is the two runs' range.
    dau_cells = "| DAU | -160.0 [-166.7, -153.3] (n=2) | -200.0 [-206.7, -193.3] (n=2) |"
    assert table[4].startswith(f"{dau_cells} {1200 / 1240:.2f} [")  # fine / coarse: dt 0.001 over dt 0.01
    halvings = np.log2(0.01 / 0.001)
    assert f"| {(1200 / 1240 - 1) / halvings:+.3f} [" in table[4]  # the slope per halving of dt
    ddpg_ratio = (-996.6667 + 1400) / (-296.6667 + 1400)
    assert table[5].startswith("| DDPG-unscaled | -296.7 [-300.0, -293.3] (n=2) | -996.7 [-1000.0, -993.3] (n=2) | "
                               f"{ddpg_ratio:.2f} [")  # fmt: skip
    # Worst / best, each dt resampled on its own: from the worst dt's lowest draw over the best's highest, and back.
    assert table[5].endswith(f"| {ddpg_ratio:.2f} [{(-1000 + 1400) / (-293.3333 + 1400):.2f}, "
                             f"{(-993.3333 + 1400) / (-300 + 1400):.2f}] |")  # fmt: skip
    assert table[6] == "| P(DAU > DDPG-unscaled) | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] | | | |"
    # Every step: each dt's mean score over the two dt's mean (DAU's scores 1 and 1200 / 1240), the runs that learn
    # (score 0.5 or more: -780 or more), and the steps that depart (none with two runs' intervals this wide).
    level = (1 + 1200 / 1240) / 2
    (every,) = [line for line in table if line.startswith("| DAU | ") and ", 2/2 [" in line]
    assert every.startswith(f"| DAU | {1 / level:.2f} [") and f"| {1200 / 1240 / level:.2f} [" in every
    assert any(line.startswith("**Every step**") and "-780.0 or more" in line for line in table)
    # Wall time: DAU 2 x 1 min at dt 0.01, 11 and 13 min at 0.001; DDPG 4 runs of 1 min.
    assert table[-1] == "Wall time (minutes): DAU 26 in all, per run 1.0 at dt 0.01, 12.0 at dt 0.001; " \
                        "DDPG-unscaled 4 in all, per run 1.0 at dt 0.01, 1.0 at dt 0.001"  # fmt: skip
    assert plot.invariance_lines(runs)[0].startswith(f"invariance Pendulum-v1 DAU fine/coarse {1200 / 1240:.2f} [")
    out = tmp_path / "figures" / "curves.png"
    plot.plot(runs, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_the_probability_of_improvement_counts_pairs_of_runs_and_ties_as_half():
    """Agarwal et al.'s P(X > Y): DAU runs 1, 2, 3 against baseline runs 2, 2, 0: 1 beats one of three, 2 ties
    two and beats one, 3 beats all: (1 + 2 + 3) / 9. Its interval: DAU's and the baseline's runs resampled
    apart; all DAU runs above all baseline runs leave no doubt."""
    import plot

    assert robustness.probability_of_improvement([1.0, 2.0, 3.0], [2.0, 2.0, 0.0]) == pytest.approx(6 / 9)
    low, high = robustness.interval(([1.0, 2.0, 3.0], [2.0, 2.0, 0.0]), robustness.probability_of_improvement)
    assert 0 <= low < 6 / 9 < high <= 1
    assert robustness.interval(([5.0, 6.0], [1.0, 2.0]), robustness.probability_of_improvement) == (1.0, 1.0)
    assert (
        robustness.interval(([5.0], [1.0, 2.0]), robustness.probability_of_improvement) is None
    )  # one run: no interval
    # The tables resample it in batches (vectorized): the same interval as resample by resample.
    pair = ([1.0, 2.0, 3.0, 0.5], [2.0, 2.0, 0.0])
    batched = robustness.interval(pair, robustness.probability_of_improvement, vectorized=True)
    assert batched == robustness.interval(pair, robustness.probability_of_improvement)
    assert plot.improvement_cell(*pair) == f"{7 / 12:.2f} [{batched[0]:.2f}, {batched[1]:.2f}]"


def test_the_robustness_ratio_when_a_dt_or_every_dt_ends_below_untrained(tmp_path):
    import plot

    # Untrained -100. DAU ends at 200 and -150 (below untrained); DDPG at -120 and -200 (never above it).
    write_run(tmp_path, "dau_continuous.py", 0.01, 1, [-100, 200, 200])
    write_run(tmp_path, "dau_continuous.py", 0.001, 1, [-100, -150, -150])
    write_run(tmp_path, "ddpg_baseline.py", 0.01, 1, [-100, -120, -120])
    write_run(tmp_path, "ddpg_baseline.py", 0.001, 1, [-100, -200, -200])
    table = plot.robustness_table(plot.load_runs(tmp_path)).splitlines()
    assert table[4].endswith("| 0.00 |")  # the worst dt learned nothing: ratio 0
    assert f"| {(-150 + 100) / 300:.2f} |" in table[4]  # fine / coarse below 0: the fine dt is below untrained
    assert "| — | " in table[5] and table[5].endswith("| — |")  # no dt learned: neither ratio


def test_the_phase_plane_shows_the_checkpoints_networks(tmp_path):
    import phase_plane

    import dau_continuous

    torch = pytest.importorskip("torch")
    run_dir = write_run(tmp_path, "dau_continuous.py", 0.01, 1, [-1400, -200])
    normalizer = dau_continuous.Normalizer(3)
    value, actor = dau_continuous.Value(3, 16, normalizer), dau_continuous.Actor(3, 1, 16, normalizer)
    (run_dir / "checkpoints").mkdir()
    checkpoint = {"args": {"hidden_size": 16}, "normalizer": normalizer.state_dict(), "value": value.state_dict()}
    torch.save({**checkpoint, "actor": actor.state_dict()}, run_dir / "checkpoints" / "300.0s.pt")

    found = phase_plane.find_checkpoints(tmp_path, "Pendulum-v1", seed=1)
    assert list(found) == ["DAU"] and list(found["DAU"][0.01]) == [300.0]
    image = phase_plane.evaluate_checkpoint(run_dir / "checkpoints" / "300.0s.pt", "value")
    assert image.shape == (101, 101)
    # Row = angular velocity (-8 at the bottom), column = angle (-pi at the left); the centre is upright, at rest.
    with torch.no_grad():
        assert image[50, 50] == pytest.approx(value(torch.tensor([[1.0, 0.0, 0.0]])).item(), abs=1e-5)
        assert image[0, 0] == pytest.approx(value(torch.tensor([[-1.0, 0.0, -8.0]])).item(), abs=1e-5)
        assert image[50, 75] == pytest.approx(value(torch.tensor([[0.0, 1.0, 0.0]])).item(), abs=1e-5)  # angle pi/2
        assert image[75, 50] == pytest.approx(value(torch.tensor([[1.0, 0.0, 4.0]])).item(), abs=1e-5)  # velocity 4
    policy = phase_plane.evaluate_checkpoint(run_dir / "checkpoints" / "300.0s.pt", "policy")
    assert np.abs(policy).max() <= 1 and policy.std() > 0


@pytest.mark.slow
def test_ctrl_c_stops_the_runs_cleanly_and_keeps_their_logs(workdir):
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    process = subprocess.Popen(
        [sys.executable, "sweeps/run_local.py", "tiny.yaml", "--override", "total_time=4000", "eval_every=2000"],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=with_ctrl_c,
    )  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline and len(list(workdir.glob("runs/*/evals.csv"))) < 2:
        time.sleep(0.2)  # both workers have started a run and written their first evaluation
    time.sleep(1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0 and "interrupted" in stderr and "Traceback" not in stderr
    runs = [json.loads(path.read_text()) for path in workdir.glob("runs/*/run.json")]
    assert len(runs) == 2 and not any(run["completed"] for run in runs)  # the next call runs them again
    assert all("physical_time" in run for run in runs)  # written on the scripts' clean interruption path
    assert all(len((path.read_text()).splitlines()) >= 2 for path in workdir.glob("runs/*/evals.csv"))


@pytest.mark.slow
def test_at_the_deadline_the_runs_stop_with_a_checkpoint_and_the_next_call_resumes_them(workdir):
    """--hours 0.003 (10.8 s; 0.01, 36 s, on a GPU): both runs, each far longer, get SIGTERM at the deadline, save
    their state and stop; the executor says so, and its next call (a dry run here) resumes them from their folders.
    With one worker, one run goes on and stops again, and the other is not started."""
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    # On the GPU machine a run's start-up (torch, the CUDA context, its envs and networks, beside the suite's 13
    # other workers) took over 10.8 s once (2026-11-26, H200): the deadline came before the run could save a
    # checkpoint. There the deadline is 36 s, and the runs ten times longer, to outlast two of them.
    on_gpu = os.environ.get("DAU_TEST_DEVICE") == "cuda"
    hours = "0.01" if on_gpu else "0.003"
    long = ["--override", f"total_time={40000 if on_gpu else 4000}", "eval_every=2000"]
    stopped = executor("tiny.yaml", *long, "--hours", hours, cwd=workdir)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout.count("checkpoint saved, the next call goes on from it") == 2, stopped.stdout
    assert f"2 runs stopped at a checkpoint (--hours {hours}): run the same command again" in stopped.stdout
    assert "0 runs finished" in stopped.stdout
    runs = {path.parent: json.loads(path.read_text()) for path in workdir.glob("runs/*/run.json")}
    assert len(runs) == 2 and all(run["stopped_by"] == "SIGTERM" and run["checkpoint"] for run in runs.values())
    alone = executor("tiny.yaml", *long, "--hours", hours, "--workers", "1", cwd=workdir)
    assert f"1 runs stopped at a checkpoint (--hours {hours})" in alone.stdout, alone.stdout + alone.stderr
    assert "the deadline came before it started" in alone.stdout and "1 runs not started" in alone.stdout
    assert "0 runs finished" in alone.stdout
    plan = executor("tiny.yaml", *long, "--dry-run", cwd=workdir)
    assert "2 to run (2 from a checkpoint)" in plan.stdout, plan.stdout + plan.stderr
    for run_dir in runs:
        assert f"resume /usr/bin/env {sys.executable} dqn_baseline.py" in plan.stdout
        assert f"--resume=runs/{run_dir.name}" in plan.stdout


@pytest.mark.slow
def test_the_executor_goes_on_from_a_stopped_runs_checkpoint(workdir):
    """A grid point whose run was stopped by SIGTERM runs on in its own folder (the agent's command plus
    --resume) to its end; its evaluations before the stop stay as they were."""
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    point = ["--env_id=CartPole-v1", "--dt=0.01", "--seed=4", "--total_time=40", "--num_envs=4", "--num_eval_envs=2",
             "--updates_per_round=2", "--batch_size=16", "--time_limit=0.5", "--eval_every=1"]  # fmt: skip
    returncode, _, stderr = start_and_signal("dqn_baseline.py", *point, cwd=workdir, signum=signal.SIGTERM)
    assert returncode == 0, stderr
    (run_json,) = workdir.glob("runs/*/run.json")
    before = (run_json.parent / "evals.csv").read_text()
    assert not json.loads(run_json.read_text())["completed"]
    result = executor("tiny.yaml", "--override", "dt=0.01", "total_time=40", "eval_every=1", cwd=workdir)
    assert "1 to run (1 from a checkpoint)" in result.stdout and "1 runs finished" in result.stdout, result.stdout
    (again,) = workdir.glob("runs/*/run.json")
    run = json.loads(again.read_text())
    assert again == run_json and run["completed"] and run["physical_time"] == pytest.approx(40)
    after = (run_json.parent / "evals.csv").read_text()
    assert after.startswith(before) and len(after.splitlines()) > len(before.splitlines())


def test_a_worker_that_fails_stops_the_call_at_once(workdir, monkeypatch):
    """A worker's error (here its run cannot start: no process left to fork) stops the call as soon as it is raised:
    the other worker's run gets SIGTERM and no other point starts. The call waited for its workers one after
    another, so the second worker's error went unnoticed while the first ran on, one point after another (issue 78,
    D2: in a real sweep, hours a worker short, the failed worker's point dropped)."""
    monkeypatch.chdir(workdir)
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    worker, started, stopped = threading.local(), [], threading.Event()

    class Pool(run_local.ThreadPoolExecutor):  # numbers the workers in the order they are submitted
        submitted = 0

        def submit(self, work, *args):
            index, self.submitted = self.submitted, self.submitted + 1

            def numbered(*args):
                worker.index = index
                return work(*args)

            return super().submit(numbered, *args)

    class Run:  # the first worker's run goes on until a SIGTERM (10 s at most); the second worker's cannot start
        def __init__(self, command, **kwargs):
            if worker.index == 1:
                raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
            started.append(command)

        def send_signal(self, signum):
            stopped.set()

        def wait(self):
            stopped.wait(timeout=10)
            return 0

    monkeypatch.setattr(run_local, "ThreadPoolExecutor", Pool)
    monkeypatch.setattr(run_local.subprocess, "Popen", Run)
    began = time.time()
    with pytest.raises(OSError, match="Resource temporarily unavailable"):
        run_local.main(run_local.Options(sweeps=(workdir / "tiny.yaml",), override=("dt=0.02,0.01,0.005",), workers=2))
    assert time.time() - began < 5 and stopped.is_set() and len(started) == 1, started


def test_a_run_interrupted_by_its_own_sigint_is_not_counted_as_finished(workdir, monkeypatch, capsys):
    """A run that a SIGINT sent to it stopped (the call stops its runs with SIGTERM) exits 0 with its logs and no
    checkpoint of its own: the call says it was interrupted and that the next call goes on with it, and does not
    count it among the finished runs (issue 78, D6: "1 runs finished, 0 failed")."""
    monkeypatch.chdir(workdir)
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)

    class Run:  # the point's run, interrupted: its last lines, exit status 0
        def __init__(self, command, stdout, **kwargs):
            stdout.write(b"interrupted: keeping what was logged\n")
            stdout.write(b"CartPole-v1__dqn_baseline__dt0.01__4__1: scaled return 9.00 after 0.4 physical s\n")

        def wait(self):
            return 0

    monkeypatch.setattr(run_local.subprocess, "Popen", Run)
    run_local.main(run_local.Options(sweeps=(workdir / "tiny.yaml",), override=("dt=0.01",), workers=1))
    out = capsys.readouterr().out
    assert "stopped dqn_baseline env_id=CartPole-v1 dt=0.01 seed=4 by a SIGINT" in out, out
    assert "0 runs finished, 0 failed" in out and "1 runs interrupted by a SIGINT sent to them" in out, out


@pytest.mark.slow
def test_a_run_that_outlives_its_runner_keeps_its_grid_point(workdir):
    """The runner killed outright (SIGKILL: no SIGTERM reaches its runs) leaves its run going, in its own session,
    holding the point's claim (runs/sweep_claims/, inherited by the run): a second call on the same runs/ leaves the
    point to it and starts no second folder for it while it runs (issue 78, D3: nothing tested the hand-off; without
    the claim passed to the run, the second call started the point again)."""
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    long = ["--override", "dt=0.01", "total_time=4000", "eval_every=2000"]
    runner = subprocess.Popen([sys.executable, "sweeps/run_local.py", "tiny.yaml", *long], cwd=workdir,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline, orphan = time.time() + 120, None
    try:
        while time.time() < deadline and orphan is None:  # the run has started: its first evaluation is logged
            evals = list(workdir.glob("runs/*/evals.csv"))
            if evals and len(evals[0].read_text().splitlines()) >= 2:
                orphan = int((evals[0].parent / "running.lock").read_text())
            time.sleep(0.1)
        runner.kill()
        runner.wait()
        assert orphan is not None and psutil.pid_exists(orphan)  # the run goes on without its runner
        # With --hours, a second run of the point, if one started, would stop at a checkpoint in seconds.
        second = executor("tiny.yaml", *long, "--hours", "0.002", cwd=workdir, timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "left   dqn_baseline env_id=CartPole-v1 dt=0.01 seed=4: another call runs it" in second.stdout
        assert len(list(workdir.glob("runs/*/run.json"))) == 1 and psutil.pid_exists(orphan), second.stdout
    finally:
        runner.kill()
        if orphan is not None and psutil.pid_exists(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_collect_keeps_the_small_files_of_finished_runs_only(tmp_path):
    import collect
    import plot

    for seed in (1, 2):
        run_dir = write_run(tmp_path / "runs", "dau_continuous.py", 0.01, seed, [-1400, -200])
        (run_dir / "model.pt").write_bytes(b"weights")
    (run_dir / "diagnostics.csv").write_text("physical_time,values/v\n1.0,-3.0\n")  # a run from before it has none
    unfinished = write_run(tmp_path / "runs", "dau_continuous.py", 0.01, 3, [-1400])
    (unfinished / "run.json").write_text(json.dumps({**json.loads((unfinished / "run.json").read_text()),
                                                     "completed": False}))  # fmt: skip
    code = [{"commit": "0123456789abcdef0123456789abcdef01234567", "uncommitted_changes": True}]
    (run_dir / "run.json").write_text(json.dumps({**json.loads((run_dir / "run.json").read_text()), "code": code}))
    command = ["sweeps/collect.py", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "printed")]
    printed = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert printed.stdout.splitlines()[1:] == ["  1 made by 0123456+changes", "  1 made by unrecorded"], printed.stdout
    copied = collect.collect(tmp_path / "runs", tmp_path / "results")  # each run copied, with the code that made it
    assert sorted(copied.values()) == ["0123456+changes", "unrecorded"]
    copied = sorted(path.name for path in (tmp_path / "results").glob("*/*"))
    assert copied == ["diagnostics.csv"] + ["evals.csv"] * 2 + ["run.json"] * 2
    assert collect.collect(tmp_path / "runs", tmp_path / "results") == {}  # nothing new the second time
    assert len(plot.load_runs(tmp_path / "results")["Pendulum-v1"]["DAU"][0.01]) == 2  # the plots read them


def test_a_collect_cut_short_leaves_no_partial_run(tmp_path, monkeypatch):
    """A copy stopped after a run's first file (a kill, a full disk) leaves no run folder in the results, and the
    next call copies the run whole."""
    import collect
    import plot

    write_run(tmp_path / "runs", "dau_continuous.py", 0.01, 1, [-1400, -200])
    copy2 = collect.shutil.copy2

    def copy_then_stop(source, target):
        if Path(source).name == "evals.csv":
            raise OSError("No space left on device")
        copy2(source, target)

    monkeypatch.setattr(collect.shutil, "copy2", copy_then_stop)
    with pytest.raises(OSError):
        collect.collect(tmp_path / "runs", tmp_path / "results")
    assert list((tmp_path / "results").glob("*/run.json")) == []
    monkeypatch.setattr(collect.shutil, "copy2", copy2)
    assert len(collect.collect(tmp_path / "runs", tmp_path / "results")) == 1
    assert sorted(path.name for path in (tmp_path / "results").glob("*/*")) == ["evals.csv", "run.json"]
    assert [path.name for path in (tmp_path / "results").iterdir()] == [
        path.name for path in (tmp_path / "runs").iterdir()
    ]
    assert len(plot.load_runs(tmp_path / "results")["Pendulum-v1"]["DAU"][0.01]) == 1


def test_the_diagnostics_figure(tmp_path):
    """analysis/diagnostics.py reads each run's diagnostics.csv (td_rate: sqrt(losses/td) / dt, per run) and draws
    the columns asked for; runs without one, unknown columns and empty folders get a clear error."""
    import diagnostics

    for dt, seed in ((0.01, 1), (0.01, 2), (0.001, 1)):
        run_dir = write_run(tmp_path / "runs", "dau_continuous.py", dt, seed, [-1400, -200])
        td_loss = (2.0 * dt) ** 2  # a TD error of 2 per second at every dt
        rows = ["physical_time,losses/td,values/v"] + [f"{t},{td_loss},{-seed * t}" for t in (15.0, 30.0, 45.0)]
        (run_dir / "diagnostics.csv").write_text("\n".join(rows) + "\n")
    write_run(tmp_path / "runs", "dau_continuous.py", 0.002, 1, [-1400, -200])  # from before diagnostics.csv
    variant = write_run(tmp_path / "runs", "dau_continuous.py", 0.01, 1, [-1400, -200], start_time=2, round_seconds=0.1)
    (variant / "diagnostics.csv").write_text("physical_time,losses/td,values/v\n15.0,1e-4,7.0\n30.0,1e-4,8.0\n")
    by_dt = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU")
    assert sorted(by_dt) == [0.001, 0.01] and len(by_dt[0.01]) == 2
    assert all(columns["td_rate"] == pytest.approx([2.0] * 3) for seeds in by_dt.values() for _, columns in seeds)
    assert sorted(columns["values/v"][-1] for _, columns in by_dt[0.01]) == [-90.0, -45.0]
    out = tmp_path / "figure.png"
    options = diagnostics.Options(runs=(tmp_path / "runs",), env_id="Pendulum-v1", columns=("values/v", "td_rate"),
                                  out=out)  # fmt: skip
    diagnostics.main(options)
    assert out.read_bytes().startswith(b"\x89PNG")
    (seed,) = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU+round_seconds=0.1")[0.01]
    assert list(seed[1]["values/v"]) == [7.0, 8.0]  # the variant's run, apart from the paper's of the same seed
    out.unlink()
    diagnostics.main(dataclasses.replace(options, algorithms=("DAU", "DAU+round_seconds=0.1")))
    assert out.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(SystemExit, match="no column values/q in every diagnostics.csv"):
        diagnostics.main(dataclasses.replace(options, columns=("values/q",)))
    with pytest.raises(SystemExit, match=r"no finished DDPG-unscaled runs of Pendulum-v1"):
        diagnostics.main(dataclasses.replace(options, algorithms=("DAU", "DDPG-unscaled")))


def test_the_diagnostics_summary_table(tmp_path):
    """--table: per dt, the mean over seeds (range) of each run's mean over its last --window seconds, and V over
    its balance level (r + abs(A)) dt / (dt ln(1 / gamma) + terminal share)."""
    import diagnostics

    header = "physical_time,losses/td,values/v,values/abs_advantage,exploration/changed_action,batch/terminal_share"
    for seed, level in ((1, 100.0), (2, 300.0)):  # the first row is outside the last 20 s
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, [0, 0], gamma=0.8)
        rows = [
            f"10,0,{level / 10},1,0.5,0.5",
            f"30,0,{level},{level / 2},0.01,0.001",
            f"40,0,{level},{level / 2},0.03,0.001",
        ]
        (run_dir / "diagnostics.csv").write_text("\n".join([header, *rows]) + "\n")
    table = diagnostics.summary_table(diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU"), 20, 1.0)
    ratios = [level / ((1 + level / 2) * 0.01 / (0.01 * math.log(1.25) + 0.001)) for level in (100.0, 300.0)]
    assert table.splitlines()[2] == (
        f"| 0.01 | 2 | 200.0 (100.0-300.0) | 100.0 (50.0-150.0) | 0.0200 (0.0200-0.0200) | 0.0010 (0.0010-0.0010) | "
        f"{np.mean(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |"
    )
    assert "balance" not in diagnostics.summary_table(
        diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU"), 20
    )
    continuous = write_run(tmp_path / "continuous", "dau_continuous.py", 0.01, 1, [0, 0])  # no changed-action share
    (continuous / "diagnostics.csv").write_text("physical_time,losses/td,values/v,values/abs_advantage,"
                                                "batch/terminal_share\n30,0,-50,2,0\n")  # fmt: skip
    table = diagnostics.summary_table(diagnostics.load_diagnostics(tmp_path / "continuous", "Pendulum-v1", "DAU"), 20)
    row = "| 0.01 | 1 | -50.0 (-50.0--50.0) | 2.0 (2.0-2.0) | 0.0000 (0.0000-0.0000) |"
    assert "changed" not in table and table.splitlines()[2] == row


def test_split_sets_the_runs_below_a_return_apart_from_the_others(tmp_path):
    """--split RETURN: each table for the runs whose second-half mean evaluation is below RETURN, then the others."""
    import diagnostics

    for seed in (1, 2, 3):  # second-half means (evaluations from 20 s of 40) 100, 200, 300
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, [0, 0, 100 * seed, 100 * seed],
                            eval_every=15, total_time=40.0)  # fmt: skip
        rows = [f"{t},{seed},{seed},{seed},0.5" for t in (10, 20, 30, 40)]
        header = "physical_time,values/v,optimizer/grad_rms_value,optimizer/grad_rms_advantage,batch/terminal_td_share"
        (run_dir / "diagnostics.csv").write_text("\n".join([header + ",losses/td", *(f"{row},0.0" for row in rows)]))
    table_path = tmp_path / "split.md"
    options = diagnostics.Options(runs=(tmp_path / "runs",), env_id="Pendulum-v1", columns=("values/v",),
                                  probe=(0, 40), split=150, table=table_path, out=tmp_path / "split.png")  # fmt: skip
    diagnostics.main(options)
    below, rest = table_path.read_text().split("DAU, " + str(tmp_path / "runs"))[1:]
    # The probe's column "eval": each run's mean evaluation over 0-40 s (at 0, 15 and 30 s), a third of 100 seed.
    assert below.startswith(", second-half mean below 150:") and "| 0.01 | 1 | 33.3 (33.3-33.3) |" in below
    assert rest.startswith(", second-half mean 150 or more:") and "| 0.01 | 2 | 83.3 (66.7-100.0) |" in rest


def test_split_refuses_a_run_it_cannot_score_naming_it(tmp_path):
    """--split RETURN has no side for a run without a second-half mean evaluation (no evaluation in that half, or a
    NaN one): it is refused, naming each such run and the flags that leave it out, before anything is written
    (issue 73: it was left out of both tables without a word)."""
    import diagnostics

    header = "physical_time,values/v,optimizer/grad_rms_value,optimizer/grad_rms_advantage,batch/terminal_td_share"
    # Evaluations at 0, 15, 30 and 45 s of 40: seed 3's end at 15 s, seed 4's second half has a NaN.
    for seed, returns in ((1, [0, 0, 100, 100]), (2, [0, 0, 300, 300]), (3, [0, 0]), (4, [0, 0, 100, "nan"])):
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, returns, eval_every=15, total_time=40.0)
        rows = [f"{t},{seed},{seed},{seed},0.5,0.0" for t in (10, 20, 30, 40)]
        (run_dir / "diagnostics.csv").write_text("\n".join([header + ",losses/td", *rows]))
    table_path, out = tmp_path / "split.md", tmp_path / "split.png"
    options = diagnostics.Options(runs=(tmp_path / "runs",), env_id="Pendulum-v1", columns=("values/v",),
                                  probe=(0, 40), split=150, table=table_path, out=out)  # fmt: skip
    with pytest.raises(SystemExit) as refused:
        diagnostics.main(options)
    message, runs = str(refused.value), tmp_path / "runs" / "Pendulum-v1__dau_discrete__dt0.01"
    assert message.startswith("error: --split: 2 runs have no second-half mean evaluation to split by: "), message
    assert f"{runs}__3__1 (no evaluation from 20 s on, the second half of its 40 s)" in message, message
    assert f"{runs}__4__1 (a NaN evaluation from 20 s on, the second half of its 40 s)" in message, message
    assert "__1__1" not in message and "__2__1" not in message
    assert "--seeds" in message and "without --split" in message
    assert not table_path.exists() and not out.exists()
    diagnostics.main(dataclasses.replace(options, split=None))  # without --split, all four runs in one table
    assert "| 0.01 | 4 |" in table_path.read_text()
    diagnostics.main(dataclasses.replace(options, seeds=(1, 2)))  # without the two, split as before
    below, rest = table_path.read_text().split("DAU, " + str(tmp_path / "runs"))[1:]
    assert "| 0.01 | 1 |" in below and "| 0.01 | 1 |" in rest


def test_the_diagnostics_probe_table(tmp_path):
    """--probe FROM TO: per dt, each run's mean evaluation from FROM to TO, V's least-squares climb per second and V
    at TO, the RMS TD error per second, RMSprop's denominators and the terminal share of td^2, over the rows after
    FROM up to TO (a longer run counts up to TO); --seeds keeps those seeds; an algorithm may be in either folder."""
    import diagnostics

    header = ("physical_time,losses/td,values/v,optimizer/grad_rms_value,optimizer/grad_rms_advantage,"
              "batch/terminal_td_share")  # fmt: skip
    for seed in (1, 2, 3):
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, [0, 10 * seed, 20, 500], eval_every=15)
        rows = [
            f"{t},{(2 * 0.01) ** 2},{seed * t + (t == 10) * 99},{seed},{3 * seed},0.5" for t in (10, 20, 30, 40, 50)
        ]
        (run_dir / "diagnostics.csv").write_text("\n".join([header, *rows]) + "\n")
    by_dt = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU", seeds=(1, 2))
    assert len(by_dt[0.01]) == 2
    table = diagnostics.probe_table(by_dt, 15, 40)
    # Evaluations at 15 and 30 s (10 seed and 20), rows at 20, 30 and 40 s (V = seed t: climbs seed per second).
    assert table.splitlines()[2] == (
        "| 0.01 | 2 | 17.5 (15.0-20.0) | 1.5000 (1.0000-2.0000) | 60.00 (40.00-80.00) | 2.0 (2.0-2.0) | "
        "1.5 (1-2) | 4.5 (3-6) | 0.50 (0.50-0.50) |"
    )
    # abs(A) and the changed-action share where every run logs them, here seed 1's and 2's: 0.5 s and 2 s.
    for seed in (1, 2):
        (run_dir,) = (tmp_path / "runs").glob(f"*__{seed}__*")
        lines = (run_dir / "diagnostics.csv").read_text().splitlines()
        extended = [lines[0] + ",values/abs_advantage,exploration/changed_action"]
        extended += [f"{line},{0.5 * seed},{0.01 * seed}" for line in lines[1:]]
        (run_dir / "diagnostics.csv").write_text("\n".join(extended) + "\n")
    by_dt = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU", seeds=(1, 2))
    extended = diagnostics.probe_table(by_dt, 15, 40).splitlines()
    assert extended[0].endswith("| terminal td^2 share | abs(A) | changed |")
    assert extended[2] == table.splitlines()[2] + " 0.75 (0.50-1.00) | 0.0150 (0.0100-0.0200) |"
    other = tmp_path / "other"
    write_run(other, "dau_discrete.py", 0.01, 1, [0, 0], round_seconds=0.1)
    (next(other.iterdir()) / "diagnostics.csv").write_text("\n".join([header, *rows]) + "\n")
    table_path = tmp_path / "probe.md"
    options = diagnostics.Options(runs=(tmp_path / "runs", other), env_id="Pendulum-v1", columns=("values/v",),
                                  algorithms=("DAU", "DAU+round_seconds=0.1"), probe=(15, 40), table=table_path,
                                  out=tmp_path / "probe.png")  # fmt: skip
    diagnostics.main(options)
    assert table_path.read_text().count("| 0.01 |") == 2
    with pytest.raises(SystemExit, match=r"no finished DAU\+tau=0.5 runs of Pendulum-v1 .* in .*runs or .*other"):
        diagnostics.main(dataclasses.replace(options, algorithms=("DAU", "DAU+tau=0.5")))


def test_compare_sets_variants_beside_the_reference_and_refuses_what_it_cannot_compare(tmp_path):
    """analysis/compare.py: a variant's row and P(variant > reference) per dt, "—" where the variant has no runs; a
    variant at a dt the reference lacks, or two folders under one label, are refused."""
    import compare

    for seed, shift in ((1, 0.0), (2, 20.0)):
        for dt in (0.01, 0.001):
            write_run(tmp_path / "paper", "dau_discrete.py", dt, seed, [-1400, -300 + shift, -200 + shift])
        write_run(tmp_path / "variant", "dau_discrete.py", 0.01, seed, [-1400, -100 + shift, -100 + shift])
    options = compare.Options(variants=(tmp_path / "variant",), labels=("v",), reference=tmp_path / "paper",
                              env_id="Pendulum-v1", total_time=600.0)  # fmt: skip
    rows = compare.comparison_table(options).splitlines()
    # Scores: the evaluations over the second half of 600 s, here the last one alone.
    assert rows[2].startswith("| paper's DAU (n=2,2) | -190.0 [-200.0, -180.0] | -190.0 [-200.0, -180.0] | 1.00 [")
    assert rows[3] == "| v (n=2,0) | -90.0 [-100.0, -80.0] | — | — | — | — |"  # no ratios over part of the dt
    assert rows[4] == "| P(v > paper's DAU) | 1.00 [1.00, 1.00] | — | | | |"
    # --dts: the folders at those dt alone, on the reference table's scale: the variant's verdict over dt 0.01 only
    only = compare.comparison_table(dataclasses.replace(options, dts=(0.01,))).splitlines()
    assert only[0].count("| dt ") == 1 and only[2].startswith("| paper's DAU (n=2) | -190.0 [-200.0, -180.0] |")
    assert "dt 0.01 +" in only[-1] and "no verdict" not in only[-1] and "no verdict" in rows[-1]
    write_run(tmp_path / "variant", "dau_discrete.py", 0.002, 1, [-1400, -100, -100])
    with pytest.raises(SystemExit, match="at the reference's dt"):
        compare.comparison_table(options)
    with pytest.raises(SystemExit, match="each folder needs its own label"):
        compare.comparison_table(dataclasses.replace(options, labels=("paper's DAU",)))


def test_a_variant_is_more_robust_only_where_it_is_no_worse_at_every_dt_and_better_at_some():
    """compare.step_verdict, the rule of issue 64: worse at one dt outweighs better at another; better at one and
    unresolved elsewhere is more robust; nothing resolved is undecided; missing a dt gives no verdict."""
    import compare

    reference = {0.01: [0.90, 1.00, 0.95, 0.92], 0.001: [0.50, 0.60, 0.55, 0.52]}
    worse_and_better = {0.01: [0.20, 0.30, 0.25, 0.22], 0.001: [0.90, 1.00, 0.95, 0.92]}
    verdict = compare.step_verdict(worse_and_better, reference, resamples=2000)
    assert verdict.startswith("dt 0.01 -0.70 [") and verdict.endswith("worse at dt 0.01)")
    assert "not more robust" in verdict and "dt 0.001 +0.40 [" in verdict
    better_at_one = {0.01: reference[0.01], 0.001: worse_and_better[0.001]}
    verdict = compare.step_verdict(better_at_one, reference, resamples=2000)
    assert verdict.startswith("dt 0.01 +0.00 [") and "] unresolved; dt 0.001 +0.40 [" in verdict
    assert verdict.endswith("] better: more robust (no worse at any dt, better at dt 0.001)")
    assert compare.step_verdict(reference, reference, resamples=2000).endswith(": undecided (no dt resolved)")
    assert compare.step_verdict({0.01: reference[0.01]}, reference) == "not at every dt of the reference: no verdict"


@pytest.mark.slow
def test_a_grid_with_round_seconds_knows_its_finished_runs_and_their_cost(workdir, monkeypatch):
    """run.json records the round --round-seconds sets (at dt 0.01, 0.2 s per env: 20 steps, 4 updates), so the
    executor resolves a point's round the same way to find its finished run; and it estimates a run's wall time
    per update, which --round-seconds does not change (here 2000 s per update measured on another seed: 4 updates
    for 0.8 s at dt 0.01, whatever the round)."""
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    first = executor("tiny.yaml", "--override", "round_seconds=0.2", "dt=0.01", cwd=workdir)
    assert "1 runs finished, 0 failed" in first.stdout, first.stdout + first.stderr
    (run,) = finished(workdir)
    assert (run["args"]["steps_per_round"], run["args"]["updates_per_round"], run["updates"]) == (20, 4, 4)
    again = executor("tiny.yaml", "--override", "round_seconds=0.2", "dt=0.01", "--dry-run", cwd=workdir)
    assert "1 already finished, 0 to run" in again.stdout, again.stdout + again.stderr
    other = executor("tiny.yaml", "--override", "dt=0.01", "--dry-run", cwd=workdir)  # the paper's round: not done
    assert "0 already finished, 1 to run" in other.stdout, other.stdout + other.stderr
    monkeypatch.chdir(workdir)
    measured = [{**run, "wall_time": 8000.0, "args": {**run["args"], "seed": 99}}]
    for overrides in (["dt=0.01", "round_seconds=0.2"], ["dt=0.01"], ["dt=0.01", "round_seconds=0.1"]):
        sweep = run_local.load_sweep("tiny.yaml", overrides)
        (point,) = run_local.grid(sweep)
        assert run_local.expected_seconds(sweep, point, measured) == pytest.approx(8000.0)


def test_near_a_deadline_the_runs_that_fit_go_first_and_a_checkpoint_counts_as_progress(workdir, monkeypatch, capsys):
    """The estimate takes the seconds per update of the same dt when a finished run has it (here 50 s at dt 0.02,
    where dt 0.01 measured 1000 s): dt 0.02's 2 updates, 100 s. With less time left than dt 0.01's 4 updates
    (4000 s), the next run is dt 0.02, though the schedule puts dt 0.01 first; with none fitting, dt 0.01. A
    SIGTERM's checkpoint after 3 of dt 0.01's updates leaves 1000 s, and dt 0.01 goes first again; a Ctrl-C's
    run.json does not say what the checkpoint holds, and counts nothing."""
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    monkeypatch.chdir(workdir)
    sweep = run_local.load_sweep("tiny.yaml")
    jobs = run_local.schedule([(sweep, point) for point in run_local.grid(sweep)])
    assert [point["dt"] for _, point in jobs] == [0.01, 0.02]
    args = {"env_id": "CartPole-v1", "seed": 99}
    measured = [{"script": "dqn_baseline.py", "dt": dt, "args": {**args, "dt": dt}, "updates": 4, "wall_time": wall}
                for dt, wall in ((0.01, 4000.0), (0.02, 200.0))]  # fmt: skip
    assert [run_local.expected_seconds(*job, measured) for job in jobs] == pytest.approx([4000.0, 100.0])
    assert run_local.expected_seconds(*jobs[1], measured[:1]) == pytest.approx(2000.0)  # no dt 0.02: any dt's
    assert run_local.next_to_run(jobs, 3000.0, measured) == 1
    assert run_local.next_to_run(jobs, 4000.0, measured) == 0
    assert run_local.next_to_run(jobs, 50.0, measured) == 0
    stopped = workdir / "runs" / "CartPole-v1__dqn_baseline__dt0.01__4__1"
    stopped.mkdir(parents=True)
    info = {"script": "dqn_baseline.py", "dt": 0.01, "args": run_local.run_args(*jobs[0]), "completed": False}
    (stopped / CHECKPOINT).write_bytes(b"")
    (stopped / "run.json").write_text(json.dumps(info | {"updates": 3, "stopped_by": "Ctrl-C"}))
    assert run_local.expected_seconds(*jobs[0], measured) == pytest.approx(4000.0)
    (stopped / "run.json").write_text(json.dumps(info | {"updates": 3, "stopped_by": "SIGTERM"}))
    assert run_local.expected_seconds(*jobs[0], measured) == pytest.approx(1000.0)
    assert run_local.next_to_run(jobs, 3000.0, measured) == 0
    # The scripts write run.json atomically, so a reader never sees half of one: half a file is damage (a copy cut
    # short, a full disk), refused in one line naming it, once, and the executor goes on with the other runs
    # (issue 66: raised in a worker, it stopped every run of the call).
    cut = workdir / "runs" / "CartPole-v1__dqn_baseline__dt0.02__4__2"
    cut.mkdir()
    (cut / "run.json").write_text(json.dumps(info)[:40])
    (cut / CHECKPOINT).write_bytes(b"")
    capsys.readouterr()
    assert run_local.next_to_run(jobs, 3000.0, measured) == 0  # the stopped run's checkpoint still counts
    assert run_local.finished_runs(workdir / "runs") == []
    refused = capsys.readouterr().err.splitlines()
    assert len(refused) == 1 and "dt0.02__4__2/run.json is not a whole run.json" in refused[0], refused


def test_one_algorithms_table_and_page(tmp_path):
    """--algorithms DDPG keeps DDPG's rows and the probabilities that involve it, with the numbers of the whole
    table; --page writes the table between the page's markers and leaves the rest of the page as it was."""
    import plot

    for seed, shift in ((1, 0.0), (2, 20.0)):
        write_run(tmp_path / "runs", "dau_continuous.py", 0.01, seed, [-1400, -600, -160 + shift])
        write_run(tmp_path / "runs", "ddpg_baseline.py", 0.01, seed, [-1400, -500, -300 + shift], scaled=False)
    page = tmp_path / "page.md"
    markers = plot.page_markers(tmp_path / "runs")  # this folder's table; another folder's stays as it is
    other = plot.page_markers(tmp_path / "other_runs")
    page.write_text(
        f"# A page\n\n{markers[0]}\nold table\n{markers[1]}\n\n{other[0]}\nother table\n{other[1]}\n\nAfter.\n"
    )
    options = plot.Options(runs=tmp_path / "runs", out=tmp_path / "ddpg.png", algorithms=("DDPG",), page=page)
    plot.main(options)
    full = plot.robustness_table(plot.load_runs(tmp_path / "runs")).splitlines()
    table = plot.robustness_table(plot.load_runs(tmp_path / "runs"), selected=("DDPG",)).splitlines()
    assert any(line.startswith("| DAU |") for line in full) and not any(line.startswith("| DAU |") for line in table)
    assert [line for line in table if line.startswith("|")] == [
        line for line in full if line.startswith(("| algorithm", "|---", "| DDPG", "| P(DAU > DDPG"))
    ]
    text = page.read_text()
    assert text.startswith("# A page\n\n") and text.endswith(
        f"{markers[1]}\n\n{other[0]}\nother table\n{other[1]}\n\nAfter.\n"
    )
    assert "\n".join(table) in text and "old table" not in text
    assert (tmp_path / "ddpg.png").read_bytes().startswith(b"\x89PNG")
    page.write_text("no markers\n")
    with pytest.raises(SystemExit, match="must be a file with one line"):
        plot.main(options)


def test_the_spread_of_one_command_over_every_run_on_file(tmp_path, monkeypatch):
    """spread.py gathers one (algorithm, env, dt) from several folders (the same seed in two folders is two runs, a
    folder named twice counts once), leaves out other dts, algorithms and unfinished runs, and gives each run's last,
    final and best evaluation, the mean with its interval and how many runs end above each threshold; --page writes
    it between its markers. A missing folder, or runs of another budget, stop it with what is wrong."""
    import spread

    write_run(tmp_path / "grid", "dau_continuous.py", 0.01, 1, [-1400, -200, -100, -300])
    write_run(tmp_path / "grid", "dau_continuous.py", 0.01, 2, [-1400, -900, -800, -700])
    write_run(tmp_path / "grid", "dau_continuous.py", 0.001, 1, [-1400, 0, 0, 0])  # another dt
    write_run(tmp_path / "grid", "ddpg_baseline.py", 0.01, 1, [-1400, 0, 0, 0])  # another algorithm
    unfinished = write_run(tmp_path / "grid", "dau_continuous.py", 0.01, 3, [-1400, 0, 0, 0])
    (unfinished / "run.json").write_text(json.dumps({**json.loads((unfinished / "run.json").read_text()),
                                                     "completed": False}))  # fmt: skip
    card = write_run(tmp_path / "card", "dau_continuous.py", 0.01, 1, [-1400, -300, -150, -150], wall_time=120.0)
    (card / "run.json").write_text(json.dumps({**json.loads((card / "run.json").read_text()),
                                               "machine": {"torch_threads": 2}}))  # fmt: skip
    page = tmp_path / "page.md"
    page.write_text(f"# Headline\n\n{spread.PAGE_MARKERS[0]}\nold spread\n{spread.PAGE_MARKERS[1]}\n\nAfter.\n")
    monkeypatch.chdir(tmp_path)
    options = spread.Options(runs=(Path("grid"), Path("card"), tmp_path / "grid"), env_id="Pendulum-v1", dt=0.01,
                             last=2, thresholds=(-500.0, -200.0), out=tmp_path / "spread.png", page=page)  # fmt: skip
    spread.main(options)
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ")][1:]
    assert rows == ["| grid | 1 | — | 1.0 | -300 | -200 | -100 |", "| grid | 2 | — | 1.0 | -700 | -750 | -700 |",
                    "| card | 1 | 2 | 2.0 | -150 | -150 | -150 |"]  # fmt: skip
    low, high = robustness.interval((np.array([-200.0, -750.0, -150.0]),), np.mean)
    assert (f"Final return over 3 runs: mean -367 [{low:.0f}, {high:.0f}], median -200, from -750 to -150. "
            "Runs that end above -500: 2 of 3; -200: 1 of 3.") in page.read_text()  # fmt: skip
    assert page.read_text().startswith("# Headline\n\n") and page.read_text().endswith("\n\nAfter.\n")
    assert "old spread" not in page.read_text() and (tmp_path / "spread.png").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(SystemExit, match="no finished DAU runs of Pendulum-v1 at dt 0.002"):
        spread.main(dataclasses.replace(options, dt=0.002))
    with pytest.raises(SystemExit, match="--runs elsewhere is not a folder"):
        spread.main(dataclasses.replace(options, runs=(Path("grid"), Path("elsewhere"))))
    write_run(tmp_path / "longer", "dau_continuous.py", 0.01, 1, [-1400, -150], total_time=1200.0)
    with pytest.raises(SystemExit, match=r"differ in \(total_time, eval_every\)"):
        spread.main(dataclasses.replace(options, runs=(Path("grid"), Path("longer"))))
    page.write_text("no markers\n")
    with pytest.raises(SystemExit, match="must be a file with one line"):
        spread.main(options)


def test_the_time_left_to_an_episodes_end_on_a_hand_made_memory():
    """analysis/failure_boundary.py: two envs, rows in the order they were made (step by step, env 0 then env 1).
    Env 0 fails at its 3rd step and runs on; env 1 is truncated at its 2nd step (its next row starts elsewhere) and
    fails at its 4th. The rows after an env's last end have no known end."""
    import failure_boundary

    dt, steps = 0.5, 5
    obs = np.zeros((steps * 2, 1))
    next_obs = np.zeros((steps * 2, 1))
    for step in range(steps):
        for env in range(2):
            obs[2 * step + env] = 10 * env + step  # each env's next row starts from the last row's next_obs
            next_obs[2 * step + env] = 10 * env + step + 1
    next_obs[2 * 1 + 1] = 99  # env 1's 2nd step: truncated (its next row starts from 12, not 99)
    terminated = np.zeros(steps * 2)
    terminated[2 * 2 + 0] = terminated[2 * 3 + 1] = 1
    seconds, failure, known = failure_boundary.time_left(obs, terminated, next_obs, num_envs=2, dt=dt)
    assert seconds[0::2][:3].tolist() == [1.5, 1.0, 0.5] and failure[0::2][:3].all() and known[0::2][:3].all()
    assert not known[0::2][3:].any()  # env 0 after its failure: no end in the memory
    assert seconds[1::2][:4].tolist() == [1.0, 0.5, 1.0, 0.5] and known[1::2][:4].all() and not known[1::2][4]
    assert failure[1::2][:4].tolist() == [False, False, True, True]
    seconds, failure = np.array([0.01, 0.05, 0.06, 0.5, 1.5, 2.5, 0.3]), np.array([1, 1, 1, 1, 1, 1, 0], bool)
    groups = failure_boundary.group_of(seconds, failure)
    assert groups.tolist() == [0, 1, 2, 3, 5, 6, 6]  # (0, 0.01], (0.01, 0.05], ..., (1, 2], then the rest twice


def test_the_failure_boundary_table_and_figure_from_a_runs_checkpoint(tmp_path):
    import failure_boundary

    run_script("dau_discrete.py", "--env-id", "CartPole-v1", "--dt", "0.01", "--num-envs", "4", "--num-eval-envs", "2",
               "--updates-per-round", "2", "--batch-size", "16", "--total-time", "8", "--eval-every", "8",
               "--checkpoint-every", "8", cwd=tmp_path)  # fmt: skip
    (run_dir,) = (tmp_path / "runs").glob("*__*")
    # Its TD errors are Alg. 1's, as the script's update computes them; A's gradient comes from the rows whose
    # action is not the greedy one only.
    args, value, advantage, fields = failure_boundary.load_run(run_dir)
    _, tds, exploring = failure_boundary.row_numbers(args, value, advantage, fields)
    batch = [torch.from_numpy(field) for field in fields]
    batch = [batch[0], batch[1].long(), batch[2][:, 0], batch[3][:, 0], batch[4]]
    optimizer = torch.optim.SGD([*value.parameters(), *advantage.parameters()], lr=0.0)
    stats = dau_discrete.update(batch, value, advantage, optimizer, args["dt"], args["gamma"])
    assert stats[0].item() == pytest.approx(float(np.mean(tds.astype(np.float64) ** 2)), rel=1e-4)
    greedy = [field[~exploring] for field in batch]
    dau_discrete.update(greedy, value, advantage, optimizer, args["dt"], args["gamma"])
    assert all(parameter.grad.abs().max() == 0 for parameter in advantage.net.parameters())
    assert 0 < exploring.mean() < 0.5
    result = failure_boundary.summary(run_dir)
    # The same numbers from the rows walked here, env by env: each row's steps left to its episode's last step (a
    # termination, or a truncation: the env's next row does not start from this row's s'), the rows after an env's
    # last episode end left out. Fails on a group edge off by a step, a share over the wrong rows (A's over all rows,
    # not only those not greedy) and percentiles of td instead of |td / dt|.
    obs, _, _, terminated, next_obs = fields
    num_envs, steps_total = 4, len(obs) // 4
    steps_left, failed = np.full(len(obs), -1), np.zeros(len(obs), dtype=bool)
    for env in range(num_envs):
        episode = []
        for step in range(steps_total):
            row = step * num_envs + env
            episode.append(row)
            truncated = step + 1 < steps_total and not np.array_equal(next_obs[row], obs[row + num_envs])
            if terminated[row, 0] or truncated:
                for left, member in enumerate(reversed(episode), start=1):
                    steps_left[member], failed[member] = left, bool(terminated[row, 0])
                episode = []
    known = steps_left > 0
    rates = np.abs(tds[: len(obs)]) / 0.01
    not_greedy_rates = rates * exploring[: len(obs)]  # A's gradient: the rows whose action is not the greedy one
    assert result["dt"] == 0.01 and result["rows"] == known.sum()
    edges = [0, 1, 5, 20, 50, 100, 200]  # the groups' edges in steps at dt 0.01: 0, 0.01, 0.05, ..., 2 s
    groups = {f"{low / 100:g}-{high / 100:g} s": known & failed & (steps_left > low) & (steps_left <= high)
              for low, high in zip(edges[:-1], edges[1:], strict=True)}  # fmt: skip
    groups["rest"] = known & ~np.any(list(groups.values()), axis=0)
    assert sum(members.any() for members in groups.values()) >= 4  # rows in several groups, "rest" among them
    for name, members in groups.items():
        group = result["groups"][name]
        assert group["rows"] == members.sum(), name
        assert group["value_share"] == pytest.approx(rates[members].sum() / rates[known].sum(), abs=1e-6), name
        assert group["advantage_share"] == pytest.approx(
            not_greedy_rates[members].sum() / not_greedy_rates[known].sum(), abs=1e-6
        ), name
    assert result["td_rate_percentiles"] == pytest.approx(np.percentile(rates[known], [50, 90, 99]), rel=1e-5)
    text = failure_boundary.table([result])
    assert "| 0.01 | 1 | 0.2-0.5 s |" in text and "| rest |" in text
    failure_boundary.draw([run_dir], tmp_path / "boundary.png")
    assert (tmp_path / "boundary.png").stat().st_size > 10_000
