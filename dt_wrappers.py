"""Run a Gymnasium environment at any time step `dt`, keeping it the same task.

This is the time-step layer the four algorithm scripts share (their run's plumbing is
`run_harness.py`'s). `make_env(env_id, dt)`
returns an environment whose simulator step is `dt` physical seconds and which
follows these conventions (paper, Sec. 3 "Near Continuous-Time RL"):

1. The step is really changed: the simulator integrates over `dt`, it does not
   repeat or skip actions. Supported families:
   - every Gymnasium MuJoCo env (`MujocoEnv`): `frame_skip * model.opt.timestep
     == dt`, never with an integrator step larger than the native one;
   - BipedalWalker-v3 and its Hardcore variant: the module constant `FPS`,
     set to `1/dt` around every call into the env (it is process-global);
   - CartPole-v1: the attribute `tau`;
   - any env with a plain, writable `dt` attribute in seconds (Pendulum-v1,
     Acrobot-v1, or your own env: giving it such an attribute, and a reward
     that is a rate, is how to add one).
2. Rewards are rates: `r * dt` is the reward earned during the step, so the
   physical return of an episode is `sum(r * dt)` (paper, eq. 2-3). The
   "scaled return" `sum(r * dt) / ref_dt` is, at the native step `ref_dt`,
   exactly Gymnasium's return, and at any other `dt` about the same number for
   the same physical behaviour. One-off rewards (BipedalWalker's -100 on a
   fall) keep their full amount in the scaled return at every `dt`.
3. Observations keep their native-`dt` meaning (BipedalWalker's velocities,
   reported per frame, are rescaled).
4. Time limits are physical: an episode is truncated after
   `round(time_limit / dt)` steps; `time_limit` defaults to the native episode
   duration (native max steps x native dt).
5. At an episode's end `info["episode"]` holds `r` (scaled return), `l`
   (length in steps) and `t` (length in physical seconds). Inside a
   SyncVectorEnv with SAME_STEP autoreset it arrives in `info["final_info"]`.

The env exposes `dt` and `ref_dt` via `env.get_wrapper_attr(...)`.

`env_settings(env)` gives the per-environment defaults the four scripts use for
every argument left unset: the paper's settings (appendix "Environment dependent
hyperparameters") and this project's budgets and replay memory, in physical seconds.

`PhysicalTimeVideo` records an episode at real speed at any `dt`, and the last
section saves and restores an env's state (its simulator and generator), which
`run_harness.py`'s checkpoints use. Everything else a run needs that is not the
time step (arguments, logs, checkpoints, W&B) is in `run_harness.py`.
"""

import math
import os
import sys
import warnings

if "DISPLAY" not in os.environ:  # headless: MuJoCo renders through EGL (read when mujoco is imported)
    os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

# Box2D's SWIG bindings: "builtin type SwigPyPacked has no __module__ attribute" (shown where
# DeprecationWarnings are, e.g. in tests and notebooks) as it is imported.
warnings.filterwarnings("ignore", message=r"builtin type \w+ has no __module__ attribute", category=DeprecationWarning)
from gymnasium.envs.box2d import bipedal_walker  # noqa: E402
from gymnasium.envs.classic_control import CartPoleEnv  # noqa: E402
from gymnasium.envs.mujoco import MujocoEnv  # noqa: E402
from gymnasium.wrappers import RecordVideo  # noqa: E402

# A quiet console, each notice silenced at its source and nothing else:
# - Gymnasium's "HalfCheetah-v4 is out of date" (v4 still simulates the paper-era tasks; the filter must
#   come after `import gymnasium`, which installs its own);
warnings.filterwarnings("ignore", message=r".*The environment \S+-v4 is out of date", category=DeprecationWarning)


# - MuJoCo's "compiler attribute 'settotalmass' is deprecated", printed by the C library for every
#   HalfCheetah model compiled (one line per env: 265 per run). The attribute still sets the masses the
#   task was designed with, so the model stays as it is; other MuJoCo warnings go on as before.
_previous_mujoco_warning = mujoco.get_mju_user_warning()  # None: MuJoCo's own printer


def _mujoco_warning(message):
    if message.startswith("compiler attribute 'settotalmass' is deprecated"):
        return
    if _previous_mujoco_warning is not None:
        _previous_mujoco_warning(message)
    else:
        print(f"WARNING: {message}", file=sys.stderr, flush=True)


