"""The sweeps: the sweep files (valid grids, the agent's command runs), the local runner (sweeps/run_local.py: the
hours given, resumability, several calls and workers on one runs/ folder) and collect.py."""

import errno
import itertools
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

import gymnasium as gym
import psutil
import pytest
from helpers import ROOT, TINY_SWEEP, described_point, executor, start_and_signal, with_ctrl_c
from test_analysis import write_run

from harness import archive
from harness.checkpoint import CHECKPOINT
from harness.run_info import NON_FINITE_LOSS
from harness.settings import ENV_SETTINGS
from sweeps import grid_runs, run_local
from sweeps.migrate_runs import described

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
    pinned = {run_local.point_identity(sweep, point) for sweep in sweeps
              if "policy_learning_rate" in sweep["parameters"] for point in run_local.grid(sweep)}  # fmt: skip
    assert len(sweep_files) == 2 * len(files) and len(readme) == {0.05: 4, 0.01: 8}[dt]
    assert sorted(archive.identity(run) for run in runs) == sorted(points)  # each file's point ran
    for run in runs:
        assert run["dt"] == dt and run["args"]["track"] and run["args"]["seed"] == 1
        settings = ENV_SETTINGS[gym.spec(run["args"]["env_id"]).name]  # the table reaches every agent's run
        for key in set(settings) & set(run["args"]) - {"total_time", "eval_every"}:  # the budget is the sweep's
            wanted = settings[key]
            if key == "policy_learning_rate" and run["script"] == "ddpg_baseline.py" and not run["args"]["scaled"]:
                # the unscaled actor takes the critic's rate (issue 84), unless its file pins the table's (a README
                # row made before)
                wanted = settings[key] if archive.identity(run) in pinned else run["args"]["learning_rate"]
            assert run["args"][key] == wanted, (run["script"], key)
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
    (measured / "run.json").write_text(json.dumps(info | described(info)))  # as a run writes it (schema, label...)
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


@pytest.mark.slow
def test_ctrl_c_stops_the_runs_cleanly_and_keeps_their_logs(workdir):
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    process = subprocess.Popen(
        [sys.executable, "-m", "sweeps.run_local", "tiny.yaml", "--override", "total_time=4000", "eval_every=2000"],
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
    worker, started, stopped, first_running = threading.local(), [], threading.Event(), threading.Event()

    class Pool(run_local.ThreadPoolExecutor):  # numbers the workers in the order they are submitted
        submitted = 0

        def submit(self, work, *args):
            index, self.submitted = self.submitted, self.submitted + 1

            def numbered(*args):
                worker.index = index
                return work(*args)

            return super().submit(numbered, *args)

    claim = run_local.claim

    def claim_once_the_first_run_is_going(identity):  # the call waits on the first run when the second one fails
        if worker.index == 1:  # here, not in Popen: the call starts its runs under a lock, which the wait would hold
            first_running.wait(timeout=10)
        return claim(identity)

    class Run:  # the first worker's run goes on until a SIGTERM (10 s at most); the second worker's cannot start
        def __init__(self, command, **kwargs):
            if worker.index == 1:
                raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
            started.append(command)

        def send_signal(self, signum):
            stopped.set()

        def wait(self):
            first_running.set()
            stopped.wait(timeout=10)
            return 0

    monkeypatch.setattr(run_local, "ThreadPoolExecutor", Pool)
    monkeypatch.setattr(run_local, "claim", claim_once_the_first_run_is_going)
    monkeypatch.setattr(run_local.subprocess, "Popen", Run)
    options = run_local.Options(sweeps=(workdir / "tiny.yaml",), override=("dt=0.02,0.01,0.005",), workers=2)
    run_local.plan(options)  # the script's --print-args, asked once per process (sweeps/print_args.py), not timed
    began = time.time()
    with pytest.raises(OSError, match="Resource temporarily unavailable"):
        run_local.main(options)
    assert time.time() - began < 5 and stopped.is_set() and len(started) == 1, started


def write_ended_run(sweep, command, **ending):
    """What the run of `command` (a point of `sweep`, the tiny grid's) leaves when it ends, for a stand-in of its
    process: its folder in runs/, with a run.json of the point's arguments and `ending` ("completed", "stopped_by")."""
    dt = float(next(item for item in command if item.startswith("--dt=")).split("=")[1])
    (point,) = [point for point in run_local.grid(sweep) if point["dt"] == dt]
    folders = (Path("runs", f"CartPole-v1__dqn_baseline__dt{dt:g}__4__{number}") for number in itertools.count(1))
    run_dir = next(folder for folder in folders if not folder.exists())  # a new folder, as a run makes
    run_dir.mkdir(parents=True)
    info = {"script": "dqn_baseline.py", "dt": dt, **described_point(sweep, point), "physical_time": 0.8,
            "updates": 4, "final_scaled_return": 9.0, **ending}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(info))


