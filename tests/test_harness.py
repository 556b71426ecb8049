"""The harness (harness/), what the six scripts share that is not the algorithm, tested once here: the round's
length, the run folder, run.json, the evaluation videos, the per-environment settings, an env's state for the
checkpoints, the parts' sizes, and the defects each fixed with a test that failed before."""

import ast
import contextlib
import errno
import importlib.util
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
from types import SimpleNamespace

import gymnasium as gym
import mujoco
import numpy as np
import psutil
import pytest
import torch
import tyro
from helpers import (
    ROOT,
    TINY,
    ScriptProcess,
    profiled_script,
    read_csv,
    read_evals,
    read_wandb_run,
    run_script,
    start_and_signal,
    with_ctrl_c,
)

import dau_discrete
import harness.evaluations
import harness.files
from dt_wrappers import PhysicalTime, make_env
from harness.args import buffer_rows, check_memory, set_round_seconds
from harness.checkpoint import CHECKPOINT, Resumed, save_model
from harness.clock import whole_rounds
from harness.env_state import env_state, set_env_state
from harness.evaluations import Evaluations, in_background, policy_copy
from harness.files import claim_run_dir, new_run_dir, save_json
from harness.logs import PREEMPTED_EXIT_CODE, Logs
from harness.run_info import SCHEMA, UNRECORDED, code_history, code_version, run_identity
from harness.settings import env_settings
from harness.videos import EvaluationVideos, PhysicalTimeVideo
from sweeps import run_local


@pytest.mark.slow
def test_evaluation_videos_record_evaluations_0_1_4_16_and_the_last(tmp_path):
    pytest.importorskip("moviepy")  # Gymnasium's video writer; not carried to the GPU machine
    videos = EvaluationVideos("Pendulum-v1", 0.01, 0.5, tmp_path, seed=0)
    for index in range(18):
        videos.record(lambda obs: np.zeros(1, dtype=np.float32), f"physical-time-{10 * index}s", final=index == 17)
    assert sorted(int(path.name.split("-")[2][:-1]) for path in tmp_path.glob("physical-time-*s-episode-*.mp4")) == [
        0, 10, 40, 160, 170]  # fmt: skip


@pytest.mark.slow
def test_mujoco_videos_follow_the_body(tmp_path):
    """A trained cheetah runs 50+ m in a video: frames come from the model's `track` camera, so with the body
    moved 20 m down the track it is still in the picture (its reddish pixels: none on the black and green
    floor; measured 3388 here, 0 with the default free camera)."""
    pytest.importorskip("moviepy")  # Gymnasium's video writer; not carried to the GPU machine
    videos = EvaluationVideos("HalfCheetah-v4", 0.05, 1.0, tmp_path, seed=0)
    videos.env.reset()
    base = videos.env.unwrapped
    base.data.qpos[0] = 20.0
    mujoco.mj_forward(base.model, base.data)
    frame = videos.env.render().astype(int)
    assert ((frame[..., 0] - frame[..., 1]) > 40).sum() > 500


def test_the_memory_check_sizes_the_ring_that_buffer_transitions_sets(monkeypatch, tmp_path):
    """dau_discrete_research.py's --buffer-transitions N: the memory check budgets that ring, not --buffer-time's rows,
    and a refusal names the flag. CartPole at dt 0.00002 for 12600 s with a ring of 1000000 rows (11 floats each):
    44 MB, which fits; it was refused for --buffer-time's 10000 s ("needs 22.0 GB ... lower --buffer-time"), while a
    ring of 200000000 rows with --buffer-time 1 s (8.8 GB, twice) passed unchecked (issue 86)."""
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=4e9))
    monkeypatch.chdir(tmp_path)
    cpu, dt = torch.device("cpu"), 0.00002
    args = SimpleNamespace(total_time=12600, num_envs=256, steps_per_round=10, buffer_time=10_000,
                           buffer_transitions=1_000_000, checkpoint_every=None, resume=None)  # fmt: skip
    assert buffer_rows(args, dt) == 1_000_000
    check_memory(args, dt, 11, cpu)
    ring = SimpleNamespace(**vars(args) | {"buffer_time": 1.0, "buffer_transitions": 200_000_000})
    with pytest.raises(ValueError, match=r"needs 8\.8 GB .* lower --buffer-transitions \(or --total-time\)"):
        check_memory(ring, dt, 11, cpu)
    unset = SimpleNamespace(**vars(args) | {"buffer_transitions": None})  # --buffer-time's rows, as before
    assert buffer_rows(unset, dt) == 500_000_000
    with pytest.raises(ValueError, match=r"needs 22\.0 GB .* lower --buffer-time \(or --total-time\)"):
        check_memory(unset, dt, 11, cpu)


@pytest.mark.parametrize("dt,steps,updates", [(0.01, 10, 50), (0.002, 50, 250), (0.0005, 200, 1000), (0.003, 33, 165)])
def test_round_seconds_gives_rounds_of_one_physical_length_and_the_papers_updates_per_second(dt, steps, updates):
    """--round-seconds 0.1: each env steps round(0.1 / dt) times per round (the paper's 10 steps at dt 0.01),
    with the paper's 5 updates per step; without it, the arguments stay as they are."""

    args = SimpleNamespace(round_seconds=0.1, steps_per_round=10, updates_per_round=50)
    set_round_seconds(args, dt)
    assert (args.steps_per_round, args.updates_per_round) == (steps, updates)
    unset = SimpleNamespace(round_seconds=None, steps_per_round=10, updates_per_round=50)
    set_round_seconds(unset, dt)
    assert (unset.steps_per_round, unset.updates_per_round) == (10, 50)
    for bad, message in ((0.0, "must be positive and finite"), (math.inf, "must be positive and finite"),
                         (0.4 * dt, "shorter than one step")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            set_round_seconds(SimpleNamespace(round_seconds=bad, steps_per_round=10, updates_per_round=50), dt)


def test_a_new_run_dir_never_reuses_a_folder(tmp_path):
    """The runs started in one second share a run name: the first gets runs/<run_name>, each later one the name with
    _2, _3, ... (os.mkdir, which fails on an existing folder, makes that hold between processes too)."""

    name = "Pendulum-v1__dau_continuous__dt0.01__1__1795000000"
    claimed = [new_run_dir(name, tmp_path / "runs") for _ in range(3)]
    assert claimed == [name, f"{name}_2", f"{name}_3"]
    (tmp_path / "runs" / name).rmdir()  # a name given back is free again
    assert new_run_dir(name, tmp_path / "runs") == name
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == sorted(claimed)


def test_run_json_is_replaced_whole_or_not_at_all(tmp_path):
    """save_json, which writes every run's run.json: a write that fails midway (here a value JSON cannot hold,
    after the keys before it went to the file; a kill does the same) leaves the previous file as it was, where
    opening run.json and dumping into it would leave half a file for sweeps/ to read."""

    path = tmp_path / "run.json"
    save_json({"completed": False}, str(path))
    with pytest.raises(TypeError):
        save_json({"completed": True, "machine": object()}, str(path))
    assert json.loads(path.read_text()) == {"completed": False}
    save_json({"completed": True, "updates": 50}, str(path))
    assert json.loads(path.read_text()) == {"completed": True, "updates": 50}


def test_a_run_folder_holds_running_lock_while_the_run_goes_on_and_not_after(tmp_path):
    """running.lock, with the pid, while the run goes on; removed as the process exits, however the run ended (here
    stopped by SIGTERM), so that a finished run's folder holds its results alone, as a CleanRL or SB3 user expects
    (issue 78: it stayed)."""
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "400"]
    process = ScriptProcess("dqn_baseline.py", *args, cwd=tmp_path)
    assert wait_for(lambda: bool(locks := list(tmp_path.glob("runs/*/running.lock"))) and locks[0].read_text(),
                    process)  # fmt: skip
    (lock,) = tmp_path.glob("runs/*/running.lock")
    assert lock.read_text() == str(process.pid)
    process.send_signal(signal.SIGTERM)
    returncode, stdout, stderr = process.communicate(timeout=120)
    assert returncode == 0 and "stopped by SIGTERM" in stdout, stderr
    assert sorted(path.name for path in lock.parent.iterdir()) == ["checkpoint.pt", "diagnostics.csv", "evals.csv",
                                                                    "run.json"]  # fmt: skip


def test_a_process_that_opened_running_lock_as_its_holder_removed_it_holds_a_new_one(tmp_path, monkeypatch):
    """release_run_dir removes running.lock while it still holds it: a process that opened the file before that and
    gets its lock after finds the file gone and takes a new one, so that no two processes both hold the folder."""
    from harness.files import release_run_dir

    first, released, flock = claim_run_dir(str(tmp_path)), [], harness.files.fcntl.flock

    def released_meanwhile(file, operation):  # the holder exits between this process's open and its lock
        if file is not first and not released:
            released.append(release_run_dir(str(tmp_path), first))
        return flock(file, operation)

    monkeypatch.setattr(harness.files.fcntl, "flock", released_meanwhile)
    second = claim_run_dir(str(tmp_path))
    assert released and first.closed and os.path.samestat(os.fstat(second.fileno()), os.stat(tmp_path / "running.lock"))
    with pytest.raises(ValueError, match=f"in use by another process \\(pid {os.getpid()}\\)"):
        claim_run_dir(str(tmp_path))
    release_run_dir(str(tmp_path), second)
    assert not (tmp_path / "running.lock").exists() and second.closed


# Each script's flags among the per-environment table's last two columns (its first four every script has); a star:
# the column holds with --scaled only.
OWN_COLUMNS = {"dau_continuous.py": ["policy-lr"], "ddpg_baseline.py": ["policy-lr*", "tau"], "dau_discrete.py": [],
               "dqn_baseline.py": ["tau"], "dau_discrete_research.py": [],
               "dau_continuous_horizon.py": ["policy-lr"]}  # fmt: skip


