"""Checkpoints and --resume through the scripts' command line: a run stopped by SIGTERM, killed, or extended
goes on to the same evals.csv and diagnostics.csv as the run never stopped; what cannot be resumed is refused,
before any work."""

import io
import json
import math
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from helpers import ROOT, TINY, read_evals, run_script, start_and_signal

from harness.checkpoint import CHECKPOINT
from harness.files import save_checkpoint

# script, env, other arguments: Pendulum and CartPole with each script, one MuJoCo env. The baselines with
# --tau 0.5 (their default there is 0: the targets would be the networks themselves, and a resume that lost them
# would pass). At dt 0.01 a TINY round is 0.4 physical s; 100 rounds, so that a signal sent after the second
# evaluation lands mid-run. diagnostics.csv has a row every --eval-every / 10 s: every round with TINY's 1 s, every
# third round with 12 s (CartPole DAU), so that the rounds since the last row are part of the saved state.
# dau_discrete_research.py with every option on. --exploration ou-scaled: its running spread averages over
# 1 / kappa = 2 s here (at the default kappa 7.5, a spread lost at the resume would not change an action in this
# short run). --value-horizon (and dau_continuous_horizon.py's): which rows continue their env's previous one is read
# from the restored memory. --terminal-rows: the terminal rows are found in the restored memory. --first-round-steps:
# which rounds make updates, and how many were made, are read from the restored clock.
RESEARCH = ["--exploration", "ou-scaled", "--ou-kappa", "0.5", "--value-update", "exploring",
            "--value-learning-rate", "0.05", "--learning-rate-reference-dt", "0.02", "--terminal-rows", "8",
            "--weight-decay", "0.5", "--value-horizon", "0.05", "--advantage-without-terminal-rows",
            "--advantage-rate-clip", "50", "--squared-loss", "--truncation-as-termination", "--first-round-steps", "19",
            "--zero-last-bias"]  # fmt: skip
SLOW = pytest.mark.slow  # the quick tier (-m "not slow") resumes dau_discrete.py and the discrete research variant
CASES = [
    pytest.param("dau_continuous.py", "Pendulum-v1", [], marks=SLOW),
    pytest.param("ddpg_baseline.py", "Pendulum-v1", ["--tau", "0.5"], marks=SLOW),
    ("dau_discrete.py", "CartPole-v1", ["--eval-every", "12", "--eval-in-background", "True"]),  # (off on the CPU)
    ("dau_discrete_research.py", "CartPole-v1", ["--eval-every", "12", *RESEARCH]),  # its memory's extra field
    pytest.param("dau_continuous_horizon.py", "Pendulum-v1", ["--value-horizon", "0.05"], marks=SLOW),
    pytest.param("dqn_baseline.py", "CartPole-v1", ["--tau", "0.5"], marks=SLOW),
    pytest.param("dau_continuous.py", "HalfCheetah-v4", [], marks=SLOW),
]
LONG = ["--dt", "0.01", "--total-time", "40", *TINY]


def numbers(rows):
    """evals.csv without its wall-time column."""
    return [(row["physical_time"], row["env_steps"], row["updates"], row["scaled_return"]) for row in rows]


def logged(cwd):
    """What a run logged, wall times aside: evals.csv's numbers, and diagnostics.csv whole."""
    (diagnostics,) = (cwd / "runs").glob("*__*/diagnostics.csv")
    return numbers(read_evals(cwd)), diagnostics.read_text()


