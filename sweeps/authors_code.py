"""The authors' own DAU (github.com/ctallec/continuous-rl, `code/`) on CartPole: one grid point, written as ours are.

    git clone https://github.com/ctallec/continuous-rl ~/continuous-rl
    export DAU_AUTHORS_CHECKOUT=~/continuous-rl
    python -m sweeps.authors_code --dt 0.001 --seed 3           # one run: runs/<run_name>/evals.csv and run.json
    python -m sweeps.run_local sweeps/authors/cartpole.yaml     # the grid, like any sweep file
    python -m analysis.invariance --runs docs/results/authors_cartpole docs/results   # judged beside ours

Run from the repository root, as a module: it imports the harness (run.json's records, as our runs write them).

The authors' algorithm runs unchanged: their argument parser (with the flags of their README and the paper's CartPole
settings), their `configure` (networks, RMSprop, OU noise, replay memory, DAU critic and argmax actor), their
`train` for the interaction and learning, and their `evaluate` for the returns. Shims stand in only for what no longer
exists (SHIMS, each tested in tests/test_authors_code.py): Gym's old reset/step API over Gymnasium's CartPole with
`tau = dt`, `scipy.misc.toimage`, `argload` where it is not installed, their TensorBoard logger (nothing logged), and a
vector env that steps the 256 envs in this process as their SubprocVecEnv does in 256 processes.

What is ours: the seeds (their code sets none: Python's, NumPy's and torch's generators get --seed, and each env its own
seed drawn from it), the budget and the evaluation schedule in physical seconds summed over the envs, as in our runs
(rounds of 10 vector steps; their learning step every 10 steps is counted by the agent, so where `train` is cut into
epochs changes nothing it computes), and the scaled return, their evaluation's mean return times dt / 0.02.
Their evaluation scores as ours does (the first episode's return within one time limit, the deterministic policy; each
evaluation resets every evaluation env, whose generator was seeded once, at the run's start) and differs in one way
only: 64 evaluation envs (ours: 8).
"""

import csv
import logging
import os
import random
import subprocess
import sys
import time
import types
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

NATIVE_DT = 0.02  # CartPole-v1's own step (tau): the scaled return is dt / NATIVE_DT times the sum of rewards
CHECKOUT_VARIABLE = "DAU_AUTHORS_CHECKOUT"
SHIMS = (
    "gym: Gym's old API (reset -> obs, step -> (obs, reward, done, info)) over Gymnasium's CartPole, tau = dt; "
    "gym.spaces, gym.Wrapper, gym.envs.* are Gymnasium's, gym.logger is Python's logging",
    "scipy.misc.toimage (removed from SciPy): an array to a PIL image, for their image logs",
    "argload, only where it is not installed: their parser with --logdir, nothing reloaded",
    "mylog's writers: none (their TensorBoard and pickle logs; evals.csv is written here)",
    "envs.vecenv.VEnv: one process steps the envs in turn, resetting an env that is done, as their SubprocVecEnv",
)


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    """the environment: only CartPole-v1 (their `--env_id cartpole`)"""
    dt: float = 0.01
    """time step: CartPole's tau (their `--dt`)"""
    seed: int = 1
    """seeds Python's, NumPy's and torch's generators and the envs (their code sets no seed)"""
    total_time: float = 1800.0
    """training budget in physical seconds summed over the training envs (whole rounds of 10 vector steps)"""
    eval_every: float = 150.0
    """evaluate at the first round end at or past each multiple of this many physical seconds, as our runs do"""
    time_limit: float = 10.0
    """episode time limit in physical seconds (CartPole-v1's 500 steps of 0.02 s; their `--time_limit`)"""
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


def authors_argv(args, logdir):
    """Their command line: the flags of their README's DAU commands, with the paper's CartPole settings (REFERENCE.md
    section 1: lr 0.1, gamma 0.8, tau 0, OU sigma 1.5 and theta 7.5, 256 envs, 10 steps and 50 updates a round, batch
    256, memory 1e6, no normalisation). --nb_true_epochs gives our budget in their unit (epochs of nb_steps vector
    steps, times dt); --eval_gap is ours; both are recorded, neither changes what `train` computes."""
    nb_steps = 100
    return ["--algo", "ddau", "--env_id", "cartpole", "--dt", repr(args.dt),
            "--steps_btw_train", str(args.steps_per_round), "--noise_type", "coherent", "--batch_size", "256",
            "--hidden_size", "256", "--nb_layers", "1",
            "--gamma", "0.8", "--nb_steps", str(nb_steps), "--sigma", "1.5", "--theta", "7.5",
            "--nb_train_env", str(args.num_envs), "--nb_eval_env", str(args.num_eval_envs),
            "--memory_size", "1000000", "--learn_per_step", str(args.updates_per_round),
            "--eval_gap", repr(args.eval_every / (nb_steps * args.num_envs)), "--weight_decay", "0.0", "--tau", "0.0",
            "--optimizer", "rmsprop", "--time_limit", repr(args.time_limit), "--lr", "0.1", "--policy_lr", "0.02",
            "--nb_true_epochs", repr(args.total_time / (nb_steps * args.num_envs)), "--noreload",
            "--logdir", str(logdir)]  # fmt: skip


