"""The authors' own code (github.com/ctallec/continuous-rl, `code/`): their DAU and their unscaled DQN on CartPole,
their unscaled DDPG on Pendulum; one grid point, written as ours are.

    git clone https://github.com/ctallec/continuous-rl ~/continuous-rl
    export DAU_AUTHORS_CHECKOUT=~/continuous-rl
    python -m sweeps.authors_code --dt 0.001 --seed 3           # one run: runs/<run_name>/evals.csv and run.json
    python -m sweeps.authors_code --algo ddpg --env-id Pendulum-v1 --dt 0.01    # their `--algo ddpg --noscale`
    python -m sweeps.run_local sweeps/authors/cartpole.yaml     # the grid, like any sweep file
    python -m analysis.invariance --runs docs/results/authors_cartpole docs/results   # judged beside ours

Run from the repository root, as a module: it imports the harness (run.json's records, as our runs write them).

The authors' algorithm runs unchanged: their argument parser (with the flags of their README and the paper's settings
for the env), their `configure` (networks, RMSprop, OU noise, replay memory, critic and actor), their `train` for the
interaction and learning, and their `evaluate` for the returns. Shims stand in only for what no longer exists
(sweeps/authors_shims.py, each tested in tests/test_authors_code.py): Gym's old reset/step API over Gymnasium's
CartPole (`tau = dt`) and Pendulum (`dt = dt`), `scipy.misc.toimage`, `argload` where it is not installed, their
TensorBoard logger (nothing logged), and a vector env that steps the 256 envs in this process as their SubprocVecEnv
does in 256 processes.

What is ours: the seeds (their code sets none: Python's, NumPy's and torch's generators get --seed, and each env its own
seed drawn from it), the budget and the evaluation schedule in physical seconds summed over the envs, as in our runs
(rounds of 10 vector steps; their learning step every 10 steps is counted by the agent, so where `train` is cut into
epochs changes nothing it computes), and the scaled return, their evaluation's mean return times dt over the env's
native step (0.02 for CartPole, 0.05 for Pendulum: their `code/analysis/plots.py` scales so).
Their evaluation scores as ours does (the first episode's return within one time limit, the deterministic policy; each
evaluation resets every evaluation env, whose generator was seeded once, at the run's start) and differs in one way
only: 64 evaluation envs (ours: 8).
"""

import csv
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from sweeps.authors_shims import SHIMS, SerialVecEnv, install_shims

# Each env's own step: the scaled return is dt / NATIVE_DT times the sum of rewards. Their env ids beside ours.
NATIVE_DT = {"CartPole-v1": 0.02, "Pendulum-v1": 0.05}
THEIR_ENV = {"CartPole-v1": "cartpole", "Pendulum-v1": "continuous_pendulum"}
# Their algorithms the runner runs, each on the envs of the paper's figure it appears in.
ENVS_OF = {"ddau": ("CartPole-v1",), "dqn": ("CartPole-v1",), "ddpg": ("Pendulum-v1",)}
CHECKOUT_VARIABLE = "DAU_AUTHORS_CHECKOUT"


@dataclass
class Args:
    algo: Literal["ddau", "dqn", "ddpg"] = "ddau"
    """their algorithm (`--algo`): ddau, their discrete DAU; dqn and ddpg, their baselines, run with `--noscale`"""
    env_id: str = "CartPole-v1"
    """CartPole-v1 for ddau and dqn (their `cartpole`), Pendulum-v1 for ddpg (their `continuous_pendulum`)"""
    dt: float = 0.01
    """time step: CartPole's tau, Pendulum's dt (their `--dt`)"""
    seed: int = 1
    """seeds Python's, NumPy's and torch's generators and the envs (their code sets no seed)"""
    total_time: float = 1800.0
    """training budget in physical seconds summed over the training envs (whole rounds of 10 vector steps)"""
    eval_every: float = 150.0
    """evaluate at the first round end at or past each multiple of this many physical seconds, as our runs do"""
    time_limit: float = 10.0
    """episode time limit in physical seconds (their `--time_limit`): CartPole-v1's 500 steps of 0.02 s, Pendulum-v1's
    200 of 0.05 s. Their training envs end an episode there as a termination; their evaluation plays this long"""
    no_training_time_limit: bool = False
    """leave --time_limit out of their command line: their training envs then never end an episode on Pendulum, as
    their code runs without the flag (their evaluation still plays --time-limit seconds)"""
    target_tau: float = 0.0
    """their `--tau`, the old target's weight after each update (the appendix: 0 on CartPole and Pendulum; their
    README's DDPG command: 0.9)"""
    num_envs: int = 256
    """training envs (their `--nb_train_env`; the paper: 256)"""
    steps_per_round: int = 10
    """vector steps between two learning steps (their `--steps_btw_train`; the paper: 10)"""
    updates_per_round: int = 50
    """gradient steps at each learning step (their `--learn_per_step`; the paper: 50)"""
    num_eval_envs: int = 64
    """evaluation envs (their `--nb_eval_env`; their README: 64)"""
    checkout: str | None = None
    """a checkout of ctallec/continuous-rl (default: $DAU_AUTHORS_CHECKOUT)"""
    print_args: bool = False
    """print the run's arguments, identity and label as JSON (one line) and exit before any work (as our scripts')"""