def the_run(cwd):
    (run_dir,) = (cwd / "runs").glob("*__*")
    return run_dir, json.loads((run_dir / "run.json").read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Each case's run, never stopped and without --checkpoint-every: the reference."""
    cache = {}

    def get(script, env_id, *extra):
        key = (script, env_id, *extra)
        if key not in cache:
            cwd = tmp_path_factory.mktemp("uninterrupted")
            run_script(script, "--env-id", env_id, *LONG, *extra, cwd=cwd)
            cache[key] = logged(cwd)
        return cache[key]

    return get


@pytest.mark.parametrize("script,env_id,other", CASES)
def test_a_run_stopped_by_sigterm_resumes_to_the_same_evals(script, env_id, other, uninterrupted, tmp_path):
    """SIGTERM mid-run (as Slurm, a spot machine or `wandb agent` stop a job): the run saves its state at the end
    of the round and exits cleanly; --resume goes on in the same folder, and the evals.csv is the one of the run
    never stopped, value for value, and so is its diagnostics.csv (with --checkpoint-every every 2 physical s,
    which must change nothing)."""
    returncode, stdout, stderr = start_and_signal(
        script, "--env-id", env_id, *LONG, *other, "--checkpoint-every", "2", cwd=tmp_path, signum=signal.SIGTERM
    )
    assert returncode == 0, stderr[-2000:]
    assert "stopped by SIGTERM: checkpoint saved; go on with --resume runs/" in stdout
    run_dir, stopped = the_run(tmp_path)
    assert not stopped["completed"] and stopped["stopped_by"] == "SIGTERM"
    assert stopped["checkpoint"] == f"runs/{run_dir.name}/{CHECKPOINT}" and (run_dir / CHECKPOINT).is_file()
    assert 0 < stopped["physical_time"] < 40  # it stopped mid-run
    run_script(script, "--resume", f"runs/{run_dir.name}", cwd=tmp_path)
    assert the_run(tmp_path)[1]["completed"] and logged(tmp_path) == uninterrupted(script, env_id, *other)


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint_and_drops_what_it_logged_after(uninterrupted, tmp_path):
    """SIGKILL (no chance to save): the last periodic checkpoint is the one to go on from; the evaluations logged
    after it are dropped and logged again, so that the evals.csv is still the uninterrupted one. The resumed run is
    stopped again (SIGTERM) and resumed again: its checkpoint's place in evals.csv is counted in the appended file.
    (Rounds of 50 updates, so that the kill, sent once t = 6 s is logged, lands before the next checkpoint.)"""
    slow = ["--updates-per-round", "50"]
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", "--total-time", "12", *TINY[:4], *slow, *TINY[6:]]
    returncode, _, _ = start_and_signal(
        "dau_discrete.py", *args, "--checkpoint-every", "4", cwd=tmp_path, signum=signal.SIGKILL, rows=8
    )
    assert returncode == -signal.SIGKILL
    run_dir, _ = the_run(tmp_path)
    saved = torch.load(run_dir / CHECKPOINT, weights_only=True)
    evals = read_evals(tmp_path)
    saved_time = saved["counters"]["rounds_done"] * 4 * 10 * 0.01  # rounds of 4 envs x 10 steps of 0.01 s
    assert 4 <= saved_time < float(evals[-1]["physical_time"])  # logged after it
    returncode, stdout, _ = start_and_signal(
        "dau_discrete.py", "--resume", str(run_dir), cwd=tmp_path, signum=signal.SIGTERM, rows=10
    )
    assert returncode == 0 and "stopped by SIGTERM" in stdout and len(read_evals(tmp_path)) >= 9
    run_script("dau_discrete.py", "--resume", str(run_dir), cwd=tmp_path)
    reference = tmp_path / "reference"
    reference.mkdir()
    run_script("dau_discrete.py", *args, cwd=reference)
    assert logged(tmp_path) == logged(reference)


@pytest.mark.slow
def test_a_finished_run_with_checkpoints_extends_to_a_longer_budget(uninterrupted, tmp_path):
    """--checkpoint-every keeps the state before the final evaluation; --resume with a larger --total-time goes on
    from it (the replay memory, sized by the budget, grows with its rows in place) as if the run had been given
    the longer budget from the start. A shorter budget is refused. (diagnostics.csv every 3 rounds: the state at
    16 s holds the round since its last row, which the extended run's next row includes.)"""
    short = ["--env-id", "Pendulum-v1", "--dt", "0.01", "--total-time", "16", *TINY, "--eval-every", "12"]
    run_script("dau_continuous.py", *short, "--checkpoint-every", "4", cwd=tmp_path)
    run_dir, first = the_run(tmp_path)
    assert first["completed"] and first["checkpoint"] and first["physical_time"] == pytest.approx(16)
    assert torch.load(run_dir / CHECKPOINT, weights_only=True)["counters"]["window_rounds"] > 0
    refused = run_script("dau_continuous.py", "--resume", str(run_dir), "--total-time", "8", cwd=tmp_path, check=False)
    assert refused.returncode != 0 and "shorter than the run's 16" in refused.stderr
    run_script("dau_continuous.py", "--resume", str(run_dir), "--total-time", "40", cwd=tmp_path)
    extended = the_run(tmp_path)[1]
    assert extended["completed"] and extended["args"]["total_time"] == 40
    assert logged(tmp_path) == uninterrupted("dau_continuous.py", "Pendulum-v1", "--eval-every", "12")


@pytest.mark.slow
def test_a_new_checkpoint_interval_on_resume_starts_from_the_current_time(tmp_path):
    """--checkpoint-every may change on --resume: the next checkpoint falls on the new interval's first multiple
    after the resumed time, not one per round until the old count catches up (a 4-s run checkpointed every 100 s,
    extended to 8 s every 0.8 s: rounds of 0.4 s, so the old count wrote nine checkpoints in nine rounds)."""
    short = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "4"]
    run_script("dau_discrete.py", *short, "--checkpoint-every", "100", cwd=tmp_path)
    run_dir, _ = the_run(tmp_path)
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == ["0.0s.pt", "4.0s.pt"]
    run_script("dau_discrete.py", "--resume", str(run_dir), "--total-time", "8", "--checkpoint-every", "0.8",
               cwd=tmp_path)  # fmt: skip
    saved = sorted(float(path.name[: -len("s.pt")]) for path in (run_dir / "checkpoints").iterdir())
    assert saved == pytest.approx([0.0, 4.0, 4.8, 5.6, 6.4, 7.2, 8.0])
    assert the_run(tmp_path)[1]["completed"]