def test_the_runner_reads_how_each_run_ended_from_its_run_json(workdir, monkeypatch, capsys):
    """A finished run, one stopped with a checkpoint by a SIGTERM and one stopped by a SIGINT of its own all exit 0,
    and what they print is no contract: the call tells them apart by their run.json ("completed", "stopped_by"), and
    a run that exits 0 without one failed (issue 86 §2: the call read their output's lines, and counted each of these
    runs, whose output had none of the lines it looked for, as finished)."""
    monkeypatch.chdir(workdir)
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    sweep = run_local.load_sweep("tiny.yaml", ["dt=0.02,0.01,0.005,0.002"])
    endings = {"0.02": {"completed": True, "stopped_by": None}, "0.01": {"completed": False, "stopped_by": "SIGTERM"},
               "0.005": {"completed": False, "stopped_by": "Ctrl-C"}}  # fmt: skip

    class Run:  # the point's run: it prints a line of its own, leaves its run.json (dt 0.002: none) and exits 0
        def __init__(self, command, stdout, **kwargs):
            stdout.write(b"a line of the run's own\n")
            dt = next(item for item in command if item.startswith("--dt=")).split("=")[1]
            if dt in endings:
                write_ended_run(sweep, command, **endings[dt])

        def wait(self):
            return 0

    monkeypatch.setattr(run_local.subprocess, "Popen", Run)
    with pytest.raises(SystemExit) as exited:
        run_local.main(run_local.Options(sweeps=(workdir / "tiny.yaml",), override=("dt=0.02,0.01,0.005,0.002",)))
    out = capsys.readouterr().out
    assert exited.value.code == 1, out  # the run without a run.json failed
    name = "dqn_baseline env_id=CartPole-v1 dt={} seed=4"
    assert f"done    {name.format(0.02)}: scaled return 9.00 after 0.8 physical s" in out, out
    assert f"paused  {name.format(0.01)}: checkpoint saved, the next call goes on from it" in out, out
    assert f"stopped {name.format(0.005)} by a SIGINT: its evaluations so far are kept" in out, out
    assert f"FAILED  {name.format(0.002)} (exit 0): no run.json of its point; a line of the run's own" in out, out
    assert "1 runs finished, 1 failed" in out and "1 runs stopped at a checkpoint: run the same command" in out, out
    assert "1 runs interrupted by a SIGINT sent to them" in out and "not started" not in out, out