def script_module(script, monkeypatch):
    """The script imported as a module, in sys.modules while the test runs (tyro reads its Args' source there)."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", OWN_COLUMNS)
def test_the_help_shows_the_per_environment_defaults_of_the_scripts_own_flags(script, monkeypatch, capsys):
    """--help's table of per-environment defaults has a column for each flag the script has and none other: the
    discrete scripts have no --policy-learning-rate, DAU has no --tau (no target network); both were shown."""
    module = script_module(script, monkeypatch)
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exited:
        module.Run(module.Args, description=module.__doc__, script_file=module.__file__, action_space=gym.spaces.Space,
                   check_args=module.check_args)  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    title = "Per-environment defaults of the arguments left at None (harness/settings.py; seconds):"
    header = lines[lines.index(title) + 1]
    assert exited.value.code == 0 and header.split() == ["env", "total-time", "eval-every", "buffer-time", "normalize",
                                                         *OWN_COLUMNS[script]]  # fmt: skip
    # the unscaled DDPG's actor takes the critic's rate, not the column's (issue 84)
    note = [line for line in lines if line.strip().startswith("* the default with --scaled only")]
    assert len(note) == ("policy-lr*" in OWN_COLUMNS[script])


@pytest.mark.parametrize("script", OWN_COLUMNS)
def test_a_flags_help_breaks_a_line_only_between_clauses(script):
    """tyro keeps each line break of a flag's docstring in --help (the next line begins with its indentation), so a
    docstring that ran on mid-sentence printed a line cut there, at any terminal width (--eval-in-background: "None:
    on a GPU run," then "off on the CPU"). Each line of every flag's docstring, the shared flags' (harness/args.py)
    and the script's, but the last ends a clause."""
    for path, name in ((ROOT / "harness" / "args.py", "RunArgs"), (ROOT / script, "Args")):
        (args_class,) = [node for node in ast.walk(ast.parse(path.read_text()))
                         if isinstance(node, ast.ClassDef) and node.name == name]  # fmt: skip
        for field, doc in zip(args_class.body, args_class.body[1:], strict=False):
            if isinstance(field, ast.AnnAssign) and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                lines = doc.value.value.splitlines()
                assert all(line.rstrip().endswith((";", ".", ":")) for line in lines[:-1]), (path.name, lines)


# --- The parts alone: the per-environment settings, videos, an env's state ---


def test_env_settings_are_the_papers_and_follow_the_env_family():
    """The paper's appendix: normalisation for Ant, HalfCheetah and BipedalWalker (and, here, any MuJoCo
    env); policy learning rate 0.02 for Pendulum, CartPole and BipedalWalker, else 0.03; tau 0 for Pendulum
    and CartPole, else 0.9. Replay memory: 1e6 transitions at the coarsest dt of the paper's range for the
    env (0.01 s, or 0.05 s for Ant and HalfCheetah), at the native step for any other env."""
    expected = {  # env: (normalize_obs, policy_learning_rate, tau, buffer_time)
        "Pendulum-v1": (False, 0.02, 0.0, 1e6 * 0.01),
        "CartPole-v1": (False, 0.02, 0.0, 1e6 * 0.01),
        "BipedalWalker-v3": (True, 0.02, 0.9, 1e6 * 0.01),
        "Ant-v4": (True, 0.03, 0.9, 1e6 * 0.05),
        "HalfCheetah-v4": (True, 0.03, 0.9, 1e6 * 0.05),
        "Ant-v5": (True, 0.03, 0.9, 1e6 * 0.05),
        "HalfCheetah-v5": (True, 0.03, 0.9, 1e6 * 0.05),
        "Hopper-v4": (True, 0.03, 0.9, 1e6 * 0.008),
        "Acrobot-v1": (False, 0.03, 0.9, 1e6 * 0.2),
    }
    for env_id, values in expected.items():
        settings = env_settings(make_env(env_id, dt=0.01))
        got = tuple(settings[key] for key in ("normalize_obs", "policy_learning_rate", "tau", "buffer_time"))
        assert got == pytest.approx(values), env_id
        assert settings["total_time"] >= 1800 and 0 < settings["eval_every"] <= settings["total_time"] / 5, env_id


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "HalfCheetah-v4"])
def test_videos_sample_frames_in_physical_time(env_id, tmp_path):
    """A 1-second episode gives 31 frames at 30 fps (t = 0, 1/30, ..., 1) whatever dt: at dt 0.0005 (2000
    steps, a frame every ~67 steps), 0.01, and 0.05 (a step longer than a frame: frames repeat). The mp4
    plays for 1 s (moviepy 2.2 sometimes drops the last frame when it writes: 30 or 31 frames)."""
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")  # moviepy's ffmpeg: not carried to the GPU machine (68 MB)
    for dt in (0.05, 0.01, 0.0005):
        env = PhysicalTimeVideo(make_env(env_id, dt, 1.0, seed=0, render_mode="rgb_array"), tmp_path / f"dt{dt}",
                                episode_trigger=lambda episode: True, fps=30)  # fmt: skip
        env.reset()
        zero, truncated = np.zeros(env.action_space.shape, dtype=np.float32), False
        while not truncated:
            *_, truncated, _ = env.step(zero)
        assert len(env.recorded_frames) == 31, dt
        env.stop_recording()
        (path,) = (tmp_path / f"dt{dt}").glob("*.mp4")
        frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(path))
        assert frames in (30, 31) and seconds == pytest.approx(1.0, abs=1.5 / 30), dt


@pytest.mark.parametrize(
    "env_id,dt,restorable",
    [("Pendulum-v1", 0.01, True), ("CartPole-v1", 0.005, True), ("Acrobot-v1", 0.05, True),
     ("HalfCheetah-v4", 0.005, True), ("Ant-v4", 0.02, True), ("BipedalWalker-v3", 0.01, False)],
)  # fmt: skip
def test_an_env_state_put_into_another_env_steps_and_resets_the_same(env_id, dt, restorable):
    """env_state/set_env_state: an env put into another's state mid-episode (the other freshly made with another
    seed, as at --resume) gives the same observations, rewards and episode ends, and, after a reset, the same
    next episode (the env's generator). Box2D's world cannot be read back: set_env_state says so."""
    env = make_env(env_id, dt, seed=1)
    env.reset()
    env.action_space.seed(1)
    actions = [env.action_space.sample() for _ in range(60)]
    for action in actions[:20]:
        env.step(action)
    state = env_state(env)
    twin = make_env(env_id, dt, seed=2)
    twin.reset()
    assert set_env_state(twin, state) is restorable
    if not restorable:
        return
    for action in actions[20:]:
        stepped, twin_stepped = env.step(action), twin.step(action)
        np.testing.assert_array_equal(stepped[0], twin_stepped[0])
        assert stepped[1:4] == twin_stepped[1:4]
        assert ("episode" in stepped[4]) == ("episode" in twin_stepped[4])
    np.testing.assert_array_equal(env.reset()[0], twin.reset()[0])


# --- The parts' sizes ---

# Parts a maintainer can find and change alone (issue 48): no file over 400 lines, no class over 150, no function or
# method over 60, in the harness and in the time-step layer.
SIZE_LIMITS = {"file": 400, "class": 150, "function": 60}


def oversized(paths):
    """Each file, class and function (methods and nested functions included) of `paths` longer than SIZE_LIMITS,
    as "path: kind name, lines"."""
    found = []
    for path in paths:
        source = path.read_text()
        if len(source.splitlines()) > SIZE_LIMITS["file"]:
            found.append(f"{path}: file, {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                if node.end_lineno - node.lineno + 1 > SIZE_LIMITS[kind]:
                    found.append(f"{path}: {kind} {node.name}, {node.end_lineno - node.lineno + 1} lines")
    return found


def test_the_harness_and_the_time_step_layer_are_parts_of_a_readable_size(tmp_path):
    """harness/*.py and dt_wrappers.py within SIZE_LIMITS; the measure itself finds a method one line too long."""
    paths = [*sorted((ROOT / "harness").glob("*.py")), ROOT / "dt_wrappers.py"]
    assert len(paths) > 10 and oversized(paths) == []
    too_long = tmp_path / "too_long.py"
    too_long.write_text("class Part:\n    def method(self):\n" + "        pass\n" * 60)
    assert oversized([too_long]) == [f"{too_long}: function method, 61 lines"]


# --- The runs' plumbing end to end, through a script's command line ---

TINY_PENDULUM = ["--env-id", "Pendulum-v1", "--dt", "0.01", *TINY]


def offline_runs(cwd):
    return [read_wandb_run(folder) for folder in sorted(Path(cwd).glob("wandb/offline-run-*"))]


# Each evaluation slowed by a sleep as it begins, in whichever thread plays it (helpers.PROFILED): per evaluation,
# the thread that played it and the update() calls made when it began and when it ended (evaluations.json), and a
# line in began.txt as each begins.
SLOW_EVALUATIONS = """
updates, records = [0], []


def profile(frame, event, arg):
    if frame.f_code.co_filename != {script!r} or event not in ("call", "return"):
        return
    if frame.f_code.co_name == "update" and event == "call":
        updates[0] += 1
    elif frame.f_code.co_name == "evaluate" and event == "call":
        records.append([threading.current_thread().name, updates[0]])
        with open("began.txt", "a") as file:
            file.write("began\\n")
        time.sleep({sleep})
    elif frame.f_code.co_name == "evaluate":  # one thread plays the evaluations one after another
        records[-1].append(updates[0])
"""


def slow_evaluations(folder, sleep, script="dau_continuous.py"):
    """SLOW_EVALUATIONS for `script` in `folder`, whose evaluations each sleep `sleep` seconds as they begin."""
    return profiled_script(folder, script, SLOW_EVALUATIONS, "evaluations.json", sleep=sleep)


BACKGROUND_RUN = [*TINY_PENDULUM, "--total-time", "4", "--checkpoint-every", "100"]


def test_an_evaluation_in_the_background_logs_what_it_logs_at_once_while_training_goes_on(tmp_path):
    """--eval-in-background True: each evaluation plays a copy of the policy taken at the round it is due, in a thread,
    while the rounds go on (slowed by 0.5 s as each begins, so that the rounds run ahead and an evaluation ends after
    more updates than its round's); evals.csv, diagnostics.csv and the checkpoint are those of the same run
    evaluating at once (Pendulum's returns move with any change of the actor). One evaluation at a time: each has
    ended before the round of the next (a queue of them made a checkpoint wait for all, each holding a copy). run.json
    has the seconds training spent on evaluations (eval_wait_time), at once no less than the seconds they took to play
    (eval_wall_time)."""
    logged = {}
    for name, background in (("at-once", "False"), ("background", "True")):
        probe = slow_evaluations(tmp_path / name, 0.5)
        run_script(str(probe), *BACKGROUND_RUN, "--eval-in-background", background, cwd=tmp_path / name)
        (run_dir,) = (tmp_path / name / "runs").glob("*__*")
        evals = [
            {key: value for key, value in row.items() if key != "wall_time"} for row in read_evals(tmp_path / name)
        ]
        checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=True)["state"]["actor"]
        calls = json.loads((tmp_path / name / "evaluations.json").read_text())
        run = json.loads((run_dir / "run.json").read_text())
        logged[name] = evals, (run_dir / "diagnostics.csv").read_text(), checkpoint, calls, run
    (evals, diagnostics, actor, calls, run), background = logged["at-once"], logged["background"]
    assert len(evals) == 5 and evals == background[0] and diagnostics == background[1]
    assert all(torch.equal(actor[key], background[2][key]) for key in actor)
    assert all(thread == "MainThread" and began == ended for thread, began, ended in calls)
    threads = {thread for thread, *_ in background[3]}
    assert len(background[3]) == 5 and len(threads) == 1 and threads != {"MainThread"}
    # Training went on while an evaluation played: it ended after more updates than its round's, with the copy.
    assert any(ended > int(row["updates"]) for (_, _, ended), row in zip(background[3], evals, strict=True))
    assert all(ended <= int(row["updates"]) for (_, _, ended), row in zip(background[3], evals[1:], strict=False))
    assert run["eval_wait_time"] >= run["eval_wall_time"] >= 5 * 0.5 and background[4]["eval_wall_time"] >= 5 * 0.5