def test_the_checkpoint_holds_the_replay_memory_with_the_true_last_observation_at_a_truncation(tmp_path):
    """The saved replay memory, row by row (4 envs per step): each transition's next observation is the next
    row's observation, except at a time-limit truncation (every 0.5 s here), where it is the episode's true last
    observation, which Pendulum's own dynamics give from the state and the action. (Storing the observation
    returned by the vector env, the next episode's first, would make every next observation the next row's.)"""
    run_script("dau_continuous.py", "--env-id", "Pendulum-v1", "--dt", "0.05", "--total-time", "8", *TINY,
               "--checkpoint-every", "8", cwd=tmp_path)  # fmt: skip
    run_dir, _ = the_run(tmp_path)
    replay = torch.load(run_dir / CHECKPOINT, weights_only=True)["state"]["replay"]
    obs, action, reward, terminated, next_obs = (field.double() for field in replay["fields"])
    assert replay["size"] == 160 and not terminated.any()  # 40 steps of 4 envs, all within the buffer
    step = torch.arange(replay["size"]) // 4
    truncation = (step + 1) % 10 == 0  # 0.5 s episodes of 10 steps
    continues = ~truncation[:-4]
    torch.testing.assert_close(next_obs[:-4][continues], obs[4:][continues])
    assert not torch.isclose(next_obs[:-4][~continues], obs[4:][~continues], atol=1e-3).all(-1).any()
    # Pendulum-v1: theta_dot' = clip(theta_dot + (3 g / (2 l) sin theta + 3 u / (m l^2)) dt, -8, 8), g = 10.
    theta, theta_dot = torch.atan2(obs[:, 1], obs[:, 0]), obs[:, 2]
    torque = (action[:, 0] + 1) / 2 * 4 - 2  # [-1, 1] onto the action box [-2, 2]
    new_theta_dot = (theta_dot + (15 * torch.sin(theta) + 3 * torque) * 0.05).clamp(-8, 8)
    new_theta = theta + new_theta_dot * 0.05
    expected = torch.stack([torch.cos(new_theta), torch.sin(new_theta), new_theta_dot], -1)
    torch.testing.assert_close(next_obs[truncation], expected[truncation], atol=1e-5, rtol=1e-5)