def test_a_run_interrupted_by_its_own_sigint_is_not_counted_as_finished(workdir, monkeypatch, capsys):
    """A run that a SIGINT sent to it stopped (the call stops its runs with SIGTERM) exits 0 with its logs and no
    checkpoint of its own: the call says it was interrupted and that the next call goes on with it, and does not
    count it among the finished runs (issue 78, D6: "1 runs finished, 0 failed")."""
    monkeypatch.chdir(workdir)
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)

    sweep = run_local.load_sweep("tiny.yaml", ["dt=0.01"])

    class Run:  # the point's run, interrupted: its last lines, its run.json, exit status 0
        def __init__(self, command, stdout, **kwargs):
            stdout.write(b"interrupted: keeping what was logged\n")
            stdout.write(b"CartPole-v1__dqn_baseline__dt0.01__4__1: scaled return 9.00 after 0.4 physical s\n")
            write_ended_run(sweep, command, completed=False, stopped_by="Ctrl-C")

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
    runner = subprocess.Popen([sys.executable, "-m", "sweeps.run_local", "tiny.yaml", *long], cwd=workdir,
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
    from analysis import scores
    from sweeps import collect

    for seed in (1, 2):
        run_dir = write_run(tmp_path / "runs", "dau_continuous.py", 0.01, seed, [-1400, -200])
        (run_dir / "model.pt").write_bytes(b"weights")
    (run_dir / "diagnostics.csv").write_text("physical_time,values/v\n1.0,-3.0\n")  # a run from before it has none
    unfinished = write_run(tmp_path / "runs", "dau_continuous.py", 0.01, 3, [-1400])
    (unfinished / "run.json").write_text(json.dumps({**json.loads((unfinished / "run.json").read_text()),
                                                     "completed": False}))  # fmt: skip
    code = [{"commit": "0123456789abcdef0123456789abcdef01234567", "uncommitted_changes": True}]
    (run_dir / "run.json").write_text(json.dumps({**json.loads((run_dir / "run.json").read_text()), "code": code}))
    command = ["-m", "sweeps.collect", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "printed")]
    printed = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert printed.stdout.splitlines()[1:] == ["  1 made by 0123456+changes", "  1 made by unrecorded"], printed.stdout
    copied = collect.collect(tmp_path / "runs", tmp_path / "results")  # each run copied, with the code that made it
    assert sorted(copied.values()) == ["0123456+changes", "unrecorded"]
    copied = sorted(path.name for path in (tmp_path / "results").glob("*/*"))
    assert copied == ["diagnostics.csv"] + ["evals.csv"] * 2 + ["run.json"] * 2
    assert collect.collect(tmp_path / "runs", tmp_path / "results") == {}  # nothing new the second time
    assert len(scores.load_runs(tmp_path / "results")["Pendulum-v1"]["DAU"][0.01]) == 2  # the plots read them


def test_a_collect_cut_short_leaves_no_partial_run(tmp_path, monkeypatch):
    """A copy stopped after a run's first file (a kill, a full disk) leaves no run folder in the results, and the
    next call copies the run whole."""
    from analysis import scores
    from sweeps import collect

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
    assert len(scores.load_runs(tmp_path / "results")["Pendulum-v1"]["DAU"][0.01]) == 1


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
    info = {"script": "dqn_baseline.py", "dt": 0.01, **described_point(*jobs[0]), "completed": False}
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