@pytest.mark.slow
def test_ctrl_c_keeps_the_evaluation_in_flight(tmp_path):
    """Ctrl-C while an evaluation plays in the background (the third, slowed by 2 s): the run waits for it and logs
    it, as the same run uninterrupted logs it; the process ends with the state of an interrupted run."""
    probe = slow_evaluations(tmp_path / "whole", 0.0)
    run_script(str(probe), *BACKGROUND_RUN, "--eval-in-background", "True", cwd=tmp_path / "whole")
    whole = [{key: value for key, value in row.items() if key != "wall_time"} for row in read_evals(tmp_path / "whole")]
    folder = tmp_path / "interrupted"
    probe = slow_evaluations(folder, 2.0)
    process = ScriptProcess(str(probe), *BACKGROUND_RUN, "--eval-in-background", "True", cwd=folder, ctrl_c=True)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        if (folder / "began.txt").exists() and len((folder / "began.txt").read_text().splitlines()) >= 3:
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, stdout, _ = process.communicate(timeout=120)
    evals = [{key: value for key, value in row.items() if key != "wall_time"} for row in read_evals(folder)]
    assert 3 <= len(evals) < len(whole) and evals == whole[: len(evals)], stdout
    (run_json,) = folder.glob("runs/*/run.json")
    assert json.loads(run_json.read_text())["stopped_by"] == "Ctrl-C"


# The run with its third evaluation in the evaluation thread slowed (`busy` seconds in torch's code, as an evaluation
# is) or failing (`busy` None) as it begins, and a line in began.txt as each begins. The hook sees the threads the
# run starts only, not the main thread.
THIRD_EVALUATION = """
import runpy, sys, threading, time
import torch
sys.path.insert(0, {root!r})
began, busy = [], {busy!r}


def profile(frame, event, arg):
    if frame.f_code.co_filename == {script!r} and frame.f_code.co_name == "evaluate" and event == "call":
        began.append(threading.current_thread().name)
        began_at = time.time()
        with open("began.txt", "a") as file:
            file.write(began[-1] + "\\n")
        if len(began) == 3 and busy is None:
            raise RuntimeError("the third evaluation failed")
        while len(began) == 3 and time.time() < began_at + busy:
            torch.ones(64, 64) @ torch.ones(64, 64)


sys.argv[0] = {script!r}
threading.setprofile(profile)
runpy.run_path({script!r}, run_name="__main__")
"""


def third_evaluation(folder, busy):
    probe = folder / "probe.py"
    probe.write_text(THIRD_EVALUATION.format(root=str(ROOT), script=str(ROOT / "dau_continuous.py"), busy=busy))
    return probe


def wait_for(condition, process, timeout=120):
    """Poll `condition()` until it holds (True) or the process ends (False)."""
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        if condition():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.slow
def test_a_second_ctrl_c_while_the_end_waits_drops_the_evaluation_in_flight_and_keeps_the_rest(tmp_path):
    """Ctrl-C while the third evaluation plays in the background (kept busy in torch for 60 s): the run waits for it;
    a second Ctrl-C while it waits drops it, stopped in the thread, and the run ends at once with what an
    interrupted run keeps: the rows before it, the logs closed, run.json's counts and stopped_by, exit status 0.
    Before, the second KeyboardInterrupt escaped the run's end, which wrote no run.json, and the process waited for
    the thread; a daemon thread left in torch's code as Python exits aborts the process."""
    # A fresh interpreter, which exits as `python script.py` does (the suite's launcher ends a process at once).
    probe, outputs = third_evaluation(tmp_path, 60), [tmp_path / "stdout.txt", tmp_path / "stderr.txt"]
    with open(outputs[0], "w") as stdout, open(outputs[1], "w") as stderr:
        process = subprocess.Popen([sys.executable, str(probe), *BACKGROUND_RUN, "--eval-in-background", "True"],
                                   cwd=tmp_path, stdout=stdout, stderr=stderr, preexec_fn=with_ctrl_c)  # fmt: skip
    began = tmp_path / "began.txt"
    assert wait_for(lambda: began.exists() and len(began.read_text().splitlines()) >= 3, process)
    process.send_signal(signal.SIGINT)
    assert wait_for(lambda: "interrupted" in outputs[0].read_text(), process)
    time.sleep(0.5)  # in Evaluations.finish, waiting
    second = time.time()
    process.send_signal(signal.SIGINT)
    try:
        returncode = process.wait(timeout=30)
    finally:
        process.kill()
    stdout, stderr = (path.read_text() for path in outputs)
    assert returncode == 0 and time.time() - second < 20, stderr[-3000:]
    assert "waiting for the evaluation in flight" in stdout and "the evaluation in flight is dropped" in stdout
    assert [row["physical_time"] for row in read_evals(tmp_path)] == ["0.000000", "1.200000"]
    (run_json,) = tmp_path.glob("runs/*/run.json")
    run = json.loads(run_json.read_text())
    assert run["stopped_by"] == "Ctrl-C" and not run["completed"] and run["updates"] > 0
    assert run["checkpoint"] is not None and run["eval_wait_time"] >= 0


def test_an_error_in_the_evaluation_thread_ends_the_run_with_it(tmp_path):
    """An evaluation in the background that raises (the third) ends the run as it would at once: its error and
    traceback, exit status 1, the rows of the evaluations before it, and no wait for anything more."""
    result = run_script(str(third_evaluation(tmp_path, None)), *BACKGROUND_RUN, "--eval-in-background", "True",
                        cwd=tmp_path, check=False, timeout=120)  # fmt: skip
    assert result.returncode == 1 and "RuntimeError: the third evaluation failed" in result.stderr, result.stderr
    began = (tmp_path / "began.txt").read_text().splitlines()
    assert len(began) == 3 and "MainThread" not in began
    assert [row["physical_time"] for row in read_evals(tmp_path)] == ["0.000000", "1.200000"]
    (run_json,) = tmp_path.glob("runs/*/run.json")
    assert json.loads(run_json.read_text())["completed"] is False


# The run with its third evaluation, in the evaluation thread, failing once the file `fail` is there (60 s at most).
FAILING_LATE = """
import os, runpy, sys, threading, time
sys.path.insert(0, {root!r})
began = []


def profile(frame, event, arg):
    if frame.f_code.co_filename == {script!r} and frame.f_code.co_name == "evaluate" and event == "call":
        began.append(None)
        with open("began.txt", "a") as file:
            file.write("began\\n")
        if len(began) == 3:
            deadline = time.time() + 60
            while not os.path.exists("fail") and time.time() < deadline:
                time.sleep(0.01)
            raise RuntimeError("the third evaluation failed")


sys.argv[0] = {script!r}
threading.setprofile(profile)
runpy.run_path({script!r}, run_name="__main__")
"""


def test_an_evaluation_that_fails_after_a_ctrl_c_ends_the_run_with_its_error(tmp_path):
    """Ctrl-C while the third evaluation plays in the background, which then fails: the run keeps what an interrupted
    run keeps (the rows before it, run.json with stopped_by "Ctrl-C"), and then ends with the evaluation's error, its
    traceback on stderr and exit status 1. The error vanished: the run exited 0 with an empty stderr (issue 78, D5)."""
    probe = tmp_path / "probe.py"
    probe.write_text(FAILING_LATE.format(root=str(ROOT), script=str(ROOT / "dau_continuous.py")))
    process = ScriptProcess(str(probe), *BACKGROUND_RUN, "--eval-in-background", "True", cwd=tmp_path, ctrl_c=True)
    began, stdout = tmp_path / "began.txt", Path(process.files[0])
    assert wait_for(lambda: began.exists() and len(began.read_text().splitlines()) >= 3, process)
    process.send_signal(signal.SIGINT)
    assert wait_for(lambda: "waiting for the evaluation in flight" in stdout.read_text(), process)
    (tmp_path / "fail").touch()
    returncode, out, err = process.communicate(timeout=60)
    assert returncode == 1 and "interrupted: keeping what was logged" in out, out + err
    assert "the evaluation in flight failed" in err and "RuntimeError: the third evaluation failed" in err, err
    assert [row["physical_time"] for row in read_evals(tmp_path)] == ["0.000000", "1.200000"]
    (run_json,) = tmp_path.glob("runs/*/run.json")
    run = json.loads(run_json.read_text())
    assert run["stopped_by"] == "Ctrl-C" and not run["completed"] and run["updates"] > 0


# THIRD_EVALUATION (its third evaluation busy for 60 s) with an error in training once that evaluation has begun.
TRAINING_ERROR = THIRD_EVALUATION.replace(
    "sys.argv[0] =",
    """import harness.loop
end_round = harness.loop.Loop.end_round


def end_round_or_fail(self, **kwargs):
    if len(began) >= 3:
        raise RuntimeError("an error in training")
    end_round(self, **kwargs)


harness.loop.Loop.end_round = end_round_or_fail
sys.argv[0] =""",
)