# --- The shims: what their code imports that no longer exists -------------------------------------------------------


def old_api_cartpole():
    """Gym's CartPole-v1 as their code knew it (Gym before 0.26): reset() -> obs, step(a) -> (obs, reward, done, info),
    `tau` the step, `.unwrapped` the env itself. Gymnasium's CartPole does the physics; its first reset takes the seed
    given by seed() (their code calls neither: the vector env does, for them)."""
    import gymnasium
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    class OldApiCartPole(gymnasium.Env):
        metadata = CartPoleEnv.metadata

        def __init__(self):
            self.env = CartPoleEnv()
            self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
            self.reward_range = (-float("inf"), float("inf"))
            self._seed = None

        tau = property(lambda self: self.env.tau, lambda self, value: setattr(self.env, "tau", value))

        def seed(self, seed=None):
            self._seed = seed
            return [seed]

        def reset(self):
            observation, _ = self.env.reset(seed=self._seed)
            self._seed = None  # later resets draw from the env's own generator, as Gym's did
            return observation

        def step(self, action):
            observation, reward, terminated, truncated, _ = self.env.step(int(action))
            return observation, reward, terminated or truncated, {}  # unwrapped: never truncated

        def render(self, mode="human"):
            return self.env.render()

        def close(self):
            self.env.close()

    return OldApiCartPole()


def gym_module():
    """A `gym` package for their imports: Gymnasium's spaces, wrappers (with Gym's reward_range) and env modules under
    Gym's names, Python's
    logging as gym.logger (their TimeLimit calls logger.debug, which Gymnasium's logger lacks), and make() for the
    one env the runner supports."""
    import gymnasium
    import gymnasium.envs.box2d.bipedal_walker
    import gymnasium.envs.classic_control
    import gymnasium.spaces
    import gymnasium.utils.seeding

    def make(env_id):
        if env_id != "CartPole-v1":
            raise ValueError(f"the runner's gym shim makes CartPole-v1 only, not {env_id}")
        return old_api_cartpole()

    class Wrapper(gymnasium.Wrapper):
        reward_range = property(
            lambda self: self.env.reward_range
        )  # Gym's wrappers had it (their SubprocVecEnv reads it)

    gym = types.ModuleType("gym")
    gym.__dict__.update(make=make, Env=gymnasium.Env, Space=gymnasium.Space, Wrapper=Wrapper,
                        ActionWrapper=gymnasium.ActionWrapper, logger=logging.getLogger("gym"),
                        spaces=gymnasium.spaces, utils=gymnasium.utils, envs=gymnasium.envs)  # fmt: skip
    return {"gym": gym, "gym.spaces": gymnasium.spaces, "gym.utils": gymnasium.utils,
            "gym.utils.seeding": gymnasium.utils.seeding, "gym.envs": gymnasium.envs,
            "gym.envs.box2d": gymnasium.envs.box2d,
            "gym.envs.box2d.bipedal_walker": gymnasium.envs.box2d.bipedal_walker,
            "gym.envs.classic_control": gymnasium.envs.classic_control}  # fmt: skip


def toimage(array):
    """scipy.misc.toimage as SciPy had it for an image of floats: scaled to 0-255 bytes, as a PIL image."""
    from PIL import Image

    array = np.asarray(array, dtype=float)
    low, high = array.min(), array.max()
    scaled = (array - low) / (high - low) * 255 if high > low else np.zeros_like(array)
    return Image.fromarray(np.round(scaled).astype(np.uint8))


def argload_module():
    """argload's ArgumentLoader reduced to what a run of theirs uses: --logdir added, nothing reloaded."""

    class ArgumentLoader:
        def __init__(self, parser, to_reload):
            self._parser = parser
            parser.add_argument("--logdir", type=str, required=True)

        def parse_args(self, args=None):
            return self._parser.parse_args(args)

    return types.SimpleNamespace(ArgumentLoader=ArgumentLoader)