@pytest.mark.slow
def test_two_calls_on_one_folder_run_each_point_once(workdir):
    """Two calls at once on one runs/ folder: each of the two points runs once, by one of them; the other says it
    left it. The runs' arguments give the identity the executor computed for their point."""
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    command = [sys.executable, "-m", "sweeps.run_local", "tiny.yaml", "--workers", "1"]
    calls = [subprocess.Popen(command, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]  # fmt: skip
    outputs = [call.communicate(timeout=600)[0] for call in calls]
    assert all(call.returncode == 0 for call in calls), outputs
    runs = [json.loads(path.read_text()) for path in workdir.glob("runs/*/run.json")]
    assert len(runs) == 2 and len({archive.identity(run) for run in runs}) == 2, outputs
    done = sum(line.startswith("done") for output in outputs for line in output.splitlines())
    assert done == 2, outputs  # the other call left both points (or, started late, found them finished)
    sweep = run_local.load_sweep(workdir / "tiny.yaml")
    points = {run_local.point_identity(sweep, point) for point in run_local.grid(sweep)}
    assert points == {archive.identity(run) for run in runs}


@pytest.mark.slow
def test_a_stopped_point_is_resumed_by_one_call_of_two(workdir):
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    point = ["--env_id=CartPole-v1", "--dt=0.01", "--seed=4", "--total_time=40", "--num_envs=4", "--num_eval_envs=2",
             "--updates_per_round=2", "--batch_size=16", "--time_limit=0.5", "--eval_every=1"]  # fmt: skip
    returncode, _, stderr = start_and_signal("dqn_baseline.py", *point, cwd=workdir, signum=signal.SIGTERM)
    assert returncode == 0, stderr
    overrides = ["--override", "dt=0.01", "total_time=40", "eval_every=1"]
    calls = []
    for _ in range(2):
        calls.append(subprocess.Popen([sys.executable, "-m", "sweeps.run_local", "tiny.yaml", *overrides], cwd=workdir,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))  # fmt: skip
        time.sleep(0.5)
    outputs = [call.communicate(timeout=600)[0] for call in calls]
    assert all(call.returncode == 0 for call in calls) and "FAILED" not in "".join(outputs), outputs
    assert sum("done" in output for output in outputs) == 1 and sum("left" in output for output in outputs) == 1
    (run_json,) = workdir.glob("runs/*/run.json")  # resumed in its folder, by one of them
    assert json.loads(run_json.read_text())["completed"]


def test_a_claim_is_retaken_once_its_process_is_gone(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    code = (
        "import sys, time; from sweeps import run_local; held = run_local.claim('abc'); "
        "print(held is not None, flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=workdir, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "True"
    assert run_local.claim("abc") is None  # held by a live process
    holder.kill()
    holder.wait()
    held = run_local.claim("abc")  # its lock file is still there; the process is gone
    assert held is not None
    held.close()


@pytest.mark.slow
def test_a_run_stopped_by_a_non_finite_loss_is_not_run_again(workdir):
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    overrides = ["--override", "dt=0.01", "learning_rate=1e38", "checkpoint_every=0.4"]
    first = executor("tiny.yaml", *overrides, cwd=workdir)
    assert "FAILED" in first.stdout and "non-finite loss" in first.stdout, first.stdout + first.stderr
    (run_json,) = workdir.glob("runs/*/run.json")
    assert json.loads(run_json.read_text())["stopped_by"] == NON_FINITE_LOSS
    (run_json.parent / CHECKPOINT).write_bytes(b"")  # even with a checkpoint beside it, it is not resumed
    plan = executor("tiny.yaml", *overrides, "--dry-run", cwd=workdir)
    assert "0 to run; 1 stopped by a non-finite loss" in plan.stdout, plan.stdout + plan.stderr
    assert "diverged" in plan.stdout and "--resume" not in plan.stdout


@pytest.mark.slow
def test_two_sweep_files_of_one_script_write_two_logs(workdir):
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    (workdir / "tiny8.yaml").write_text(TINY_SWEEP.replace("batch_size: {value: 16}", "batch_size: {value: 8}"))
    for name in ("tiny.yaml", "tiny8.yaml"):
        assert executor(name, "--override", "dt=0.02", cwd=workdir).returncode == 0
    assert len(list(workdir.glob("runs/sweep_logs/*.log"))) == 2


def test_the_executor_refuses_a_run_json_in_its_plan_and_in_a_worker_and_runs_the_point(workdir, monkeypatch, capsys):
    """A run.json that read_run refuses, in runs/ when the call plans (no "args") or put there while a worker starts
    the point (a folder named run.json, found by the worker's check that no other call ran the point since the
    plan), is refused in one line each, once, saying that its point runs again in a new folder; the call goes on
    and runs the point from the start (issue 73: the plan raised, and the worker's error stopped the call)."""
    monkeypatch.chdir(workdir)
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    sweep = run_local.load_sweep(workdir / "tiny.yaml", ["dt=0.01"])
    (point,) = run_local.grid(sweep)
    planned = workdir / "runs" / "CartPole-v1__dqn_baseline__dt0.01__4__1"
    planned.mkdir(parents=True)
    (planned / "run.json").write_text(json.dumps({"script": "dqn_baseline.py", "dt": 0.01, "completed": True}))
    (planned / CHECKPOINT).write_bytes(b"")  # not resumed: its run.json does not say which point it is
    claim = run_local.claim

    def claim_as_a_run_json_appears(identity):
        (workdir / "runs" / "CartPole-v1__dqn_baseline__dt0.01__4__2" / "run.json").mkdir(parents=True)
        return claim(identity)

    started = []

    class Run:  # the point's run: it ends at once, finished
        def __init__(self, command, **kwargs):
            started.append(command)
            write_ended_run(sweep, command, completed=True, stopped_by=None)

        def wait(self):
            return 0

    monkeypatch.setattr(run_local, "claim", claim_as_a_run_json_appears)
    monkeypatch.setattr(run_local.subprocess, "Popen", Run)
    run_local.main(run_local.Options(sweeps=(workdir / "tiny.yaml",), override=("dt=0.01",), workers=1))
    out, err = capsys.readouterr()
    assert "1 runs in the grid, 0 already finished, 1 to run\n" in out and "1 runs finished, 0 failed" in out, out
    assert started == [run_local.agent_command(sweep, point)]  # no --resume
    refusals = err.splitlines()
    assert len(refusals) == 2, refusals
    assert refusals[0].startswith(f'refused runs/{planned.name}/run.json is not a run.json (no "args" object)')
    assert refusals[1].startswith("refused runs/CartPole-v1__dqn_baseline__dt0.01__4__2/run.json cannot be read")
    again = "going on without it: if it is a run of this grid, its point runs again from the start, in a new folder"
    assert all(line.endswith(again) for line in refusals), refusals


def test_workers_that_find_one_refused_run_json_at_once_say_it_once(tmp_path, monkeypatch, capsys):
    """The workers' threads read runs/ at once: the refusal is said once, also when a thread switch falls between
    one's check that it was not said and its note that it was (here a sleep there, as the scheduler may make)."""
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "run.json").write_text("{")

    class SlowSet(set):
        def __contains__(self, item):
            found = super().__contains__(item)
            time.sleep(0.2)
            return found

    monkeypatch.setattr(grid_runs, "REFUSED", SlowSet())
    together = threading.Barrier(2)

    def read():
        together.wait()
        assert run_local.readable_runs(tmp_path) == []

    workers = [threading.Thread(target=read) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    refusals = capsys.readouterr().err.splitlines()
    assert len(refusals) == 1 and "cut/run.json is not a whole run.json" in refusals[0], refusals


def test_a_point_that_diverged_in_another_call_after_this_one_planned_is_not_run_again(workdir, monkeypatch, capsys):
    """Between a call's plan and its claim on a point, another call runs the point and it stops on a non-finite
    loss: the claim's check finds that run and leaves the point (it looked at finished runs only)."""
    monkeypatch.chdir(workdir)
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    sweep = run_local.load_sweep(workdir / "tiny.yaml", ["dt=0.01"])
    (point,) = run_local.grid(sweep)
    claim = run_local.claim

    def claim_after_another_call_ran_it(identity):  # the other call's run, ended since the plan
        run_dir = workdir / "runs" / "CartPole-v1__dqn_baseline__dt0.01__4__1"
        run_dir.mkdir(parents=True, exist_ok=True)
        info = {"script": "dqn_baseline.py", "dt": 0.01, **described_point(sweep, point), "completed": False,
                "stopped_by": NON_FINITE_LOSS}  # fmt: skip
        (run_dir / "run.json").write_text(json.dumps(info))
        return claim(identity)

    def no_run(*args, **kwargs):
        raise AssertionError("the point was run again")

    monkeypatch.setattr(run_local, "claim", claim_after_another_call_ran_it)
    monkeypatch.setattr(run_local.subprocess, "Popen", no_run)
    run_local.main(run_local.Options(sweeps=(workdir / "tiny.yaml",), override=("dt=0.01",), workers=1))
    assert "left   dqn_baseline env_id=CartPole-v1 dt=0.01 seed=4: another call ran it" in capsys.readouterr().out