# A script run with a SIGTERM sent to itself at one point of its run, as Slurm or a spot machine would send it
# then: while its third evaluation runs, or once its folder and lock are made (before the run has written anything).
SIGTERM_AT = """
import os, runpy, signal, sys
sys.path.insert(0, {root!r})
import harness.run


def sigterm():
    os.kill(os.getpid(), signal.{signal_name})


if {point!r} == "evaluation":
    start = harness.run.Run.start

    def start_with_a_sigterm_in_the_third_evaluation(self, *args, evaluate, **kwargs):
        evaluations = []

        def evaluate_and_be_stopped(networks):
            evaluations.append(None)
            if len(evaluations) == 3:
                sigterm()
            return evaluate(networks)

        return start(self, *args, evaluate=evaluate_and_be_stopped, **kwargs)

    harness.run.Run.start = start_with_a_sigterm_in_the_third_evaluation
else:
    claim_run_dir = harness.run.claim_run_dir

    def claim_run_dir_and_be_stopped(run_dir):
        lock = claim_run_dir(run_dir)
        sigterm()
        return lock

    harness.run.claim_run_dir = claim_run_dir_and_be_stopped  # as Run calls it
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""


def run_with_a_sigterm_at(point, script, *args, cwd, signal_name="SIGTERM"):
    probe = cwd / f"sigterm_at_{point}.py"
    probe.write_text(SIGTERM_AT.format(root=str(ROOT), point=point, script=str(ROOT / script), signal_name=signal_name))
    return run_script(str(probe), *args, cwd=cwd, check=False, ctrl_c=signal_name == "SIGINT")


@pytest.mark.slow
def test_a_sigterm_during_an_evaluation_stops_the_run_after_it(tmp_path):
    """SIGTERM while an evaluation runs (with a 30-s grace, as Slurm and spot machines give, a fine-dt run cannot
    wait for a checkpoint and a whole round more): the run stops as soon as the evaluation ends, with the state
    after it, leaving the checkpoint due at the same time to the resumed run; the resumed run logs what the run
    never stopped logs, and writes the same checkpoints. (It used to stop one round later, at 2.0 s.)"""
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "4", "--eval-every", "0.8",
            "--checkpoint-every", "0.8"]  # fmt: skip
    (tmp_path / "stopped").mkdir()
    result = run_with_a_sigterm_at("evaluation", "dau_discrete.py", *args, cwd=tmp_path / "stopped")
    assert result.returncode == 0 and "stopped by SIGTERM" in result.stdout, result.stderr[-2000:]
    run_dir, stopped = the_run(tmp_path / "stopped")
    assert stopped["stopped_by"] == "SIGTERM" and stopped["physical_time"] == pytest.approx(1.6)  # the evaluation's
    assert float(read_evals(tmp_path / "stopped")[-1]["physical_time"]) == pytest.approx(1.6)
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == ["0.0s.pt", "0.8s.pt"]
    run_script("dau_discrete.py", "--resume", str(run_dir), cwd=tmp_path / "stopped")
    (tmp_path / "whole").mkdir()
    run_script("dau_discrete.py", *args, cwd=tmp_path / "whole")
    assert logged(tmp_path / "stopped") == logged(tmp_path / "whole")
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == sorted(
        path.name for path in (tmp_path / "whole").glob("runs/*/checkpoints/*.pt"))  # fmt: skip


@pytest.mark.slow
def test_a_sigterm_once_the_run_folder_is_made_leaves_a_run_to_resume(tmp_path):
    """SIGTERM after the run's folder and its lock are made, before anything is written to it: the run stops at
    its first round with a checkpoint, which --resume goes on from, rather than dying and leaving a folder that
    holds only running.lock (which sweeps/ and --resume cannot read)."""
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "2"]
    (tmp_path / "stopped").mkdir()
    result = run_with_a_sigterm_at("folder", "dqn_baseline.py", *args, cwd=tmp_path / "stopped")
    assert result.returncode == 0 and "stopped by SIGTERM" in result.stdout, result.stderr[-2000:]
    run_dir, stopped = the_run(tmp_path / "stopped")
    assert stopped["stopped_by"] == "SIGTERM" and stopped["physical_time"] == 0 and (run_dir / CHECKPOINT).is_file()
    run_script("dqn_baseline.py", "--resume", str(run_dir), cwd=tmp_path / "stopped")
    (tmp_path / "whole").mkdir()
    run_script("dqn_baseline.py", *args, cwd=tmp_path / "whole")
    assert logged(tmp_path / "stopped") == logged(tmp_path / "whole")


def test_a_ctrl_c_once_the_run_folder_is_made_leaves_no_folder(tmp_path):
    """Ctrl-C (SIGINT, as from a terminal) after the run's folder and its lock are made, before the run writes
    anything: the process stops, and the folder goes with it, rather than staying with only running.lock in it."""
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "2"]
    result = run_with_a_sigterm_at("folder", "dqn_baseline.py", *args, cwd=tmp_path, signal_name="SIGINT")
    assert result.returncode != 0 and "KeyboardInterrupt" in result.stderr
    assert not (tmp_path / "runs").exists()


# A run that gets a SIGTERM and a Ctrl-C (SIGINT) at its third round, in either order: SIGTERM then SIGINT within the
# round (a Ctrl-C soon after a SIGTERM), or SIGINT, then SIGTERM while the run's end writes what it keeps.
TWO_SIGNALS = """
import os, runpy, signal, sys
sys.path.insert(0, {root!r})
import harness.loop

