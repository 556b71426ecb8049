"""The shims that let the authors' code (github.com/ctallec/continuous-rl, `code/`) run on today's libraries: what
it imports that no longer exists, and nothing of their algorithm (sweeps/authors_code.py runs it; each shim is tested
in tests/test_authors_code.py)."""

import logging
import sys
import types

import numpy as np

SHIMS = (
    "gym: Gym's old API (reset -> obs, step -> (obs, reward, done, info)) over Gymnasium's CartPole (tau = dt) and "
    "Pendulum (dt = dt); gym.spaces, gym.Wrapper, gym.envs.* are Gymnasium's, gym.logger is Python's logging",
    "scipy.misc.toimage (removed from SciPy): an array to a PIL image, for their image logs",
    "argload, only where it is not installed: their parser with --logdir, nothing reloaded",
    "mylog's writers: none (their TensorBoard and pickle logs; evals.csv is written here)",
    "envs.vecenv.VEnv: one process steps the envs in turn, resetting an env that is done, as their SubprocVecEnv",
)


def old_api_env(gymnasium_env, step_attribute):
    """A Gymnasium env as Gym's API had it before 0.26, as their code knew it: reset() -> obs, step(a) -> (obs,
    reward, done, info), the step in its old attribute (CartPole's `tau`, Pendulum's `dt`), `.unwrapped` the env
    itself. Gymnasium's env does the physics; the first reset takes the seed given by seed() (their code calls
    neither: the vector env does, for them); later resets draw from the env's own generator, as Gym's did."""
    import gymnasium

    class OldApiEnv(gymnasium.Env):
        metadata = type(gymnasium_env).metadata

        def __init__(self):
            self.env = gymnasium_env
            self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
            self.reward_range = (-float("inf"), float("inf"))
            self._seed = None

        def seed(self, seed=None):
            self._seed = seed
            return [seed]

        def reset(self, seed=None, options=None):  # Gymnasium's wrappers pass both; their code never sets them
            observation, _ = self.env.reset(seed=self._seed)
            self._seed = None
            return observation

        def step(self, action):
            observation, reward, terminated, truncated, _ = self.env.step(action)
            return observation, reward, terminated or truncated, {}  # unwrapped: never truncated

        def render(self, mode="human"):
            return self.env.render()

        def close(self):
            self.env.close()

    step = property(
        lambda self: getattr(self.env, step_attribute), lambda self, dt: setattr(self.env, step_attribute, dt)
    )
    setattr(OldApiEnv, step_attribute, step)
    return OldApiEnv()


def old_api_cartpole():
    """Gym's CartPole-v1 (their `cartpole`): Gymnasium's CartPoleEnv, an int action, the step in `tau`."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    env = old_api_env(CartPoleEnv(), "tau")
    step = env.step
    env.step = lambda action: step(int(action))
    return env


def old_api_pendulum():
    """Gym's Pendulum-v0 (their `continuous_pendulum` and `pendulum`): Gymnasium's PendulumEnv (g = 10, as v0's), the
    step in `dt`. One difference in the physics: Gym's v0 moved the angle by the speed before clipping it at 8,
    Gymnasium after; the two differ only in a step whose speed passes 8."""
    from gymnasium.envs.classic_control.pendulum import PendulumEnv

    return old_api_env(PendulumEnv(), "dt")


MADE = {"CartPole-v1": old_api_cartpole, "Pendulum-v0": old_api_pendulum}  # the ids their make_env asks for


def gym_module():
    """A `gym` package for their imports: Gymnasium's spaces, wrappers (with Gym's reward_range) and env modules under
    Gym's names, Python's
    logging as gym.logger (their TimeLimit calls logger.debug, which Gymnasium's logger lacks), and make() for the
    envs the runner supports (MADE)."""
    import gymnasium
    import gymnasium.envs.box2d.bipedal_walker
    import gymnasium.envs.classic_control
    import gymnasium.spaces
    import gymnasium.utils.seeding

    def make(env_id):
        if env_id not in MADE:
            raise ValueError(f"the runner's gym shim makes {' and '.join(MADE)} only, not {env_id}")
        return MADE[env_id]()

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
