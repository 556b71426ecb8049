"""The per-environment settings: the defaults every script (and the sweep files) takes for every argument left
unset, the paper's settings (appendix "Environment dependent hyperparameters") and this project's budgets and replay
memory, in physical seconds. `Run` fills them in (harness/args.py, `settle_args`); `settings_help(Args)` prints them
as a table in each script's --help, the columns of the script's own flags; docs/common.md shows the same table, every
column (a test checks it)."""

import dataclasses

from gymnasium.envs.mujoco import MujocoEnv

# Per-environment defaults, the one table the scripts and the sweep files follow. Paper
# (appendix): observation normalisation for Ant, HalfCheetah and BipedalWalker; policy learning
# rate 0.02 for Pendulum, CartPole and BipedalWalker, 0.03 otherwise; target weight tau 0 for Pendulum
# and CartPole, 0.9 otherwise. Replay memory (paper, Discussion): 1e6 transitions at the coarsest dt of
# the paper's range for the env, held constant in physical seconds. Budgets and evaluation cadence:
# this project's (a run worth keeping in well under an hour on 2 cores; evaluation about 6% of it, measured
# at the native dt on 2 cores: 8 full episodes cost as much as 1/16 of an interval of training).
ENV_SETTINGS = {
    "Pendulum": dict(total_time=1800, eval_every=300, buffer_time=10_000, normalize_obs=False,
                     policy_learning_rate=0.02, tau=0.0),
    "CartPole": dict(total_time=1800, eval_every=300, buffer_time=10_000, normalize_obs=False,
                     policy_learning_rate=0.02, tau=0.0),
    "BipedalWalker": dict(total_time=20_000, eval_every=2000, buffer_time=10_000, normalize_obs=True,
                          policy_learning_rate=0.02, tau=0.9),
    "Ant": dict(total_time=50_000, eval_every=5000, buffer_time=50_000, normalize_obs=True,
                policy_learning_rate=0.03, tau=0.9),
    "HalfCheetah": dict(total_time=30_000, eval_every=3000, buffer_time=50_000, normalize_obs=True,
                        policy_learning_rate=0.03, tau=0.9),
}  # fmt: skip
ENV_SETTINGS["BipedalWalkerHardcore"] = ENV_SETTINGS["BipedalWalker"]
# Any other env: 1e6 transitions at its native step; other MuJoCo envs are normalised like Ant and HalfCheetah.
MUJOCO_SETTINGS = dict(total_time=30_000, eval_every=3000, normalize_obs=True, policy_learning_rate=0.03, tau=0.9)
OTHER_SETTINGS = dict(total_time=1800, eval_every=300, normalize_obs=False, policy_learning_rate=0.03, tau=0.9)
NATIVE_BUFFER_TRANSITIONS = 1_000_000


def env_settings(env):
    """The defaults for an env made by make_env: total_time, eval_every, buffer_time (seconds),
    normalize_obs, policy_learning_rate, tau."""
    name = env.spec.name if env.spec else None
    if name in ENV_SETTINGS:
        return dict(ENV_SETTINGS[name])
    settings = MUJOCO_SETTINGS if isinstance(env.unwrapped, MujocoEnv) else OTHER_SETTINGS
    return {**settings, "buffer_time": NATIVE_BUFFER_TRANSITIONS * env.get_wrapper_attr("ref_dt")}


def settings_help(args_class):
    """The table of env_settings as text, for the --help of a script whose arguments are `args_class` (a dataclass):
    the columns of the flags it has only (the discrete scripts have no --policy-learning-rate, DAU no --tau), and a
    note where a column holds for --scaled only."""
    flags = {field.name for field in dataclasses.fields(args_class)}
    columns = {"total_time": "total-time", "eval_every": "eval-every", "buffer_time": "buffer-time",
               "normalize_obs": "normalize", "policy_learning_rate": "policy-lr", "tau": "tau"}  # fmt: skip
    columns = {key: header for key, header in columns.items() if key in flags}
    # The appendix's unscaled variant gives the actor the critic's alpha~^Q (ddpg_baseline.py's __post_init__): a
    # script with both variants takes this column as its default with --scaled only.
    scaled_only = "scaled" in flags and "policy_learning_rate" in columns
    if scaled_only:
        columns["policy_learning_rate"] += "*"
    rows = [(name, settings) for name, settings in ENV_SETTINGS.items() if name != "BipedalWalkerHardcore"]
    rows += [("other MuJoCo", {**MUJOCO_SETTINGS, "buffer_time": "1e6 steps"}),
             ("other", {**OTHER_SETTINGS, "buffer_time": "1e6 steps"})]  # fmt: skip
    lines = ["Per-environment defaults of the arguments left at None (harness/settings.py; seconds):",
             f"  {'env':<14}" + "".join(f"{header:>12}" for header in columns.values())]  # fmt: skip
    for name, settings in rows:
        lines.append(f"  {name:<14}" + "".join(f"{settings[key]!s:>12}" for key in columns))
    if scaled_only:
        lines.append("  * the default with --scaled only; unscaled, --learning-rate's (the appendix's alpha~^Q dt0)")
    return "\n".join(lines)