first, rounds = signal.{first}, []
end_round, end = harness.loop.Loop.end_round, harness.loop.Loop.end


def end_round_and_be_signalled(self, **kwargs):
    end_round(self, **kwargs)
    rounds.append(None)
    if len(rounds) == 3:
        os.kill(os.getpid(), first)
        os.kill(os.getpid(), signal.SIGINT)  # (the second, after a SIGTERM: raised here)


def end_and_be_signalled(self, error_type, error):
    if first == signal.SIGINT:
        os.kill(os.getpid(), signal.SIGTERM)
    return end(self, error_type, error)


harness.loop.Loop.end_round, harness.loop.Loop.end = end_round_and_be_signalled, end_and_be_signalled
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""


@pytest.mark.parametrize("first", ["SIGTERM", "SIGINT"])
def test_a_sigterm_and_a_ctrl_c_together_stop_the_run_as_a_ctrl_c(first, tmp_path):
    """A SIGTERM whose checkpoint was never saved (a Ctrl-C came first, or before the round ended) does not make the
    run a SIGTERM stop: run.json says "Ctrl-C", with the counts of the rounds done and no checkpoint, and no "stopped
    by SIGTERM" line is printed. It said "SIGTERM", which sweeps/run_local.py reads as a checkpoint at those counts
    (its --hours estimate took the run for further along than any checkpoint; issue 78, D4)."""
    probe = tmp_path / "two_signals.py"
    probe.write_text(TWO_SIGNALS.format(root=str(ROOT), first=first, script=str(ROOT / "dau_discrete.py")))
    result = run_script(str(probe), "--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "4",
                        cwd=tmp_path, check=False, ctrl_c=True)  # fmt: skip
    assert result.returncode == 0 and "interrupted: keeping what was logged" in result.stdout, result.stderr[-2000:]
    assert "stopped by SIGTERM" not in result.stdout
    run_dir, run = the_run(tmp_path)
    assert run["stopped_by"] == "Ctrl-C" and run["checkpoint"] is None and not (run_dir / CHECKPOINT).exists()
    assert run["updates"] == 3 * 2 and not run["completed"]


@pytest.mark.slow
@pytest.mark.parametrize("script", ["dau_continuous.py", "dqn_baseline.py"])
def test_eval_model_repeats_the_runs_final_evaluation(script, tmp_path):
    """model.pt keeps the evaluation envs as the final evaluation found them: --eval-model gives its return
    again, from the saved networks and normaliser (with normalisation on, so that the normaliser matters)."""
    env_id = "Pendulum-v1" if script == "dau_continuous.py" else "CartPole-v1"  # 2-s CartPole episodes can fail
    run_script(script, "--env-id", env_id, "--dt", "0.02", "--total-time", "8", *TINY, "--time-limit", "2",
               "--normalize-obs", "True", "--save-model", cwd=tmp_path)  # fmt: skip
    final = float(read_evals(tmp_path)[-1]["scaled_return"])
    (model,) = tmp_path.glob("runs/*/model.pt")
    again = run_script(script, "--eval-model", str(model), "--num-eval-envs", "2", cwd=tmp_path)
    printed = float(again.stdout.split("mean scaled return ")[1].split()[0])
    assert printed == pytest.approx(final, abs=0.006)  # printed with 2 decimals