def authors_argv(args, logdir):
    """Their command line: the flags of their README's commands, with the paper's settings for the env (REFERENCE.md
    section 1: lr 0.1, gamma 0.8, tau 0 on CartPole and Pendulum, OU sigma 1.5 and theta 7.5, 256 envs, 10 steps and
    50 updates a round, batch 256, memory 1e6, no normalisation); the baselines with `--noscale`, as in the paper's
    figure. --policy_lr is passed as their README does, and their code never reads it. --nb_true_epochs gives our
    budget in their unit (epochs of nb_steps vector steps, times dt); --eval_gap is ours; both are recorded, neither
    changes what `train` computes."""
    nb_steps = 100
    return ["--algo", args.algo, "--env_id", THEIR_ENV[args.env_id], "--dt", repr(args.dt),
            "--steps_btw_train", str(args.steps_per_round), "--noise_type", "coherent", "--batch_size", "256",
            "--hidden_size", "256", "--nb_layers", "1",
            "--gamma", "0.8", "--nb_steps", str(nb_steps), "--sigma", "1.5", "--theta", "7.5",
            "--nb_train_env", str(args.num_envs), "--nb_eval_env", str(args.num_eval_envs),
            "--memory_size", "1000000", "--learn_per_step", str(args.updates_per_round),
            "--eval_gap", repr(args.eval_every / (nb_steps * args.num_envs)), "--weight_decay", "0.0",
            "--tau", repr(args.target_tau),
            "--optimizer", "rmsprop",
            *([] if args.no_training_time_limit else ["--time_limit", repr(args.time_limit)]),
            "--lr", "0.1", "--policy_lr", "0.02",
            *(["--noscale"] if args.algo != "ddau" else []),
            "--nb_true_epochs", repr(args.total_time / (nb_steps * args.num_envs)), "--noreload",
            "--logdir", str(logdir)]  # fmt: skip


# --- The run -----------------------------------------------------------------------------------------------------


def checkout_of(args):
    """The checkout's path and commit, refused with what to pass when it is missing or is not theirs."""
    path = args.checkout or os.environ.get(CHECKOUT_VARIABLE)
    if not path:
        sys.exit(f"no checkout of ctallec/continuous-rl: pass --checkout PATH or set {CHECKOUT_VARIABLE}")
    path = Path(path).expanduser().resolve()
    if not (path / "code" / "main.py").is_file():
        sys.exit(f"{path} is not a checkout of ctallec/continuous-rl (no code/main.py): pass --checkout PATH")

    def git(*command):
        result = subprocess.run(["git", "-C", str(path), *command], capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else None

    changed = git("status", "--porcelain", "--", "code")
    return path, {"commit": git("rev-parse", "HEAD"), "uncommitted_changes": None if changed is None else bool(changed)}


def check_args(args):
    if args.env_id not in ENVS_OF[args.algo]:
        sys.exit(f"--env-id {args.env_id}: the runner runs their {args.algo} on {' and '.join(ENVS_OF[args.algo])} "
                 f"only (--env-id {ENVS_OF[args.algo][0]})")  # fmt: skip
    if not 0 < args.dt <= 0.05:
        sys.exit(f"--dt {args.dt}: a time step in (0, 0.05] s, e.g. --dt 0.001")
    for name in ("total_time", "eval_every", "time_limit"):
        if not getattr(args, name) > 0:
            sys.exit(f"--{name.replace('_', '-')} {getattr(args, name)}: a positive number of physical seconds")
    if args.num_envs < 1 or args.num_eval_envs < 1:
        sys.exit("--num-envs and --num-eval-envs: at least 1")


def updates_done(agent_count, steps_between, updates_per_learn=50, warm_up=10):
    """Their agent's gradient steps after `agent_count` vector steps: `updates_per_learn` at every count c with
    c % steps_between == steps_between - 1 and c > 10 (OfflineAgent.learn)."""
    learns = [count for count in range(1, agent_count + 1) if count % steps_between == steps_between - 1]
    return updates_per_learn * sum(count > warm_up for count in learns)


def play(args, theirs, authors_args, made, run_dir, start):
    """Their `train`, round by round, and their `evaluate` at the first round end at or past each multiple of
    --eval-every and at the end, written to evals.csv as our runs write it: (rounds, round time, the last scaled
    return, seconds spent evaluating)."""
    agent, env, eval_env = made
    round_steps = args.steps_per_round
    round_time = round_steps * args.num_envs * args.dt
    rounds = int(args.total_time / round_time + 1e-9)
    eval_seconds, evaluations = 0.0, 0
    path = os.path.join(run_dir, "evals.csv")
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["physical_time", "env_steps", "updates", "wall_time", "scaled_return"])
        obs = env.reset()
        for round_index in range(rounds + 1):
            physical_time = round_index * round_time
            if physical_time >= evaluations * args.eval_every - 1e-9 or round_index == rounds:
                eval_start = time.time()
                mean_return = theirs.main.evaluate(args.dt, round_index, eval_env, agent, authors_args.eval_gap,
                                                   args.time_limit, eval_return=True, no_log=True)  # fmt: skip
                eval_seconds += time.time() - eval_start
                scaled = float(mean_return) * args.dt / NATIVE_DT[args.env_id]
                steps = round_index * round_steps
                updates = updates_done(steps, round_steps, args.updates_per_round)
                writer.writerow([f"{physical_time:.6f}", steps * args.num_envs, updates,
                                 f"{time.time() - start:.2f}", f"{scaled:.4f}"])  # fmt: skip
                file.flush()
                print(f"{physical_time:9.2f} s  scaled return {scaled:8.2f}  ({time.time() - start:.0f} s)", flush=True)
                evaluations = int(physical_time / args.eval_every + 1e-9) + 1
            if round_index < rounds:
                obs = theirs.main.train(round_steps, env, agent, obs)
    return rounds, round_time, scaled, eval_seconds