@pytest.mark.slow
def test_after_an_error_in_training_a_sigterm_ends_the_wait_for_the_evaluation_in_flight(tmp_path):
    """An error in training while an evaluation plays in the background (kept busy for 60 s): the run's end waits for
    it, saying so and for how long at most, and a SIGTERM then ends the wait, the evaluation dropped and the error
    raised as it is. The wait had no limit and a SIGTERM only set a flag: a sweep's deadline could not stop the run
    (issue 78, D7). A fresh interpreter, which exits as `python script.py` does."""
    probe, outputs = tmp_path / "probe.py", [tmp_path / "stdout.txt", tmp_path / "stderr.txt"]
    probe.write_text(TRAINING_ERROR.format(root=str(ROOT), script=str(ROOT / "dau_continuous.py"), busy=60))
    with open(outputs[0], "w") as stdout, open(outputs[1], "w") as stderr:
        process = subprocess.Popen([sys.executable, str(probe), *BACKGROUND_RUN, "--eval-in-background", "True"],
                                   cwd=tmp_path, stdout=stdout, stderr=stderr)  # fmt: skip
    try:
        waiting = "waiting for the evaluation in flight, 60 s at most"
        assert wait_for(lambda: waiting in outputs[0].read_text(), process, timeout=40), outputs[1].read_text()
        sent = time.time()
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=30)
    finally:
        process.kill()
    stdout, stderr = (path.read_text() for path in outputs)
    assert returncode == 1 and time.time() - sent < 20 and "RuntimeError: an error in training" in stderr, stderr
    assert "SIGTERM: the evaluation in flight is dropped" in stdout
    assert [row["physical_time"] for row in read_evals(tmp_path)] == ["0.000000", "1.200000"]


@pytest.mark.slow
def test_a_sigterm_while_an_evaluation_hangs_stops_the_run_within_the_bound_with_its_checkpoint(tmp_path):
    """SIGTERM while the third evaluation plays in the background and hangs (busy in torch's code for 120 s): the run
    waits for it SIGTERM_WAIT_SECONDS at most, abandons it, says so, saves the checkpoint and exits 0 well within the
    30 s that Slurm and spot machines give before SIGKILL; run.json says stopped_by "SIGTERM" and which evaluation was
    abandoned, and keeps it when the run is resumed to its end. It waited for the evaluation without limit: still
    running 60 s after the SIGTERM (issue 86)."""
    probe, outputs = third_evaluation(tmp_path, 120), [tmp_path / "stdout.txt", tmp_path / "stderr.txt"]
    with open(outputs[0], "w") as stdout, open(outputs[1], "w") as stderr:
        process = subprocess.Popen([sys.executable, str(probe), *BACKGROUND_RUN, "--eval-in-background", "True"],
                                   cwd=tmp_path, stdout=stdout, stderr=stderr)  # fmt: skip
    began = tmp_path / "began.txt"
    try:
        assert wait_for(lambda: began.exists() and len(began.read_text().splitlines()) >= 3, process)
        sent = time.time()
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=60)
        waited = time.time() - sent
    finally:
        process.kill()
    stdout, stderr = (path.read_text() for path in outputs)
    bound = harness.evaluations.SIGTERM_WAIT_SECONDS + harness.evaluations.INTERRUPT_SECONDS
    assert returncode == 0 and waited < min(bound + 10, 30), (waited, stderr[-3000:])
    assert "has not ended 10 s after it: abandoned" in stdout and "stopped by SIGTERM: checkpoint saved" in stdout
    (run_dir,) = tmp_path.glob("runs/*__*")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["stopped_by"] == "SIGTERM" and run["abandoned_evaluations"] == [2.0] and run["checkpoint"], run
    assert [row["physical_time"] for row in read_evals(tmp_path)] == ["0.000000", "1.200000"]
    run_script("dau_continuous.py", "--resume", str(run_dir), cwd=tmp_path)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["completed"] and run["abandoned_evaluations"] == [2.0]
    times = [row["physical_time"] for row in read_evals(tmp_path)]
    assert "2.000000" not in times and times[:2] == ["0.000000", "1.200000"] and times[-1] == "4.000000", times


def stuck_until(release):
    """An evaluation that plays until `release` is set, 10 s at most, in Python's code: the thread's interrupt stops
    it."""

    def stuck(policy):
        began = time.time()
        while not release.is_set() and time.time() < began + 10:
            time.sleep(0.01)
        return 0.0

    return stuck


def test_after_a_sigterm_training_waits_for_the_evaluation_in_flight_for_a_bounded_time(monkeypatch):
    """Once a SIGTERM has come (before the wait or during it), training waits for the evaluation in flight at most
    SIGTERM_WAIT_SECONDS (1 s here), then abandons it, stopped in its thread, says so and records its physical time;
    before any SIGTERM, and for one that ends in time, it waits and logs as before. It waited without limit."""
    monkeypatch.setattr(harness.evaluations, "SIGTERM_WAIT_SECONDS", 1.0, raising=False)
    clock, printed, release = SimpleNamespace(physical_time=0.0, env_steps=0, updates=0), [], threading.Event()

    stuck = stuck_until(release)
    logs, preemption = CountingLogs(), SimpleNamespace(requested=False)
    logs.console = SimpleNamespace(print=lambda line, **kwargs: printed.append(line))
    evaluations = Evaluations(stuck, logs, True, preemption)
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    threading.Timer(0.5, lambda: setattr(preemption, "requested", True)).start()  # a SIGTERM during the wait
    began = time.time()
    evaluations.log_ended(time.time(), wait=True)
    assert 1.4 < time.time() - began < 5 and logs.rows == [] and evaluations.in_flight is None, printed
    assert evaluations.abandoned == [0.0] and "has not ended 1 s after it: abandoned" in printed[-1], printed
    clock.physical_time = 1.0
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    began = time.time()
    evaluations.log_ended(time.time(), wait=True)  # the SIGTERM's bound is spent: abandoned at once
    assert time.time() - began < 5 and evaluations.abandoned == [0.0, 1.0]
    release.set()  # one that ends in time is logged
    clock.physical_time = 2.0
    evaluations.sigterm_deadline = time.time() + 30
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    evaluations.log_ended(time.time(), wait=True)
    assert logs.rows == [2.0] and evaluations.abandoned == [0.0, 1.0]
    release.clear()  # a SIGTERM with one stuck in flight: the next is not begun, and the first is abandoned once
    clock.physical_time = 3.0
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    evaluations.sigterm_deadline = time.time() + 1
    began = time.time()
    clock.physical_time = 4.0
    assert evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time()) is False
    assert time.time() - began < 1 + harness.evaluations.INTERRUPT_SECONDS + 1 and evaluations.in_flight is None
    assert evaluations.abandoned == [0.0, 1.0, 3.0] and evaluations.log_ended(time.time(), wait=True)
    release.set()


def test_evaluations_play_in_the_background_by_default_on_a_gpu_only():
    """--eval-in-background left out (None, the scripts' default) is on for a GPU run and off on the CPU; given, it
    is what it says on either."""
    assert tyro.cli(dau_discrete.Args, args=[]).eval_in_background is None
    devices = [torch.device("cuda"), torch.device("cpu")]
    assert [in_background(SimpleNamespace(eval_in_background=None), device) for device in devices] == [True, False]
    for given in (True, False):
        assert [in_background(SimpleNamespace(eval_in_background=given), device) for device in devices] == [given] * 2


class CountingLogs:
    """The logs' part that Evaluations uses: the rows, and the seconds."""

    def __init__(self):
        self.rows, self.eval_seconds, self.eval_wait_seconds = [], 0.0, 0.0

    def evaluation_row(self, scaled_return, seconds, wall_time, physical_time, env_steps, updates):
        self.rows.append(physical_time)
        self.eval_seconds += seconds


def test_training_waits_for_one_evaluation_at_most_and_counts_its_wait():
    """In the background, an evaluation begins once the one in flight has ended and is logged (one copy of the
    policy held, a wait of one evaluation at most), and eval_wait_seconds counts the seconds training waited:
    none when the rounds outlast the evaluations (0.2 s each), all of them at once."""
    clock = SimpleNamespace(physical_time=0.0, env_steps=0, updates=0)

    def evaluate(policy):
        time.sleep(0.2)
        return 0.0

    logs = CountingLogs()
    evaluations = Evaluations(evaluate, logs, background=True)
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    clock.physical_time = 1.0
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())  # at once after the first: waits for it
    assert logs.rows == [0.0] and 0.15 < logs.eval_wait_seconds < logs.eval_seconds + 0.1
    time.sleep(0.4)  # a round longer than the evaluation
    waited, clock.physical_time = logs.eval_wait_seconds, 2.0
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    time.sleep(0.4)
    evaluations.finish(time.time(), None)
    assert logs.rows == [0.0, 1.0, 2.0] and logs.eval_wait_seconds - waited < 0.1 and logs.eval_seconds >= 0.6
    logs = CountingLogs()
    evaluations = Evaluations(evaluate, logs, background=False)
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    assert logs.rows == [2.0] and logs.eval_wait_seconds >= logs.eval_seconds >= 0.2


def test_after_an_error_the_end_waits_for_the_evaluation_in_flight_for_a_bounded_time(monkeypatch):
    """After an error in training, Evaluations.finish waits for the evaluation in flight (here one that never ends by
    itself) at most ERROR_WAIT_SECONDS (1 s here; twice the run's longest evaluation if that is longer), then drops
    it, stopped in its thread, and says so; a SIGTERM that comes while it waits ends the wait at once. It waited
    without limit (issue 78, D7)."""
    monkeypatch.setattr(harness.evaluations, "ERROR_WAIT_SECONDS", 1.0, raising=False)
    clock, printed, release = SimpleNamespace(physical_time=0.0, env_steps=0, updates=0), [], threading.Event()

    stuck = stuck_until(release)
    logs = CountingLogs()
    logs.console = SimpleNamespace(print=printed.append)
    evaluations = Evaluations(stuck, logs, background=True)
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    began = time.time()
    evaluations.finish(time.time(), RuntimeError)
    assert 0.9 < time.time() - began < 5 and logs.rows == [] and evaluations.in_flight is None, printed
    assert printed[-1] == "the evaluation in flight has not ended 1 s after the error: dropped", printed
    monkeypatch.setattr(harness.evaluations, "ERROR_WAIT_SECONDS", 30.0)
    preemption = SimpleNamespace(signals=1)  # one SIGTERM before the error: not one during the wait
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    threading.Timer(0.5, lambda: setattr(preemption, "signals", 2)).start()
    began = time.time()
    evaluations.finish(time.time(), RuntimeError, preemption)
    assert 0.4 < time.time() - began < 5 and printed[-1] == "SIGTERM: the evaluation in flight is dropped", printed
    release.set()  # and one that ends in time is logged
    evaluations.begin({"policy": torch.nn.Linear(1, 1)}, clock, time.time())
    evaluations.finish(time.time(), RuntimeError, preemption)
    assert logs.rows == [0.0] and printed[-1].startswith("waiting for the evaluation in flight, 30 s at most")


