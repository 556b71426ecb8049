"""Run a Gymnasium environment at any time step `dt`, keeping it the same task.

This is the time-step layer the four algorithm scripts share (the rest of their run is the
`harness/` package's). `make_env(env_id, dt)`
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

Importing this module changes three things beyond its own definitions, each so that the envs it
makes keep the console quiet, and each silencing one notice at its source and nothing else (the
comments below say why each is harmless): warning filters for Box2D's SWIG DeprecationWarning (at
its import here) and Gymnasium's "v4 is out of date" (at `gym.make`), and MuJoCo's process-wide
warning hook, which drops its "settotalmass is deprecated" line for each HalfCheetah model made.

Everything else a run needs that is not the time step (the per-environment settings, an env's
state for the checkpoints, videos, arguments, logs, W&B) is in `harness/`.
"""

import math
import sys
import warnings

import gymnasium as gym
import mujoco
import numpy as np

# Box2D's SWIG bindings: "builtin type SwigPyPacked has no __module__ attribute" (shown where
# DeprecationWarnings are, e.g. in tests and notebooks) as it is imported.
warnings.filterwarnings("ignore", message=r"builtin type \w+ has no __module__ attribute", category=DeprecationWarning)
from gymnasium.envs.box2d import bipedal_walker  # noqa: E402
from gymnasium.envs.classic_control import CartPoleEnv  # noqa: E402
from gymnasium.envs.mujoco import MujocoEnv  # noqa: E402

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

    def state_dict(self):
        """This wrapper's own state, for a checkpoint: the episode's step count and scaled return so far, and the
        seed of the first reset if it has not come yet."""
        return {"steps": self.steps, "scaled_return": self.scaled_return, "seed": self._seed}

    def load_state_dict(self, state):
        """Put back what state_dict saved: the episode in flight goes on with its count, its return and, before the
        first reset, its seed."""
        self.steps, self.scaled_return, self._seed = state["steps"], state["scaled_return"], state["seed"]


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