mujoco.set_mju_user_warning(_mujoco_warning)

SUPPORTED = (
    "Gymnasium MuJoCo envs, BipedalWalker(-Hardcore), CartPole, and any env with a "
    "writable float `dt` attribute in seconds (e.g. Pendulum, Acrobot)"
)


# Per-environment defaults, the one table the four scripts and the sweep files follow. Paper
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


def settings_help():
    """The table of env_settings as text, for the scripts' --help."""
    columns = {"total_time": "total-time", "eval_every": "eval-every", "buffer_time": "buffer-time",
               "normalize_obs": "normalize", "policy_learning_rate": "policy-lr", "tau": "tau"}  # fmt: skip
    rows = [(name, settings) for name, settings in ENV_SETTINGS.items() if name != "BipedalWalkerHardcore"]
    rows += [("other MuJoCo", {**MUJOCO_SETTINGS, "buffer_time": "1e6 steps"}),
             ("other", {**OTHER_SETTINGS, "buffer_time": "1e6 steps"})]  # fmt: skip
    lines = ["Per-environment defaults of the arguments left at None (dt_wrappers.ENV_SETTINGS; seconds):",
             f"  {'env':<14}" + "".join(f"{header:>12}" for header in columns.values())]  # fmt: skip
    for name, settings in rows:
        lines.append(f"  {name:<14}" + "".join(f"{settings[key]!s:>12}" for key in columns))
    return "\n".join(lines)