def test_an_evaluation_copies_the_policy_alone():
    """The copy an evaluation plays (and holds while it waits for the thread) is the policy's, the last of the
    networks, its normaliser with it, on the CPU: not the other networks'."""
    normalizer = torch.nn.Linear(2, 2)
    value, actor = torch.nn.Sequential(normalizer, torch.nn.Linear(2, 1)), torch.nn.Sequential(normalizer)
    copied = policy_copy({"normalizer": normalizer, "value": value, "actor": actor})
    assert list(copied) == ["actor"] and copied["actor"] is not actor
    assert torch.equal(copied["actor"][0].weight, normalizer.weight) and copied["actor"][0] is not normalizer


def test_a_checkpoint_from_before_the_wait_counter_reads_it_as_the_evaluating_time():
    """A checkpoint written before eval_wait_seconds was counted resumes with it set to eval_seconds (what a run
    evaluating at once waited), its other counters as they were."""
    counters = {"rounds_done": 3, "evaluations": 2, "log_rows": 4, "checkpoints": 1, "window": torch.zeros(2),
                "window_rounds": 1, "last_eval": -5.0, "eval_seconds": 1.5, "wall_time": 9.0}  # fmt: skip
    resumed = Resumed({"run_name": "run", "device": "cpu", "wandb_id": None, "args": {"checkpoint_every": 0.0},
                       "counters": counters, "evals_csv_bytes": 0, "diagnostics_csv_bytes": 0})  # fmt: skip
    clock, logs = SimpleNamespace(restore=lambda counters, every: None), SimpleNamespace(COUNTERS=Logs.COUNTERS)
    assert resumed.restore_counters(clock, logs) == 9.0
    assert (logs.eval_seconds, logs.eval_wait_seconds, logs.last_eval) == (1.5, 1.5, -5.0)
    resumed = Resumed({**resumed.saved, "counters": counters | {"eval_wait_seconds": 0.5}})
    resumed.restore_counters(clock, logs)
    assert (logs.eval_seconds, logs.eval_wait_seconds) == (1.5, 0.5)


def test_evaluations_and_checkpoints_fall_on_exact_multiples_of_their_intervals(tmp_path):
    """Rounds of 0.4 s (4 envs x 10 steps of 0.01 s) and an interval of two rounds, 0.8 s: the clock counts whole
    rounds, so the evaluations and checkpoints come at 0, 0.8, 1.6, 2.4, 3.2 s. (Summing 0.4 s a round, 2.4 s
    came to 2.3999999999999995 and the evaluation fired a round late, at 2.8 s.)"""
    run_script("dau_continuous.py", *TINY_PENDULUM, "--total-time", "4", "--eval-every", "0.8", "--checkpoint-every",
               "0.8", cwd=tmp_path)  # fmt: skip
    times = [float(row["physical_time"]) for row in read_evals(tmp_path)]
    assert times == pytest.approx([0.0, 0.8, 1.6, 2.4, 3.2, 4.0], abs=1e-9)  # the last: the final evaluation
    checkpoints = sorted(path.name for path in tmp_path.glob("runs/*/checkpoints/*.pt"))
    assert checkpoints == ["0.0s.pt", "0.8s.pt", "1.6s.pt", "2.4s.pt", "3.2s.pt", "4.0s.pt"]


@pytest.mark.slow
def test_wandb_gets_the_evaluations_and_diagnostics_against_physical_time_and_the_config(tmp_path):
    """What an offline W&B run recorded, read back: physical time is the x axis of every metric; each evaluation
    and each diagnostics row of the CSV files is one history row, with the same physical time and values; the
    config is the run's arguments."""
    run_script("dau_discrete.py", "--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "4", "--track",
               cwd=tmp_path, env={"WANDB_MODE": "offline"})  # fmt: skip
    (logged,) = offline_runs(tmp_path)
    assert [(metric.name, metric.glob_name, metric.step_metric) for metric in logged.metrics] == [
        ("physical_time", "", ""), ("", "*", "physical_time")]  # fmt: skip
    evals = [row for row in logged.history if "eval/scaled_return" in row]
    expected = [(float(row["physical_time"]), int(row["env_steps"]), float(row["scaled_return"]))
                for row in read_evals(tmp_path)]  # fmt: skip
    sent = [(round(row["physical_time"], 6), row["env_steps"], round(row["eval/scaled_return"], 4)) for row in evals]
    assert sent == expected
    (diagnostics_csv,) = tmp_path.glob("runs/*/diagnostics.csv")
    diagnostics = [row for row in logged.history if "losses/td" in row]
    rows = read_csv(diagnostics_csv)
    assert len(diagnostics) == len(rows) > 2
    for sent, row in zip(diagnostics, rows, strict=True):
        assert sent["physical_time"] == pytest.approx(float(row["physical_time"]))
        assert {"charts/SPS", "charts/updates_per_second"} <= set(sent)
        for name in dau_discrete.DIAGNOSTICS:
            assert float(f"{sent[name]:.6g}") == pytest.approx(float(row[name])), name
    (run_json,) = tmp_path.glob("runs/*/run.json")
    args = json.loads(run_json.read_text())["args"]
    assert {key: logged.config[key] for key in args} == args


# W&B's server, stood in for: wandb.init/log/finish as the script calls them, every row the "server" received
# appended to received.jsonl at once (as the service streams them), and a resumed run's summary (the last value of
# each key it holds) read back from there, which is what wandb.run.summary gives a run resumed online.
WANDB_SERVER = """import json, runpy, sys, types
received = "received.jsonl"
wandb = types.ModuleType("wandb")
wandb.errors = types.SimpleNamespace(UsageError=RuntimeError)
wandb.run = None

def init(id=None, resume=None, **settings):
    summary = {}
    if resume:
        with open(received) as file:
            for line in file:
                summary.update(json.loads(line))
    wandb.run = types.SimpleNamespace(id=id or "run123", summary=summary, sweep_id=None, offline=False)

def log(row):
    with open(received, "a") as file:
        file.write(json.dumps(row) + "\\n")

wandb.init, wandb.log, wandb.define_metric, wandb.finish = init, log, lambda *a, **k: None, lambda **k: None
sys.modules["wandb"] = wandb
sys.argv[0] = {script!r}
sys.path.insert(0, {root!r})
runpy.run_path({script!r}, run_name="__main__")
"""


@pytest.mark.slow
@pytest.mark.parametrize("lost", [0, 4])
def test_a_killed_and_resumed_run_sends_each_evaluation_and_diagnostics_row_to_wandb_once(lost, tmp_path):
    """A run killed (SIGKILL) after its last checkpoint had sent W&B more rows; the resumed run computes those rows
    again and sends only the ones W&B lacks (after the last evaluation and the last diagnostics row it holds), so
    that W&B has each row once, the same as evals.csv and diagnostics.csv of the whole run. With `lost` rows
    before the checkpoint that W&B never got (a killed process's unsent stream), the resumed run sends them from
    the CSV files (before, they stayed missing). (One torch thread: 1500 updates, which two threads on busy cores
    make slow.)"""
    server = tmp_path / "dau_discrete_with_wandb_server.py"
    script = repr(str(ROOT / "dau_discrete.py"))
    server.write_text(WANDB_SERVER.replace("{script!r}", script).replace("{root!r}", repr(str(ROOT))))
    env = {"OMP_NUM_THREADS": "1"}
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", "--total-time", "12", *TINY[:4], "--updates-per-round", "50",
            *TINY[6:], "--track", "--checkpoint-every", "4"]  # fmt: skip
    returncode, _, stderr = start_and_signal(str(server), *args, cwd=tmp_path, signum=signal.SIGKILL, rows=8, env=env)
    assert returncode == -signal.SIGKILL, stderr[-2000:]
    (run_dir,) = tmp_path.glob("runs/*__*")
    received_before = (tmp_path / "received.jsonl").read_text().splitlines()
    counters = torch.load(run_dir / CHECKPOINT, weights_only=True)["counters"]
    assert len(received_before) > counters["evaluations"] + counters["log_rows"]  # it sent rows after the checkpoint
    if lost:  # the server got the rows up to `lost` rows before the checkpoint only
        kept = counters["evaluations"] + counters["log_rows"] - lost
        (tmp_path / "received.jsonl").write_text("".join(line + "\n" for line in received_before[:kept]))
    run_script(str(server), "--resume", str(run_dir), "--track", cwd=tmp_path, env=env)
    rows = [json.loads(line) for line in (tmp_path / "received.jsonl").read_text().splitlines()]
    evals = [row for row in rows if "eval/scaled_return" in row]
    assert [row["env_steps"] for row in evals] == [int(row["env_steps"]) for row in read_evals(tmp_path)]
    assert [round(row["eval/scaled_return"], 4) for row in evals] == [
        float(row["scaled_return"]) for row in read_evals(tmp_path)]  # fmt: skip
    diagnostics = [row["updates"] for row in rows if "losses/td" in row]
    assert diagnostics == [int(row["updates"]) for row in read_csv(run_dir / "diagnostics.csv")]


def wandb_rows(cwd):
    """The evaluations and the diagnostics rows that the offline W&B runs under `cwd` hold, all runs together in
    the order they were made: (physical time, env steps, scaled return) and (physical time, updates)."""
    history = [row for logged in offline_runs(cwd) for row in logged.history]
    evals = [(round(row["physical_time"], 6), row["env_steps"], round(row["eval/scaled_return"], 4))
             for row in history if "eval/scaled_return" in row]  # fmt: skip
    diagnostics = [(round(row["physical_time"], 6), row["updates"]) for row in history if "losses/td" in row]
    return evals, diagnostics


def csv_rows(cwd):
    """What the same rows are in evals.csv and diagnostics.csv."""
    (diagnostics,) = Path(cwd).glob("runs/*/diagnostics.csv")
    evals = [(float(row["physical_time"]), int(row["env_steps"]), float(row["scaled_return"]))
             for row in read_evals(cwd)]  # fmt: skip
    return evals, [(float(row["physical_time"]), int(row["updates"])) for row in read_csv(diagnostics)]