class SerialVecEnv:
    """Their SubprocVecEnv's behaviour in one process: step every env with its action, reset one that is done (its
    observation is then the reset one), stack the results and the infos' entries. With `seeds`, each env's first
    reset takes its seed."""

    def __init__(self, envs, seeds=None):
        self.envs = envs
        self.num_envs = len(envs)
        self.observation_space, self.action_space = envs[0].observation_space, envs[0].action_space
        for env, seed in zip(envs, seeds or [], strict=False):  # none given: as the envs are
            env.unwrapped.seed(seed)

    def step(self, actions):
        results = []
        for env, action in zip(self.envs, actions, strict=True):
            observation, reward, done, info = env.step(action)
            if done:
                observation = env.reset()
            results.append((observation, reward, done, info))
        observations, rewards, dones, infos = zip(*results, strict=True)
        return (np.stack(observations), np.stack(rewards), np.stack(dones),
                {key: np.stack([info[key] for info in infos]) for key in infos[0]})  # fmt: skip

    def reset(self):
        return np.stack([env.reset() for env in self.envs])

    def render(self, mode="human"):
        return self.envs[0].render(mode)

    def close(self):
        for env in self.envs:
            env.close()


def install_shims(code_dir):
    """Put the shims where their imports look (sys.modules) and their code on sys.path (the caller puts the vector
    env in place of theirs, config.VEnv). Returns their modules: main (train, evaluate), config (configure), parse
    (setup_args), mylog."""
    import warnings

    sys.modules.update(gym_module())
    with warnings.catch_warnings():  # SciPy 1.x: deprecated, toimage long gone; SciPy 2: gone
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import scipy.misc as misc
        except ImportError:
            misc = sys.modules["scipy.misc"] = types.ModuleType("scipy.misc")
    misc.toimage = toimage
    try:
        import argload  # noqa: F401  (installed: theirs)
    except ImportError:
        sys.modules["argload"] = argload_module()
    sys.path.insert(0, str(code_dir))
    import mylog

    mylog.Logger.CURRENT._writers = []
    import config
    import main
    import parse

    return types.SimpleNamespace(main=main, config=config, parse=parse, mylog=mylog)


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
    if args.env_id != "CartPole-v1":
        sys.exit(f"--env-id {args.env_id}: the runner runs their CartPole only (--env-id CartPole-v1)")
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


def run(args):
    from harness.files import new_run_dir, save_json
    from harness.run_info import code_version, library_versions, machine_info, run_identity

    check_args(args)
    checkout, commit = checkout_of(args)
    import torch

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    run_name = new_run_dir(f"{args.env_id}__authors_code__dt{args.dt:g}__{args.seed}__{int(time.time())}")
    run_dir = os.path.join("runs", run_name)
    theirs = install_shims(checkout / "code")
    argv = authors_argv(args, run_dir)
    sys.argv = ["main.py", *argv]
    authors_args = theirs.parse.setup_args()
    seeds = np.random.SeedSequence(args.seed).generate_state(args.num_envs + args.num_eval_envs).tolist()
    made = iter([seeds[: args.num_envs], seeds[args.num_envs :]])
    theirs.config.VEnv = lambda env_list: SerialVecEnv(env_list, next(made))
    agent, env, eval_env = theirs.config.configure(authors_args)

    round_steps = args.steps_per_round
    round_time = round_steps * args.num_envs * args.dt
    rounds = int(args.total_time / round_time + 1e-9)
    start, eval_seconds, evaluations = time.time(), 0.0, 0
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
                scaled = float(mean_return) * args.dt / NATIVE_DT
                steps = round_index * round_steps
                updates = updates_done(steps, round_steps, args.updates_per_round)
                writer.writerow([f"{physical_time:.6f}", steps * args.num_envs, updates,
                                 f"{time.time() - start:.2f}", f"{scaled:.4f}"])  # fmt: skip
                file.flush()
                print(f"{physical_time:9.2f} s  scaled return {scaled:8.2f}  ({time.time() - start:.0f} s)", flush=True)
                evaluations = int(physical_time / args.eval_every + 1e-9) + 1
            if round_index < rounds:
                obs = theirs.main.train(round_steps, env, agent, obs)
    env.close()
    eval_env.close()
    steps = rounds * round_steps
    recorded = asdict(args) | {"checkout": None}  # where the checkout lies changes nothing computed
    save_json({"script": "authors_code.py", "run_name": run_name, "dt": args.dt, "args": recorded,
               "identity": run_identity("authors_code.py", recorded), "completed": True,
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