@pytest.mark.slow
def test_bipedalwalker_resumes_with_new_episodes_in_flight(tmp_path):
    """Box2D's world cannot be saved: at --resume each training env starts a new episode (the one in flight ends
    at the checkpoint as at a truncation, its last transition bootstrapping). The run completes, its evaluations
    up to the stop are the uninterrupted run's, and it logs as many as that run."""
    args = ["--env-id", "BipedalWalker-v3", "--dt", "0.01", "--total-time", "16", *TINY, "--time-limit", "0.3"]
    reference = tmp_path / "reference"
    reference.mkdir()
    run_script("dau_continuous.py", *args, cwd=reference)
    returncode, _, stderr = start_and_signal("dau_continuous.py", *args, cwd=tmp_path, signum=signal.SIGTERM)
    assert returncode == 0, stderr[-2000:]
    run_dir, stopped = the_run(tmp_path)
    assert stopped["stopped_by"] == "SIGTERM" and stopped["physical_time"] < 16
    kept = numbers(read_evals(tmp_path))
    run_script("dau_continuous.py", "--resume", str(run_dir), cwd=tmp_path)
    resumed, expected = numbers(read_evals(tmp_path)), numbers(read_evals(reference))
    assert the_run(tmp_path)[1]["completed"] and len(resumed) == len(expected)
    assert resumed[: len(kept)] == expected[: len(kept)]
    assert all(math.isfinite(float(row[3])) for row in resumed)


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A DAU run stopped by SIGTERM, for the refusals (each test works on its own copy)."""
    cwd = tmp_path_factory.mktemp("stopped")
    start_and_signal("dau_continuous.py", "--env-id", "Pendulum-v1", *LONG, cwd=cwd, signum=signal.SIGTERM)
    run_dir, stopped = the_run(cwd)
    assert stopped["stopped_by"] == "SIGTERM"
    return run_dir


@pytest.mark.parametrize(
    "script,args,damage,message",
    [
        ("dau_continuous.py", ["--seed", "2"], None, "--seed 2 would change what it computes (it ran with 1)"),
        ("dau_continuous.py", ["--dt", "0.02"], None, "--dt 0.02 would change what it computes (it ran with 0.01)"),
        ("dau_continuous.py", ["--num-envs", "8"], None, "--num-envs 8 would change what it computes"),
        ("ddpg_baseline.py", [], None, "its checkpoint was made by dau_continuous.py, not ddpg_baseline.py"),
        ("dau_continuous.py", [], "missing", "no checkpoint.pt in it"),
        ("dau_continuous.py", [], "truncated", "is not a readable checkpoint"),
        ("dau_continuous.py", [], "garbage", "is not a readable checkpoint"),
        ("dau_continuous.py", [], "other device", "and would continue on"),
        ("dau_continuous.py", [], "older script", "its checkpoint has no noise: an older version of the script"),
    ],
)
def test_a_resume_that_cannot_be_exact_is_refused_before_any_work(script, args, damage, message, stopped_run, tmp_path):
    run_dir = tmp_path / "runs" / stopped_run.name
    run_dir.mkdir(parents=True)
    for path in stopped_run.iterdir():
        (run_dir / path.name).write_bytes(path.read_bytes())
    checkpoint = run_dir / CHECKPOINT
    if damage == "missing":
        checkpoint.unlink()
    elif damage == "truncated":  # a write cut short, with no atomic rename to protect it
        checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    elif damage == "garbage":
        checkpoint.write_bytes(b"not a checkpoint")
    elif damage == "other device":  # a GPU's run resumed on the CPU, or the other way round: other numbers
        state = torch.load(checkpoint, weights_only=True)
        save_checkpoint({**state, "device": "cpu" if torch.cuda.is_available() else "cuda"}, checkpoint)
    elif damage == "older script":  # a checkpoint without a part of the state that a newer script keeps
        state = torch.load(checkpoint, weights_only=True)
        save_checkpoint({**state, "state": {k: v for k, v in state["state"].items() if k != "noise"}}, checkpoint)
    evals_before = (run_dir / "evals.csv").read_bytes()
    result = run_script(script, "--resume", str(run_dir), *args, cwd=tmp_path, check=False, timeout=120)
    assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr
    assert (run_dir / "evals.csv").read_bytes() == evals_before  # nothing touched


def test_a_missing_run_folder_is_refused(tmp_path):
    result = run_script("dqn_baseline.py", "--resume", "runs/nothing-here", cwd=tmp_path, check=False, timeout=120)
    assert result.returncode != 0 and "--resume runs/nothing-here: no such folder" in result.stderr


KILLED_WRITER = """
import sys, time, torch
sys.path.insert(0, {root!r})
import harness.files

harness.files.save_checkpoint({{"version": 1, "data": torch.zeros(10)}}, {path!r})


class HaltingFile:  # the real file, with a pause once the 200 MB tensor has gone to it, before the zip's end
    def __init__(self, *args):
        self.file, self.written = open(*args), 0

    def write(self, data):
        count = self.file.write(data)
        self.written += count
        if self.written > 10**8:
            print("midway", flush=True)
            time.sleep(600)
        return count

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