@pytest.mark.slow
def test_wandb_offline_holds_each_row_once_when_track_comes_on_a_resume_and_the_run_is_stopped_again(tmp_path):
    """The real W&B, offline, its logs read back: a run without --track stopped by SIGTERM, resumed with --track
    (a new W&B run: it first gets the rows logged before the checkpoint, from the CSV files), stopped again and
    resumed with --track (the same W&B run, which gets only the rows after the checkpoint). Together the two
    offline logs hold every evaluation and diagnostics row of the CSV files once, in order. (Before, the W&B run
    started at the first resume lacked the rows before it.)"""
    args, env = ["--env-id", "CartPole-v1", "--dt", "0.01", "--total-time", "24", *TINY], {"WANDB_MODE": "offline"}
    returncode, _, stderr = start_and_signal("dqn_baseline.py", *args, cwd=tmp_path, signum=signal.SIGTERM, rows=4)
    assert returncode == 0, stderr[-2000:]
    (run_dir,) = tmp_path.glob("runs/*__*")
    assert json.loads((run_dir / "run.json").read_text())["wandb_id"] is None
    returncode, _, stderr = start_and_signal("dqn_baseline.py", "--resume", str(run_dir), "--track", cwd=tmp_path,
                                             signum=signal.SIGTERM, rows=12, env=env)  # fmt: skip
    assert returncode == 0, stderr[-2000:]
    stopped = json.loads((run_dir / "run.json").read_text())
    assert stopped["stopped_by"] == "SIGTERM" and stopped["wandb_id"] and stopped["physical_time"] < 20
    run_script("dqn_baseline.py", "--resume", str(run_dir), "--track", cwd=tmp_path, env=env)
    finished = json.loads((run_dir / "run.json").read_text())
    assert finished["completed"] and finished["wandb_id"] == stopped["wandb_id"]
    folders = sorted(path.name for path in tmp_path.glob("wandb/offline-run-*"))
    assert len(folders) == 2 and all(name.endswith(f"-{stopped['wandb_id']}") for name in folders)
    evals, diagnostics = csv_rows(tmp_path)
    assert len(evals) == 25 and len(diagnostics) == 60  # a row a round (0.4 s: --eval-every / 10 is less)
    assert wandb_rows(tmp_path) == (evals, diagnostics)


@pytest.mark.slow
def test_wandb_keeps_the_final_evaluation_of_a_run_that_is_extended(tmp_path):
    """What W&B cannot do (real W&B, offline): take a row back. A finished run extended with a larger
    --total-time goes on from its state before the final evaluation, so evals.csv drops that evaluation (at 6 s,
    between the --eval-every grid's points) and has the extended run's; W&B keeps the row it was sent at 6 s, the
    rest once (docs/common.md, Logging)."""
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY[:-2], "--eval-every", "4", "--checkpoint-every", "4"]
    env = {"WANDB_MODE": "offline"}
    run_script("dqn_baseline.py", *args, "--total-time", "6", "--track", cwd=tmp_path, env=env)
    (run_dir,) = tmp_path.glob("runs/*__*")
    run_script("dqn_baseline.py", "--resume", str(run_dir), "--total-time", "10", "--track", cwd=tmp_path, env=env)
    evals, _ = csv_rows(tmp_path)
    assert [row[0] for row in evals] == [0, 4, 8, 10]
    sent, _ = wandb_rows(tmp_path)
    assert [row[0] for row in sent] == [0, 4, 6, 8, 10] and [sent[i] for i in (0, 1, 3, 4)] == evals


@pytest.mark.slow
def test_eval_model_with_track_sends_its_evaluation_to_wandb(saved_model, tmp_path):
    """--eval-model --track (real W&B, offline): the W&B run holds the evaluation printed, and the model file in
    its config. (Before, the W&B run was started and given nothing.)"""
    result = run_script("dau_continuous.py", "--eval-model", str(saved_model), "--track", cwd=tmp_path,
                        env={"WANDB_MODE": "offline"})  # fmt: skip
    printed = float(result.stdout.split("mean scaled return ")[1].split()[0])
    (logged,) = offline_runs(tmp_path)
    assert [round(row["eval/scaled_return"], 2) for row in logged.history] == [printed]
    assert logged.config["eval_model"] == str(saved_model)


@pytest.mark.slow
def test_videos_keep_their_schedule_when_capture_video_comes_on_a_resume(tmp_path):
    """--capture-video given at --resume to a run made without it: the videos are those of the run's own
    evaluations 0, 1, 4, 16, ... and the last that fall after the resume (evaluation 16 at 16 s, the last at
    20 s), not a schedule started again at the resume (which recorded the next evaluations, 0 and 1 of its
    count)."""
    pytest.importorskip("moviepy")  # Gymnasium's video writer; not carried to the GPU machine
    args = ["--env-id", "Pendulum-v1", "--dt", "0.01", "--total-time", "20", *TINY]
    returncode, _, stderr = start_and_signal("dau_continuous.py", *args, cwd=tmp_path, signum=signal.SIGTERM, rows=7)
    assert returncode == 0, stderr[-2000:]
    (run_dir,) = tmp_path.glob("runs/*__*")
    assert 5 <= len(read_evals(tmp_path)) < 16
    run_script("dau_continuous.py", "--resume", str(run_dir), "--capture-video", cwd=tmp_path)
    videos = sorted(path.name.split("-episode")[0] for path in (run_dir / "videos").glob("*.mp4"))
    assert videos == ["physical-time-16s", "physical-time-20s"]


@pytest.mark.slow
def test_under_wandb_agent_a_sigtermed_run_is_requeued_and_resumes_by_its_run_id(tmp_path, monkeypatch):
    """W&B's contract for preemptible sweeps, with the real agent command line (offline): a run stopped by SIGTERM
    saves its checkpoint, marks itself preempting and exits non-zero, so that the sweep requeues it; the requeued
    run (the same command, WANDB_RUN_ID the same) finds its checkpoint in runs/ and goes on to the evaluations of
    a run never stopped."""
    monkeypatch.chdir(ROOT)
    sweep = run_local.load_sweep(ROOT / "sweeps" / "paper" / "cartpole_dau.yaml", [
        "seed=1", "dt=0.01", "total_time=40", "num_envs=4", "num_eval_envs=2", "updates_per_round=2",
        "batch_size=16", "time_limit=0.5", "eval_every=1"])  # fmt: skip
    command = run_local.agent_command(sweep, run_local.grid(sweep)[0])[3:]  # after env, interpreter, script
    env = {"WANDB_MODE": "offline", "WANDB_SWEEP_ID": "sweep123", "WANDB_RUN_ID": "run123"}
    returncode, stdout, stderr = start_and_signal("dau_discrete.py", *command, cwd=tmp_path, signum=signal.SIGTERM,
                                                  env=env)  # fmt: skip
    assert returncode == PREEMPTED_EXIT_CODE, stderr[-2000:]
    assert "stopped by SIGTERM: checkpoint saved" in stdout and offline_runs(tmp_path)[0].preempting
    run_script("dau_discrete.py", *command, cwd=tmp_path, env=env)  # the agent's next start of the same run
    (run_dir,) = tmp_path.glob("runs/*__*")  # the same folder: resumed, not started again
    info = json.loads((run_dir / "run.json").read_text())
    assert info["completed"] and info["wandb_id"] == "run123"
    reference = tmp_path / "reference"
    reference.mkdir()
    run_script("dau_discrete.py", *command, cwd=reference, env={"WANDB_MODE": "disabled"})
    numbers = [[row[key] for key in ("physical_time", "env_steps", "scaled_return")] for row in read_evals(tmp_path)]
    assert numbers == [[row[key] for key in ("physical_time", "env_steps", "scaled_return")]
                       for row in read_evals(reference)]  # fmt: skip


def test_outside_an_agent_a_sigtermed_run_exits_0_to_be_resumed_with_resume(tmp_path):
    """Slurm, a spot machine or sweeps/run_local.py: SIGTERM saves a checkpoint and exits 0 (--resume goes on)."""
    returncode, stdout, _ = start_and_signal("dau_discrete.py", "--env-id", "CartPole-v1", "--dt", "0.01", *TINY,
                                             "--total-time", "40", cwd=tmp_path, signum=signal.SIGTERM)  # fmt: skip
    assert returncode == 0 and "go on with --resume runs/" in stdout


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A Pendulum model.pt from --save-model."""
    cwd = tmp_path_factory.mktemp("model")
    run_script("dau_continuous.py", *TINY_PENDULUM, "--total-time", "2", "--save-model", cwd=cwd)
    (model,) = cwd.glob("runs/*/model.pt")
    return model


def test_eval_model_allocates_no_replay_memory_so_checks_none(saved_model, tmp_path):
    """--eval-model with arguments whose replay memory would not fit (10^9 s of it): evaluated all the same, since
    an evaluation allocates no buffer and writes no checkpoint (it used to be refused by the memory check)."""
    result = run_script("dau_continuous.py", "--eval-model", str(saved_model), "--total-time", "1e9",
                        "--buffer-time", "1e9", "--checkpoint-every", "1", cwd=tmp_path)  # fmt: skip
    assert "mean scaled return" in result.stdout


def test_eval_model_with_track_and_no_wandb_login_says_how_to_fix_it(saved_model, tmp_path):
    env = {"WANDB_MODE": "online", "WANDB_API_KEY": "", "HOME": str(tmp_path), "NETRC": str(tmp_path / "none")}
    result = run_script("dau_continuous.py", "--eval-model", str(saved_model), "--track", cwd=tmp_path, env=env,
                        check=False)  # fmt: skip
    assert result.returncode != 0 and "wandb login" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "script,damage,message",
    [
        ("dau_continuous.py", "missing", "no such file"),
        ("dau_continuous.py", "not torch", "is not a readable model file: not a file torch.save wrote, or one cut"),
        ("dau_continuous.py", "truncated", "is not a readable model file"),
        ("dau_continuous.py", "other keys", "is not a model saved by --save-model (it has no args)"),
        ("dau_continuous.py", "other shapes", "its value does not fit dau_continuous.py's"),
        ("ddpg_baseline.py", None, "has no qf: a model of another script"),  # dau_continuous.py's model
    ],
)
def test_eval_model_refuses_a_file_that_is_not_a_model_in_one_line(script, damage, message, saved_model, tmp_path):
    """As --resume does for its checkpoint: a missing file, a file that is not torch's (/etc/passwd), a model.pt
    cut short, a torch file without a model's keys, a network of other shapes and another script's model each end
    in one line that names the file, not a traceback."""
    model = tmp_path / "model.pt"
    if damage is None:
        model = saved_model
    elif damage == "missing":
        model = tmp_path / "nowhere" / "model.pt"
    elif damage == "not torch":
        model = Path("/etc/passwd")
    elif damage == "truncated":
        model.write_bytes(saved_model.read_bytes()[: saved_model.stat().st_size // 2])
    elif damage == "other keys":
        torch.save({"weights": torch.zeros(3)}, model)
    elif damage == "other shapes":
        torch.save({**torch.load(saved_model, weights_only=True), "value": {"net.0.weight": torch.zeros(2, 2)}}, model)
    result = run_script(script, "--eval-model", str(model), cwd=tmp_path, check=False, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(f"error: --eval-model {model}: ") and message in lines[0]


def test_model_pt_is_written_atomically(tmp_path, monkeypatch):
    """A kill or an error while model.pt (or checkpoints/<time>s.pt) is written leaves the previous file whole."""
    path, network = tmp_path / "model.pt", torch.nn.Linear(2, 2)
    optimizer = torch.optim.RMSprop(network.parameters())
    model = {"args": SimpleNamespace(seed=1), "optimizer": optimizer, "networks": {"qf": network}}
    save_model(str(path), **model)
    whole = path.read_bytes()

    def killed_midway(data, file):  # half a file, then the process is stopped
        with open(file, "wb") if isinstance(file, str | os.PathLike) else contextlib.nullcontext(file) as out:
            out.write(whole[: len(whole) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        save_model(str(path), **model)
    assert path.read_bytes() == whole


def test_the_rounds_after_the_last_diagnostics_row_get_a_row_at_the_end(tmp_path):
    """diagnostics.csv every 1.2 s (--eval-every 12) with rounds of 0.4 s and a 4-s budget: rows at 0.4, 1.2, 2.4
    and 3.6 s, and at the end one for the round after the last (it used to be dropped), at the final evaluation's
    physical time and updates."""
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--eval-every", "12", "--total-time", "4"]
    run_script("dau_discrete.py", *args, cwd=tmp_path)
    (run_dir,) = tmp_path.glob("runs/*__*")
    rows, final = read_csv(run_dir / "diagnostics.csv"), read_evals(tmp_path)[-1]
    assert [float(row["physical_time"]) for row in rows] == pytest.approx([0.4, 1.2, 2.4, 3.6, 4.0])
    assert (rows[-1]["physical_time"], rows[-1]["updates"]) == (final["physical_time"], final["updates"])
    assert all(math.isfinite(float(value)) for value in rows[-1].values())


RELEASE_PROBE = """
import gc, runpy, sys, weakref
sys.path.insert(0, {root!r})
from harness.run import Run