def run(args):
    from harness.files import new_run_dir, save_json
    from harness.run_info import code_version, describe_run, library_versions, machine_info

    check_args(args)
    if args.print_args:  # as run.json will record them, for the sweep runner: no run
        recorded = asdict(args) | {"checkout": None, "print_args": False}
        print(json.dumps({"dt": args.dt, "args": recorded, **describe_run("authors_code.py", recorded, None),
                          "defaults": asdict(Args())}), flush=True)  # fmt: skip
        return None
    checkout, commit = checkout_of(args)
    import torch

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    name = "authors_code" if args.algo == "ddau" else f"authors_{args.algo}"
    run_name = new_run_dir(f"{args.env_id}__{name}__dt{args.dt:g}__{args.seed}__{int(time.time())}")
    run_dir = os.path.join("runs", run_name)
    theirs = install_shims(checkout / "code")
    argv = authors_argv(args, run_dir)
    sys.argv = ["main.py", *argv]
    authors_args = theirs.parse.setup_args()
    seeds = np.random.SeedSequence(args.seed).generate_state(args.num_envs + args.num_eval_envs).tolist()
    made = iter([seeds[: args.num_envs], seeds[args.num_envs :]])
    theirs.config.VEnv = lambda env_list: SerialVecEnv(env_list, next(made))
    agent, env, eval_env = theirs.config.configure(authors_args)

    start = time.time()
    rounds, round_time, scaled, eval_seconds = play(args, theirs, authors_args, (agent, env, eval_env), run_dir, start)
    round_steps = args.steps_per_round
    env.close()
    eval_env.close()
    steps = rounds * round_steps
    recorded = asdict(args) | {"checkout": None}  # where the checkout lies changes nothing computed
    save_json({"script": "authors_code.py", "run_name": run_name, "dt": args.dt, "args": recorded,
               **describe_run("authors_code.py", recorded, None), "completed": True,
               "physical_time": rounds * round_time, "env_steps": steps * args.num_envs,
               "updates": updates_done(steps, round_steps, args.updates_per_round),
               "wall_time": time.time() - start,
               "eval_wall_time": eval_seconds, "eval_wait_time": eval_seconds, "final_scaled_return": scaled,
               "authors_code": {"repository": "ctallec/continuous-rl", "checkout": str(checkout), **commit,
                                "argv": [str(part) for part in argv], "shims": list(SHIMS)},
               "code": [code_version(__file__)], "versions": library_versions(),
               "machine": machine_info(torch.device("cpu"))},
              os.path.join(run_dir, "run.json"))  # fmt: skip
    return run_dir


if __name__ == "__main__":
    import tyro

    run(tyro.cli(Args))
