"""Run a Gymnasium environment at any time step `dt`, keeping it the same task.

This is the one module the four algorithm scripts share. `make_env(env_id, dt)`
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

The last section is the part of `--resume` that is the same in all four scripts:
an env's state, the random generators, atomic checkpoint files, the arguments a
resumed run may change, and SIGTERM.
"""

import dataclasses
import fcntl
import importlib.metadata
import itertools
import json
import math
import os
import platform
import random
import shutil
import signal
import sys
import warnings

if "DISPLAY" not in os.environ:  # headless: MuJoCo renders through EGL (read when mujoco is imported)
    os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import tyro  # noqa: E402

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


VIDEO_EVALUATIONS = {0} | {4**k for k in range(32)}


class EvaluationVideos:
    """--capture-video: one episode of the deterministic policy, recorded at evaluations 0, 1, 4, 16, 64...
    and at the end, into `folder` (`fps` frames per physical second)."""

    def __init__(self, env_id, dt, time_limit, folder, seed=None, fps=30):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (classic control, Box2D) renders off screen
        env = make_env(env_id, dt, time_limit, seed, render_mode="rgb_array")
        base = env.unwrapped
        if isinstance(base, MujocoEnv):  # the model's tracking camera: the free one loses a runner in seconds
            track = mujoco.mj_name2id(base.model, mujoco.mjtObj.mjOBJ_CAMERA, "track")
            if track >= 0:
                base.mujoco_renderer.camera_id = track
        self.env = PhysicalTimeVideo(env, folder, episode_trigger=lambda episode: True, fps=fps)
        self.evaluations = 0

    def record(self, policy, name, final=False):
        """Record one episode of `policy` (observation -> env action) to <name>-episode-<n>.mp4 if this
        evaluation (counted from 0) is due a video; the first and the final one always are."""
        index, self.evaluations = self.evaluations, self.evaluations + 1
        if not (final or index in VIDEO_EVALUATIONS):
            return
        self.env.name_prefix = name
        observation, _ = self.env.reset()
        terminated = truncated = False
        while not (terminated or truncated):
            observation, _, terminated, truncated, _ = self.env.step(policy(observation))
        self.env.stop_recording()  # write the file now, not at the next reset


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


def library_versions():
    """Python's and the libraries' versions a run's numbers depend on (run.json), None for one not installed."""
    # torch's own version names its build (2.13.0+cpu, 2.11.0+cu130), which a GPU image's pip metadata may not.
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("numpy", "gymnasium", "mujoco", "box2d"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine_info(device):
    """What a run ran on, beside library_versions (run.json): the CPU's model, the cores this process may use,
    torch's threads, MKL's pinned code path (MKL_CBWR, None: MKL's own choice) and the device. The same seed gives
    the same numbers only with the same thread count, and on another machine only with a CPU that takes the same
    code path (docs/common.md, "Reproducibility and speed")."""
    cpu = None
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as file:
            cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return {
        "cpu": cpu or platform.processor() or platform.machine(),
        "cores": cores,
        "torch_threads": torch.get_num_threads(),
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "device": device_name,
    }


def check_dt(dt):
    """Raise a ValueError unless dt is a usable time step in seconds."""
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a finite number of seconds > 0, got {dt!r}")
    if dt >= 1:
        raise ValueError(
            f"dt must be below 1 s, got {dt!r}: the algorithms use RMSprop smoothing 1 - dt, which must stay in (0, 1)"
        )


def set_round_seconds(args, dt):
    """--round-seconds: rounds of the same physical length at every dt. The paper's round is nb_steps = 10 steps
    in each env whatever dt, 10 dt physical seconds, so the networks change every 0.1 s of each env's experience at
    dt 0.01 and every 0.005 s at dt 0.0005. With --round-seconds T each env steps round(T / dt) times per round,
    and the round has updates_per_round / steps_per_round gradient steps per env step, so that the updates per
    physical second (and per transition) stay the paper's. Sets args.steps_per_round and args.updates_per_round;
    leaves them as they are without the flag."""
    if args.round_seconds is None or args.steps_per_round < 1:  # (check_args refuses steps_per_round < 1)
        return
    if not 0 < args.round_seconds < math.inf:
        raise ValueError(f"--round-seconds must be positive and finite, got {args.round_seconds}")
    steps = round(args.round_seconds / dt)
    if steps < 1:
        raise ValueError(f"--round-seconds {args.round_seconds:g} is shorter than one step (dt {dt:g} s)")
    args.updates_per_round = max(1, round(args.updates_per_round * steps / args.steps_per_round))
    args.steps_per_round = steps


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


# --- Checkpoints (--checkpoint-every, --resume, SIGTERM): the parts that are the same in all four scripts ---

CHECKPOINT = "checkpoint.pt"  # runs/<run_name>/checkpoint.pt: the run's latest whole training state, one per run
# Arguments a resumed run may change: none of them changes what the run computes (a larger --total-time
# only adds rounds).
RESUME_MAY_CHANGE = ("resume", "total_time", "track", "save_model", "capture_video", "checkpoint_every")
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


def random_state():
    """Python's, NumPy's and torch's global generators (CUDA's too where there is one)."""
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_random_state(state):
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    key = np.array(numpy_state["state"]["key"], dtype=np.uint32)
    np.random.set_state({**numpy_state, "state": {**numpy_state["state"], "key": key}})
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def replace_atomically(path, mode, write):
    """`write(file)` to a file beside `path`, flushed to disk, then renamed over `path`: a kill or an error
    during the write leaves the previous file whole, and a reader never sees half a file."""
    partial = f"{path}.partial"
    with open(partial, mode) as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)