start = Run.start


def probed_start(self, *args, **kwargs):  # the loaded checkpoint's replay rows, watched through a weak reference
    replay_rows = weakref.ref(self.resumed.saved["state"]["replay"]["fields"][0])
    obs = start(self, *args, **kwargs)
    gc.collect()
    print("the loaded replay rows are still held:", replay_rows() is not None, flush=True)
    return obs


Run.start = probed_start
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""


def test_a_resumed_run_releases_the_loaded_checkpoint_once_restored(tmp_path):
    """The checkpoint loaded for --resume (its copy of the replay memory included) is let go once its state is
    restored: the run holds one copy of the memory, not two (check_memory budgets the live one and a checkpoint's)."""
    probe = tmp_path / "dau_discrete_probed.py"
    probe.write_text(RELEASE_PROBE.format(root=str(ROOT), script=str(ROOT / "dau_discrete.py")))
    args = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "2", "--checkpoint-every", "100"]
    run_script("dau_discrete.py", *args, cwd=tmp_path)
    (run_dir,) = tmp_path.glob("runs/*__*")
    result = run_script(str(probe), "--resume", str(run_dir), "--total-time", "2.8", cwd=tmp_path)
    assert "the loaded replay rows are still held: False" in result.stdout, result.stdout[-2000:]


@pytest.mark.parametrize(
    "names,sums,share",
    [
        (dau_discrete.DIAGNOSTICS, [0.0, 3.0, 1.0, 0.0, 0.5, 0.1, 2.0, 0.3, 0.4], "nan"),  # a TD loss of exactly 0
        (("values/v", "losses/td_terminal", "losses/td", "batch/terminal_td_share"), [5.0, 1.0, 4.0], "0.25"),
    ],
)
def test_the_diagnostics_row_reads_the_stats_by_name(names, sums, share, tmp_path):
    """The terminal transitions' share of the TD loss is losses/td_terminal / losses/td, found by their names in
    the script's DIAGNOSTICS, not by their places; nan, not a ZeroDivisionError, when the TD loss is exactly 0."""
    clock = SimpleNamespace(physical_time=0.4, env_steps=40, updates=2, log_rows=0)
    logs = Logs(tmp_path, clock, names, wandb=None)
    logs.window, logs.window_rounds = torch.tensor(sums, dtype=torch.float64) * 2, 2
    logs.diagnostics_row(sps=0.0, wall_time=1.0)
    logs.close()
    row = read_csv(tmp_path / "diagnostics.csv")[0]
    assert row[names[-1]] == share and [row[name] for name in names[:-1]] == [f"{value:.6g}" for value in sums]
    assert clock.log_rows == 1


