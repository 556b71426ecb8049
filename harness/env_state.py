"""An env's state, for the checkpoints: each env made by make_env saved (`env_state`) and put back (`set_env_state`)
as data a checkpoint holds, so that a resumed run's envs go on with the episodes in flight, step for step."""

import mujoco
import numpy as np
import torch
from gymnasium.envs.mujoco import MujocoEnv

from dt_wrappers import BipedalWalkerTime, PhysicalTime

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
    """An env made by make_env, as `set_env_state` puts it back: its random generator, the time-step wrapper's
    state (PhysicalTime.state_dict: the episode's step count, return and first seed), and the simulator's state
    where it can be read back: MuJoCo's integration state (mjSTATE_INTEGRATION: all that mj_step reads, the
    solver's warm start included) and MUJOCO_DERIVED, a classic-control env's `state`; None for a simulator that
    cannot be restored (Box2D's world)."""
    base, wrapper = env.unwrapped, _time_wrapper(env)
    physics = None
    if isinstance(base, MujocoEnv):
        integration = np.empty(mujoco.mj_stateSize(base.model, mujoco.mjtState.mjSTATE_INTEGRATION))
        mujoco.mj_getState(base.model, base.data, integration, mujoco.mjtState.mjSTATE_INTEGRATION)
        physics = {"integration": torch.from_numpy(integration)}
        physics |= {name: torch.from_numpy(getattr(base.data, name).copy()) for name in MUJOCO_DERIVED}
    elif not isinstance(wrapper, BipedalWalkerTime) and hasattr(base, "state"):  # (BipedalWalkerTime: Box2D's)
        physics = {name: _to_saved(getattr(base, name)) for name in CLASSIC_STATE if hasattr(base, name)}
    return {"np_random": base.np_random.bit_generator.state, **wrapper.state_dict(), "physics": physics}


def set_env_state(env, state):
    """Put an env back as `env_state` saw it (the env must have been reset once). Returns False if its simulator
    could not be restored: the caller then starts a new episode with env.reset(), and the episode in flight ends
    at the checkpoint as at a time-limit truncation (its last transition bootstraps), so nothing is biased."""
    base, wrapper = env.unwrapped, _time_wrapper(env)
    base.np_random.bit_generator.state = state["np_random"]
    wrapper.load_state_dict(state)
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
