"""The training and evaluation envs of a run, as one vector env: in the run's process (Gymnasium's SyncVectorEnv) or,
with --env-workers K > 1, split over K worker processes (harness/env_workers.py) that compute the same steps; and
their states, read and put back through whichever it is, for the checkpoints."""

import gymnasium as gym

from dt_wrappers import make_env
from harness.env_state import env_state, restore_envs
from harness.env_workers import EnvWorkers


def make_vector_env(args, dt, num_envs, seed, workers=1):
    """`num_envs` envs at this dt, seeded seed, seed + 1, ...; at an episode's end the reset observation comes at
    once and the true last one in infos["final_obs"] (SAME_STEP autoreset). In this process, or with workers > 1
    split over that many worker processes (EnvWorkers), which compute the same steps."""
    if workers > 1:
        return EnvWorkers(args.env_id, dt, args.time_limit, num_envs, seed, workers)
    thunks = [lambda i=i: make_env(args.env_id, dt, args.time_limit, seed + i) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def env_states(envs):
    """Each training env's state (env_state), from this process or from the workers."""
    return envs.env_states() if isinstance(envs, EnvWorkers) else [env_state(env) for env in envs.envs]


def restore_env_states(envs, states, obs):
    """Put each training env back as env_states saw it; returns the observations to go on from (a new episode's
    first where a simulator cannot be restored, as harness/env_state.py's restore_envs does)."""
    return envs.restore(states, obs) if isinstance(envs, EnvWorkers) else restore_envs(envs, states, obs)