def test_every_torch_load_of_a_file_is_weights_only():
    """A model or checkpoint runs no code when loaded: every torch.load in the project says weights_only=True (the
    requirements allow torch 2.2, whose default is False)."""
    loads = []
    for path in [
        *ROOT.glob("*.py"),
        *ROOT.glob("harness/*.py"),
        *ROOT.glob("sweeps/*.py"),
        *ROOT.glob("analysis/*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.load":
                keywords = {keyword.arg: ast.unparse(keyword.value) for keyword in node.keywords}
                loads.append((path.name, keywords.get("weights_only")))
    assert len(loads) >= 2 and all(weights_only == "True" for _, weights_only in loads), loads


# --- --env-workers: the training envs in worker processes ---

WORKER_CASES = [("dau_continuous.py", "Pendulum-v1", "0.02"), ("ddpg_baseline.py", "HalfCheetah-v4", "0.01"),
                ("dau_discrete.py", "CartPole-v1", "0.01"), ("dqn_baseline.py", "CartPole-v1", "0.01")]  # fmt: skip


def worker_run_args(env_id, dt, total_time):
    """Short episodes (0.1 s: time-limit truncations every 5-10 steps; CartPole also falls), 4 envs."""
    return ["--env-id", env_id, "--dt", dt, *TINY, "--time-limit", "0.1", "--total-time", total_time]


def logged_numbers(cwd):
    """evals.csv without its wall times, and diagnostics.csv whole."""
    (run_dir,) = Path(cwd).glob("runs/*__*")
    evals = [[row[key] for key in ("physical_time", "env_steps", "updates", "scaled_return")]
             for row in read_evals(cwd)]  # fmt: skip
    return evals, (run_dir / "diagnostics.csv").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("script,env_id,dt", WORKER_CASES)
def test_training_envs_split_over_two_workers_give_the_same_numbers(script, env_id, dt, tmp_path):
    """--env-workers 2: the 4 training envs stepped as two shares in two processes, with episode ends in every
    round (the true final observations through shared memory): evals.csv and diagnostics.csv as with one
    process, value for value."""
    for workers in ("1", "2"):
        (tmp_path / workers).mkdir()
        run_script(script, *worker_run_args(env_id, dt, "3.2"), "--env-workers", workers, cwd=tmp_path / workers)
    assert logged_numbers(tmp_path / "1") == logged_numbers(tmp_path / "2")
    assert len(logged_numbers(tmp_path / "1")[0]) >= 3


def alive(pids):
    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def start_with_workers(script, *args, cwd, rows):
    """A run with --env-workers 2 going until its evals.csv has `rows` lines; returns it and its workers' pids."""
    process = ScriptProcess(script, *args, "--env-workers", "2", cwd=cwd)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        files = list(Path(cwd).glob("runs/*/evals.csv"))
        if files and len(files[0].read_text().splitlines()) >= rows:
            break
        time.sleep(0.2)
    workers = [child.pid for child in psutil.Process(process.pid).children(recursive=True)
               if "spawn_main" in " ".join(child.cmdline())]  # not multiprocessing's resource tracker  # fmt: skip
    assert process.poll() is None and len(workers) == 2, "the run did not start its two workers"
    return process, workers


@pytest.mark.slow
def test_a_run_with_workers_stops_on_sigterm_with_no_process_left_and_resumes_exactly(tmp_path):
    """SIGTERM to a run with two env workers: the checkpoint gathers the envs' states from the workers, the run
    exits 0 and no worker outlives it; resumed with two new workers (the states go back into them), its evals.csv
    and diagnostics.csv are the uninterrupted one-process run's."""
    args = worker_run_args("CartPole-v1", "0.01", "40")
    (tmp_path / "stopped").mkdir()
    process, workers = start_with_workers("dau_discrete.py", *args, cwd=tmp_path / "stopped", rows=4)
    process.send_signal(signal.SIGTERM)
    returncode, stdout, stderr = process.communicate(120)
    assert returncode == 0 and "stopped by SIGTERM: checkpoint saved" in stdout, stderr[-2000:]
    assert alive(workers) == []
    (run_dir,) = (tmp_path / "stopped").glob("runs/*__*")
    run_script("dau_discrete.py", "--resume", str(run_dir), "--env-workers", "2", cwd=tmp_path / "stopped")
    (tmp_path / "whole").mkdir()
    run_script("dau_discrete.py", *args, cwd=tmp_path / "whole")
    assert logged_numbers(tmp_path / "stopped") == logged_numbers(tmp_path / "whole")


@pytest.mark.slow
def test_a_dead_env_worker_stops_the_run_with_a_clear_error(tmp_path):
    """A worker killed mid-run (out of memory, a crash in the simulator): the run stops at once with a one-line
    error naming the worker and how to go on, no traceback and no hang, and its other worker ends too."""
    process, workers = start_with_workers("dau_continuous.py", *worker_run_args("Pendulum-v1", "0.01", "400"),
                                          cwd=tmp_path, rows=3)  # fmt: skip
    os.kill(workers[0], signal.SIGKILL)
    returncode, _, stderr = process.communicate(60)
    assert returncode != 0 and "error: env worker" in stderr and "died" in stderr, stderr[-2000:]
    assert "Traceback" not in stderr and alive(workers) == []
    assert len(read_evals(tmp_path)) >= 2  # what was logged is kept


@pytest.mark.slow
def test_a_run_that_fails_before_its_loop_closes_its_env_workers_and_exits(tmp_path):
    """An error after the workers started and before the training loop (a replay memory that cannot be made, a
    checkpoint whose envs do not fit): the process ends with its error instead of waiting forever, at its exit,
    on workers that ignore SIGTERM."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from types import SimpleNamespace; "
            "from harness.envs import make_vector_env; "
            "envs = make_vector_env(SimpleNamespace(env_id='CartPole-v1', time_limit=None), 0.01, 4, 1, 2); "
            "raise RuntimeError('before the loop')")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "before the loop" in result.stderr


@pytest.mark.slow
def test_env_workers_end_when_their_run_is_killed(tmp_path):
    """SIGKILL to the run's process (no chance to close anything): its workers see their pipe close and end."""
    process, workers = start_with_workers("dau_discrete.py", *worker_run_args("CartPole-v1", "0.01", "400"),
                                          cwd=tmp_path, rows=3)  # fmt: skip
    process.send_signal(signal.SIGKILL)
    assert process.communicate(60)[0] == -signal.SIGKILL
    deadline = time.time() + 20
    while alive(workers) and time.time() < deadline:
        time.sleep(0.2)
    assert alive(workers) == []


def git(folder, *command):
    return subprocess.run(["git", "-C", str(folder), *command], capture_output=True, text=True, check=True).stdout


NO_GIT = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a clone")


@NO_GIT
def test_run_json_names_the_code_it_ran_from(tmp_path):
    """run.json's "code": the commit of the script's checkout and whether its Python files had uncommitted changes
    (a change to the docs does not count); outside a checkout, a record that there is none. A resumed run keeps
    the code versions before it and adds its own where it differs."""
    script = tmp_path / "script.py"
    script.write_text("print('v1')\n")
    assert code_version(script) == {"commit": None, "uncommitted_changes": None}
    git(tmp_path, "init", "-q")
    (tmp_path / "notes.md").write_text("notes\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "v1")
    commit = git(tmp_path, "rev-parse", "HEAD").strip()
    assert code_version(script) == {"commit": commit, "uncommitted_changes": False}
    (tmp_path / "notes.md").write_text("more notes\n")  # the docs change nothing a run computes
    assert code_version(script) == {"commit": commit, "uncommitted_changes": False}
    script.write_text("print('v2')\n")
    assert code_version(script) == {"commit": commit, "uncommitted_changes": True}
    git(tmp_path, "checkout", "-q", "script.py")
    (tmp_path / "patch.py").write_text("")  # a new file the scripts may import
    assert code_version(script)["uncommitted_changes"] is True
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert code_history(run_dir, script) == [code_version(script)]  # a new run
    earlier = {"commit": "f" * 40, "uncommitted_changes": False}
    (run_dir / "run.json").write_text(json.dumps({"code": [earlier]}))
    assert code_history(run_dir, script) == [earlier, code_version(script)]  # resumed by other code
    (run_dir / "run.json").write_text(json.dumps({"code": [code_version(script)]}))
    assert code_history(run_dir, script) == [code_version(script)]  # resumed by the same code
    (run_dir / "run.json").write_text(json.dumps({"script": "dau_discrete.py"}))  # from before the record
    assert code_history(run_dir, script) == [UNRECORDED, code_version(script)]


@NO_GIT
def test_a_script_copied_into_another_checkout_records_no_commit(tmp_path):
    """A copy of a script inside another project's checkout, in an ignored folder or merely untracked, with that
    checkout clean or not: its commit names code the run did not run, so none is recorded (issue 66)."""
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("vendor/\n")
    (tmp_path / "theirs.py").write_text("print('their code')\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "v1")
    (tmp_path / "vendor").mkdir()
    ignored = tmp_path / "vendor" / "dau_discrete.py"
    shutil.copy(ROOT / "dau_discrete.py", ignored)
    assert git(tmp_path, "status", "--porcelain") == ""  # the checkout looks clean
    assert code_version(ignored) == {"commit": None, "uncommitted_changes": None}
    untracked = tmp_path / "dau_continuous.py"
    shutil.copy(ROOT / "dau_continuous.py", untracked)
    assert code_version(untracked) == {"commit": None, "uncommitted_changes": None}
    assert code_version(tmp_path / "theirs.py")["commit"] == git(tmp_path, "rev-parse", "HEAD").strip()


@NO_GIT
def test_a_run_records_the_code_of_its_scripts_checkout_and_its_identity(tmp_path):
    """The script's own checkout (the repository), not the folder it runs in; the identity, label and schema that
    the tools read (issue 86: recorded when run.json is written, from its arguments; the kept run.json that had a
    stale one, from an older formula, were migrated by sweeps/migrate_runs.py)."""
    run_script("dqn_baseline.py", "--env-id", "CartPole-v1", *TINY, "--total-time", "0.8", cwd=tmp_path)
    (run_json,) = tmp_path.glob("runs/*/run.json")
    run = json.loads(run_json.read_text())
    assert run["code"] == [code_version(ROOT / "dqn_baseline.py")]
    assert run["code"][0]["commit"] == git(ROOT, "rev-parse", "HEAD").strip()
    assert run["identity"] == run_identity("dqn_baseline.py", run["args"]) and run["schema"] == SCHEMA
    assert run["label"].startswith("DQN-unscaled+batch_size=16+") and run["algorithm"] == "DQN"  # TINY's flags


def test_a_file_system_without_locks_is_said_in_one_line(tmp_path, monkeypatch, capsys):
    """claim_run_dir on a file system where flock fails (some network file systems): the run goes on, unheld, and
    says so in one line naming the folder (it was silent)."""

    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(harness.files.fcntl, "flock", no_locks)
    lock = claim_run_dir(str(tmp_path))
    lock.close()
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and str(tmp_path) in warning[0] and "no locks" in warning[0], warning


def test_the_time_step_layer_saves_and_restores_its_own_state():
    """PhysicalTime's state (the episode's step count and scaled return, and the first reset's seed) goes in and out
    of a checkpoint through its own public methods; env_state and set_env_state read nothing private."""
    env = make_env("Pendulum-v1", dt=0.01, seed=5)
    wrapper = env.env if isinstance(env.env, PhysicalTime) else env
    while not isinstance(wrapper, PhysicalTime):
        wrapper = wrapper.env
    assert wrapper.state_dict() == {"steps": 0, "scaled_return": 0.0, "seed": 5}
    env.reset()
    for _ in range(3):
        env.step(np.zeros(1, dtype=np.float32))
    saved = wrapper.state_dict()
    assert saved["steps"] == 3 and saved["seed"] is None and saved["scaled_return"] < 0
    twin = make_env("Pendulum-v1", dt=0.01, seed=9)
    twin.reset()
    calls = []
    twin_wrapper = twin
    while not isinstance(twin_wrapper, PhysicalTime):
        twin_wrapper = twin_wrapper.env
    load = twin_wrapper.load_state_dict
    twin_wrapper.load_state_dict = lambda state: calls.append(state) or load(state)
    set_env_state(twin, env_state(env))
    assert calls and twin_wrapper.state_dict() == saved
    source = (ROOT / "harness" / "env_state.py").read_text()
    assert not re.search(r"wrapper\.(_seed|steps|scaled_return)", source)


def test_the_round_count_is_written_once():
    """The number of whole rounds in --total-time (the clock, the replay memory's size, the executor's estimate of
    a run's length) comes from harness.clock.whole_rounds; its formula is written nowhere else."""
    formula = re.compile(r"total_time\W*\s*/\s*\(?\s*(args\W*\.?\s*)?\W*num_envs")
    files = [*ROOT.glob("harness/*.py"), *ROOT.glob("sweeps/*.py"), *ROOT.glob("analysis/*.py"), *ROOT.glob("*.py")]
    writers = [path.relative_to(ROOT).as_posix() for path in files if formula.search(path.read_text())]
    assert writers == ["harness/clock.py"], writers
    args = SimpleNamespace(total_time=10.0, num_envs=4, steps_per_round=10, buffer_time=1e6)
    assert whole_rounds(args, 0.01) == 25 and buffer_rows(args, 0.01) == 25 * 40


SCRIPTS_WITH_UPDATE = ["dau_continuous.py", "ddpg_baseline.py", "dau_discrete.py", "dqn_baseline.py",
                       "dau_discrete_research.py", "dau_continuous_horizon.py"]  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS_WITH_UPDATE)
def test_a_student_reads_what_each_call_passes_and_what_the_harness_provides(script):
    """update() is called by keyword, each argument landing in the parameter named for it (DDPG's time_scale
    went, tenth of ten positional arguments, into reward_scale); the names a script uses without defining them
    (run.probe, run.replay_rows, run.round_time; the "optimizer" key that harness/loop.py saves) say what they
    are where they are used."""
    source = (ROOT / script).read_text()
    nodes = ast.walk(ast.parse(source))
    calls = [node for node in nodes if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "update"]
    assert calls and all(not call.args and call.keywords for call in calls), script
    lines = source.splitlines()
    for name, said in (("run.probe", "run.probe:"), ("run.replay_rows", "run.replay_rows:"),
                       ("run.round_time", "round_time:"), ('"optimizer":', "model.pt")):  # fmt: skip
        uses = [index for index, line in enumerate(lines) if name in line and not line.lstrip().startswith("#")]
        for index in uses:  # said in a comment on the line, or in the comment lines just above it
            above = [line for line in lines[max(0, index - 3) : index] if line.lstrip().startswith("#")]
            comments = [line.split("#", 1)[1] for line in [*above, lines[index]] if "#" in line]
            assert any(said in comment for comment in comments), (script, lines[index])
        assert uses, (script, name)


def test_the_docs_count_the_scripts_that_import_the_harness():
    """The harness's and the README's word for how many scripts share it is the number that import it (it said "the
    four scripts" when seven did)."""
    importing = [path.name for path in ROOT.glob("*.py") if "from harness." in path.read_text()]
    number = {4: "four", 6: "six", 7: "seven", 8: "eight"}.get(len(importing), str(len(importing)))
    for path in (ROOT / "harness" / "__init__.py", ROOT / "harness" / "run.py", ROOT / "README.md"):
        text = " ".join(path.read_text().split())
        assert f"the {number} scripts" in text or f"all {number} scripts" in text, (path.name, len(importing))
        assert "the four scripts do" not in text and "the same for the four scripts" not in text, path.name