harness.files.open = HaltingFile  # save_checkpoint's open: the kill below lands mid-write, on every machine
harness.files.save_checkpoint({{"version": 2, "data": torch.ones(50_000_000)}}, {path!r})
"""


def test_a_kill_during_a_checkpoint_write_leaves_the_previous_one_whole(tmp_path):
    """A real SIGKILL in the middle of a 200 MB checkpoint write (the writer pauses there, so no timing decides
    where the kill lands): the file a resume reads is the last complete one; the truncated one lies beside it,
    and the next save replaces it."""
    path = tmp_path / CHECKPOINT
    partial = tmp_path / f"{CHECKPOINT}.partial"
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER.format(root=str(ROOT), path=str(path))], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "midway"  # the tensor is written, the zip's directory is not
    process.kill()
    process.wait()
    checkpoint = torch.load(path, weights_only=True)  # what --resume reads is whole, and the one before
    assert checkpoint["version"] == 1 and torch.equal(checkpoint["data"], torch.zeros(10))
    whole = io.BytesIO()
    torch.save({"version": 2, "data": torch.ones(50_000_000)}, whole)
    assert 10**8 < partial.stat().st_size < len(whole.getvalue())  # the half-written one lies beside it
    with pytest.raises(RuntimeError):
        torch.load(partial, weights_only=True)
    save_checkpoint({"version": 3}, str(path))
    assert torch.load(path, weights_only=True) == {"version": 3} and not partial.exists()


def test_checkpoints_load_as_data_only(tmp_path):
    """A checkpoint is read with weights_only: a file that would run code when unpickled is refused."""
    stale = tmp_path / "runs" / "x"
    stale.mkdir(parents=True)

    class Payload:
        def __reduce__(self):
            return (print, ("code ran",))

    torch.save({"script": "dau_continuous.py", "payload": Payload()}, stale / CHECKPOINT)
    result = run_script("dau_continuous.py", "--resume", str(stale), cwd=tmp_path, check=False, timeout=120)
    assert result.returncode != 0 and "is not a readable checkpoint" in result.stderr
    assert "code ran" not in result.stdout + result.stderr


def test_the_state_round_trip_covers_every_generator(tmp_path):
    """random_state/set_random_state: the next draws of Python, NumPy and torch are the same after a restore."""
    import random

    from harness.checkpoint import random_state, set_random_state

    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    state = random_state(torch.device("cpu"))
    save_checkpoint(state, str(tmp_path / "state.pt"))
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(2)
    np.random.seed(2)
    torch.manual_seed(2)
    set_random_state(torch.load(tmp_path / "state.pt", weights_only=True))
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first


def test_a_cpu_runs_checkpoint_never_starts_cuda(monkeypatch):
    """--cpu on a GPU machine: the checkpoint's generators are Python's, NumPy's and torch's CPU one; CUDA's state
    is read only on a GPU run (reading it creates a CUDA context, half a GB of the GPU's memory, in a CPU run)."""
    from harness.checkpoint import random_state

    def no_cuda():
        raise AssertionError("a CPU run read CUDA's generators")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU machine
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", no_cuda)
    assert "cuda" not in random_state(torch.device("cpu"))
    with pytest.raises(AssertionError, match="read CUDA's generators"):
        random_state(torch.device("cuda"))


@pytest.mark.slow
def test_a_run_still_going_cannot_be_resumed_by_a_second_process(tmp_path):
    """Two executors over one runs/ folder, or a job requeued while the old one still stops: the second process
    is refused (the first holds an OS lock on its folder while it lives) and the first runs on unharmed."""
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", "--total-time", "4000", *TINY[:-2], "--eval-every", "2000"]
    first = subprocess.Popen([sys.executable, str(ROOT / "dqn_baseline.py"), *args, "--checkpoint-every", "2"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob(f"runs/*/{CHECKPOINT}")):
        time.sleep(0.05)
    (run_dir,) = (tmp_path / "runs").iterdir()
    second = run_script("dqn_baseline.py", "--resume", str(run_dir), cwd=tmp_path, check=False, timeout=120)
    assert second.returncode != 0 and f"{run_dir} is in use by another process (pid {first.pid})" in second.stderr
    assert first.poll() is None  # still going
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr[-2000:]
    assert json.loads((run_dir / "run.json").read_text())["stopped_by"] == "SIGTERM"