def save_checkpoint(state, path):
    """torch.save, atomically: a kill during the write leaves the previous checkpoint whole."""
    replace_atomically(path, "wb", lambda file: torch.save(state, file))


def save_json(data, path):
    """json.dump, atomically (run.json, which sweeps/ reads while runs go on and after they stop)."""
    replace_atomically(path, "w", lambda file: json.dump(data, file, indent=1))


def load_checkpoint(run_dir, script):
    """The checkpoint of runs/<run_name> for `script`, loaded as data only (weights_only: it runs no code);
    a ValueError that says what is wrong if it is missing, unreadable or another script's."""
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(path):
        reason = "no such folder" if not os.path.isdir(run_dir) else f"no {CHECKPOINT} in it"
        raise ValueError(f"--resume {run_dir}: {reason}. A run keeps one when it is stopped by SIGTERM or run with "
                         "--checkpoint-every; start it again without --resume")  # fmt: skip
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a truncated or corrupt file: zip, pickle or EOF errors
        raise ValueError(f"--resume {run_dir}: {path} is not a readable checkpoint ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else 'no detail'})") from None  # fmt: skip
    if not isinstance(checkpoint, dict) or checkpoint.get("script") != script:
        made_by = checkpoint.get("script") if isinstance(checkpoint, dict) else None
        raise ValueError(f"--resume {run_dir}: its checkpoint was made by {made_by}, not {script}")
    return checkpoint


def parse_args(args_class, description, script):
    """The command line, and with --resume the run's checkpoint: every argument defaults to the run's own, and
    one given that would change what the run computes is refused. Returns (args, checkpoint or None)."""
    args = tyro.cli(args_class, description=description)
    if args.resume is None:
        return args, None
    try:
        checkpoint = load_checkpoint(args.resume, script)
        original = args_class(**checkpoint["args"])
    except (ValueError, TypeError) as error:
        sys.exit(f"error: {error}")
    args = tyro.cli(args_class, description=description, default=dataclasses.replace(original, resume=args.resume))
    for field in dataclasses.fields(args_class):
        name, given, was = field.name, getattr(args, field.name), getattr(original, field.name)
        if name not in RESUME_MAY_CHANGE and given != was:
            flag = "--" + name.replace("_", "-")
            sys.exit(f"error: --resume continues {args.resume} with its own arguments: {flag} {given} would change "
                     f"what it computes (it ran with {was}). Leave it out, or start a new run")  # fmt: skip
    if args.total_time < original.total_time:
        sys.exit(f"error: --total-time {args.total_time:g} is shorter than the run's {original.total_time:g} s: a "
                 "resumed run goes on to its own --total-time or to a larger one")  # fmt: skip
    return args, checkpoint


def new_run_dir(run_name, runs="runs"):
    """Make the folder of a new run, runs/<run_name>, and return its name. The name ends in the start second, so two
    runs of the same script, env, dt and seed that differ in another argument (a grid over it, started on a fast
    machine) can get the same one: the second then gets runs/<run_name>_2, and so on. os.mkdir is atomic, so two
    processes never get the same folder."""
    os.makedirs(os.path.dirname(os.path.join(runs, run_name)), exist_ok=True)  # (an env id may name a folder)
    for number in itertools.count(1):
        name = run_name if number == 1 else f"{run_name}_{number}"
        try:
            os.mkdir(os.path.join(runs, name))
            return name
        except FileExistsError:
            continue


def claim_run_dir(run_dir):
    """Hold runs/<run_name> for this process while it lives (an OS lock, released however the process ends): a
    second process for the same folder, such as a --resume of a run still going, gets a ValueError."""
    lock = open(os.path.join(run_dir, "running.lock"), "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        raise ValueError(f"{run_dir} is in use by another process (pid {lock.read().strip() or '?'}): wait for it to "
                         "stop, or stop it (SIGTERM saves a checkpoint)") from None  # fmt: skip
    except OSError:  # a file system without locks: nothing to hold
        return lock
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def check_disk(folder, checkpoint_bytes):
    """Refuse a run whose checkpoint cannot be written: a new one is written beside the last, then replaces it."""
    while not os.path.isdir(folder):  # runs/ may not exist yet: the disk it will be on
        folder = os.path.dirname(os.path.abspath(folder))
    existing = os.path.join(folder, CHECKPOINT)
    free = shutil.disk_usage(folder).free + (os.path.getsize(existing) if os.path.isfile(existing) else 0)
    if 2 * checkpoint_bytes > free:
        raise ValueError(f"a checkpoint of this run takes up to {checkpoint_bytes / 1e9:.2f} GB and is written beside "
                         f"the last one ({2 * checkpoint_bytes / 1e9:.2f} GB), but {free / 1e9:.2f} GB are free "
                         f"on the disk of {os.path.abspath(folder)}: lower --buffer-time (or --total-time), or run "
                         "without --checkpoint-every")  # fmt: skip


class Preemption:
    """SIGTERM (Slurm, cloud spot machines and `wandb agent` stop a job with it) asks the training loop to save a
    checkpoint at the end of the current round and stop; Ctrl-C (SIGINT) stops it at once, as before."""

    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGTERM, self._request)

    def _request(self, signum, frame):
        self.requested = True