class PhysicalTime(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Sets the step to `dt`; rewards as rates, a physical time limit and episode
    statistics in scaled return. Wraps an env made without a step-count TimeLimit."""

    def __init__(self, env, dt=None, time_limit=None, seed=None):
        gym.utils.RecordConstructorArgs.__init__(self, dt=dt, time_limit=time_limit, seed=seed)
        gym.Wrapper.__init__(self, env)
        base = env.unwrapped
        self.ref_dt = set_time_step(base, dt)
        self.dt = self.ref_dt if dt is None else dt
        base.metadata = {**base.metadata, "render_fps": max(1, round(1 / self.dt))}  # a copy, never the class's
        native_steps = gym.spec(env.spec.id).max_episode_steps if env.spec else None
        if time_limit is None and native_steps is not None:
            time_limit = native_steps * self.ref_dt
        self.max_steps = None
        if time_limit is not None:
            if not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit) and time_limit >= self.dt):
                raise ValueError(f"time_limit must be at least one step (dt = {self.dt} s), got {time_limit!r}")
            self.max_steps = round(time_limit / self.dt)
        self._seed = seed
        self.steps, self.scaled_return = 0, 0.0  # reset() starts them again for each episode
        if seed is not None:
            self.action_space.seed(seed)
            self.observation_space.seed(seed)

    def _call(self, method, *args, **kwargs):
        return method(*args, **kwargs)

    def _reward_rate(self, reward, action, terminated):
        return reward

    def _observation(self, observation):
        return observation

    def reset(self, *, seed=None, options=None):
        # The seed given to make_env seeds the first episode unless reset says otherwise.
        seed, self._seed = (self._seed if seed is None else seed), None
        self.steps, self.scaled_return = 0, 0.0
        return self._reset(seed, options)

    def _reset(self, seed, options):
        observation, info = self._call(self.env.reset, seed=seed, options=options)
        return self._observation(observation), info

    def step(self, action):
        observation, reward, terminated, truncated, info = self._call(self.env.step, action)
        reward = float(self._reward_rate(reward, action, terminated))
        self.steps += 1
        self.scaled_return += reward * self.dt / self.ref_dt
        # Bootstrapping algorithms must see this as truncation, never termination.
        truncated = truncated or (self.max_steps is not None and self.steps >= self.max_steps)
        if terminated or truncated:
            info = {**info, "episode": {"r": self.scaled_return, "l": self.steps, "t": self.steps * self.dt}}
        return self._observation(observation), reward, terminated, truncated, info

    def render(self):
        return self._call(self.env.render)


class BipedalWalkerTime(PhysicalTime):
    """BipedalWalker reads the module constant FPS in reset, step and render."""

    def _call(self, method, *args, **kwargs):
        # FPS is process-global: set it for this env only for the duration of the call,
        # so several envs at different dt can live in one process.
        native_fps, bipedal_walker.FPS = bipedal_walker.FPS, 1 / self.dt
        try:
            return method(*args, **kwargs)
        finally:
            bipedal_walker.FPS = native_fps

    def _reset(self, seed, options):
        # reset() pushes the hull with a random force for one physics step: at the native FPS,
        # so that every dt starts from the same state (observation already in native units).
        return self.env.reset(seed=seed, options=options)

    def _reward_rate(self, reward, action, terminated):
        # reward = shaping difference - torque cost, or -100 on a fall. The shaping
        # difference and the fall are increments per step: dividing by the step (in
        # units of ref_dt) makes them rates. The torque cost is the same every step
        # whatever its length, so it already is a rate.
        increments_to_rate = self.ref_dt / self.dt
        walker = self.env.unwrapped
        if walker.game_over or walker.hull.position[0] < 0:
            return reward * increments_to_rate
        torque_cost = 0.00035 * bipedal_walker.MOTORS_TORQUE * np.clip(np.abs(action), 0, 1).sum()
        return (reward + torque_cost) * increments_to_rate - torque_cost

    def _observation(self, observation):
        # Entries 1-3 (hull angular velocity, x and y velocity) are per frame (/FPS).
        observation = observation.copy()
        observation[1:4] *= self.ref_dt / self.dt
        return observation


class PhysicalTimeVideo(RecordVideo):
    """Gymnasium's RecordVideo with frames sampled in physical time: frame k shows the first state at or
    after k / fps seconds, so a video plays at real speed at any dt (one frame per step would play a run at
    dt 0.0005 a hundred times slower than one at dt 0.05). Wraps an env made by make_env."""

    def _capture_frame(self):
        physical_time = self.env.get_wrapper_attr("steps") * self.env.get_wrapper_attr("dt")
        due = math.floor(physical_time * self.frames_per_sec + 1e-6) + 1  # frames owed since the reset
        if due > len(self.recorded_frames):
            super()._capture_frame()
            if self.recording:  # a step longer than 1 / fps shows its state for several frames
                self.recorded_frames += self.recorded_frames[-1:] * (due - len(self.recorded_frames))


def set_time_step(env, dt):
    """Make the unwrapped `env` integrate over `dt` seconds per step (None: keep the
    native step); return the native step."""
    if isinstance(env, MujocoEnv):
        native_dt, native_timestep = env.dt, env.model.opt.timestep
        if dt is not None:
            # Smallest frame skip whose integrator step is no larger than the native one.
            env.frame_skip = max(1, math.ceil(dt / native_timestep - 1e-9))
            env.model.opt.timestep = dt / env.frame_skip
        return native_dt
    if isinstance(env, bipedal_walker.BipedalWalker):
        return 1 / bipedal_walker.FPS  # dt is applied around each call by BipedalWalkerTime
    if isinstance(env, CartPoleEnv):
        native_dt = env.tau
        env.tau = native_dt if dt is None else dt
        return native_dt
    native_dt = getattr(env, "dt", None)
    if isinstance(native_dt, float) and not isinstance(getattr(type(env), "dt", None), property):
        env.dt = native_dt if dt is None else dt
        return native_dt
    raise ValueError(
        f"dt_wrappers cannot change the time step of {env.spec.id if env.spec else env}. "
        f"Supported: {SUPPORTED}. To add an env, give it a writable `dt` attribute "
        "(seconds per step) and make its reward a rate, or add a branch to set_time_step."
    )


def check_dt(dt):
    """Raise a ValueError unless dt is a usable time step in seconds."""
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a finite number of seconds > 0, got {dt!r}")
    if dt >= 1:
        raise ValueError(
            f"dt must be below 1 s, got {dt!r}: the algorithms use RMSprop smoothing 1 - dt, which must stay in (0, 1)"
        )


def make_env(env_id, dt=None, time_limit=None, seed=None, **make_kwargs):
    """Make `env_id` with a simulator step of `dt` seconds (None: native) and a
    physical `time_limit` in seconds (None: the native episode duration)."""
    if dt is not None:
        check_dt(dt)
    if "max_episode_steps" in make_kwargs:
        raise ValueError("episode limits are physical here: pass time_limit (seconds), not max_episode_steps")
    # Without Gymnasium's step-count limit: PhysicalTime re-imposes it in physical time.
    env = gym.make(env_id, max_episode_steps=-1, **make_kwargs)
    wrapper = BipedalWalkerTime if isinstance(env.unwrapped, bipedal_walker.BipedalWalker) else PhysicalTime
    return wrapper(env, dt, time_limit, seed)


# --- An env's state (run_harness.py's checkpoints save and restore the envs with these) ---

CLASSIC_STATE = ("state", "steps_beyond_terminated", "last_u")  # all a classic-control env's dynamics read
# What Gymnasium's MuJoCo envs read of mjData before a step (positions for their rewards: Ant's torso, Humanoid's
# centre of mass, Reacher's fingertip). mj_step computed them at the start of its last substep, not at the state
# it ended in, so they are saved as they are rather than recomputed from the state.
MUJOCO_DERIVED = ("xpos", "xipos")


def _time_wrapper(env):
    while not isinstance(env, PhysicalTime):
        env = env.env
    return env


def _to_saved(value):  # NumPy values as tensors: a checkpoint loads with torch.load(weights_only=True)
    return torch.from_numpy(np.array(value)) if isinstance(value, np.ndarray | np.generic) else value


def env_state(env):
    """An env made by make_env, as `set_env_state` puts it back: its random generator, our wrapper's step count
    and return, and the simulator's state where it can be read back: MuJoCo's integration state
    (mjSTATE_INTEGRATION: all that mj_step reads, the solver's warm start included) and MUJOCO_DERIVED, a
    classic-control env's `state`; None for a simulator that cannot be restored (Box2D's world)."""
    base, wrapper = env.unwrapped, _time_wrapper(env)
    physics = None
    if isinstance(base, MujocoEnv):
        integration = np.empty(mujoco.mj_stateSize(base.model, mujoco.mjtState.mjSTATE_INTEGRATION))
        mujoco.mj_getState(base.model, base.data, integration, mujoco.mjtState.mjSTATE_INTEGRATION)
        physics = {"integration": torch.from_numpy(integration)}
        physics |= {name: torch.from_numpy(getattr(base.data, name).copy()) for name in MUJOCO_DERIVED}
    elif not isinstance(base, bipedal_walker.BipedalWalker) and hasattr(base, "state"):
        physics = {name: _to_saved(getattr(base, name)) for name in CLASSIC_STATE if hasattr(base, name)}
    return {"np_random": base.np_random.bit_generator.state, "steps": wrapper.steps,
            "scaled_return": wrapper.scaled_return, "seed": wrapper._seed, "physics": physics}  # fmt: skip


def set_env_state(env, state):
    """Put an env back as `env_state` saw it (the env must have been reset once). Returns False if its simulator
    could not be restored: the caller then starts a new episode with env.reset(), and the episode in flight ends
    at the checkpoint as at a time-limit truncation (its last transition bootstraps), so nothing is biased."""
    base, wrapper = env.unwrapped, _time_wrapper(env)
    base.np_random.bit_generator.state = state["np_random"]
    wrapper.steps, wrapper.scaled_return, wrapper._seed = state["steps"], state["scaled_return"], state["seed"]
    physics = state["physics"]
    if physics is None:
        return False
    # .cpu(): a state loaded onto a GPU (--eval-model's map_location) comes back to host memory.
    if isinstance(base, MujocoEnv):
        integration = physics["integration"].cpu().numpy()
        mujoco.mj_setState(base.model, base.data, integration, mujoco.mjtState.mjSTATE_INTEGRATION)
        for name in MUJOCO_DERIVED:
            getattr(base.data, name)[:] = physics[name].cpu().numpy()
    else:
        for name, value in physics.items():
            setattr(base, name, value.cpu().numpy() if isinstance(value, torch.Tensor) else value)
    return True


def restore_envs(envs, states, obs=None):
    """set_env_state on every env of a vector env. With `obs` (the training envs' observations), the row of an
    env whose simulator could not be restored becomes the first observation of a new episode."""
    for index, (env, state) in enumerate(zip(envs.envs, states, strict=True)):
        if not set_env_state(env, state) and obs is not None:
            obs[index] = env.reset()[0]
    return obs
