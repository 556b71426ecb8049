"""--env-workers: the training envs of a run split over worker processes, computing what one process computes.

`EnvWorkers` is the part of a Gymnasium vector env the scripts use (reset, step, close), over worker processes that
step their share of the envs; `harness/envs.py`'s `make_vector_env` makes one for --env-workers K > 1, and the
checkpoint reads and restores the envs' states through it (`env_states`, `restore`). Why it is written here rather
than taken from Gymnasium: docs/common.md, "Env workers".
"""

import atexit
import math
import multiprocessing
import pickle
import signal
import sys
import traceback

import numpy as np

from dt_wrappers import make_env
from harness.env_state import env_state, set_env_state


class EnvWorkerError(RuntimeError):
    """A worker process of EnvWorkers died or failed."""


class EnvWorkers:
    """--env-workers K: the training envs split over K worker processes, each stepping its share as a
    SyncVectorEnv would (SAME_STEP autoreset), env i seeded seed + i as in one process, so the run computes the same
    numbers at any K. Actions, observations, rewards, flags and the true final observations go through shared
    memory; a pipe per worker carries the commands and the envs' states. Workers ignore SIGINT and SIGTERM (the
    run's process decides when to stop and closes them, at the latest at its exit), and end if the run's process
    is killed (their pipe closes). The interface is
    the part of a vector env the scripts use: reset, step, close, num_envs, single_*_space."""

    def __init__(self, env_id, dt, time_limit, num_envs, seed, workers):
        probe = make_env(env_id, dt, time_limit)
        self.num_envs, self.single_observation_space = num_envs, probe.observation_space
        self.single_action_space = probe.action_space
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no fork of torch's threads
        observation, action = probe.observation_space, probe.action_space
        layout = {"obs": (observation.shape, observation.dtype), "final_obs": (observation.shape, observation.dtype),
                  "has_final_obs": ((), np.bool_), "reward": ((), np.float64), "terminated": ((), np.bool_),
                  "truncated": ((), np.bool_), "action": (action.shape, action.dtype)}  # fmt: skip
        self.memory = {name: context.RawArray("b", max(1, num_envs * math.prod(shape) * np.dtype(dtype).itemsize))
                       for name, (shape, dtype) in layout.items()}  # fmt: skip
        self.arrays = {name: shared_array(self.memory[name], num_envs, *layout[name]) for name in layout}
        self.shares = np.array_split(np.arange(num_envs), workers)
        self.connections, self.processes = [], []
        for share in self.shares:
            here, there = context.Pipe()
            envs = (env_id, dt, time_limit, seed, int(share[0]), int(share[-1]) + 1)  # env_id ... the share's range
            process = context.Process(
                target=env_worker, args=(there, self.memory, layout, num_envs, *envs), daemon=True
            )
            process.start()
            there.close()  # the worker's end: this process keeps its own, whose closing the worker sees
            self.connections.append(here)
            self.processes.append(process)
        atexit.register(self.close)  # before multiprocessing's own exit handler, which would wait on them forever
        try:
            self._ask_all("ready", None)  # each has made its envs
        except EnvWorkerError as error:
            self.close()
            sys.exit(f"error: {error}")

    def _ask_all(self, command, data_per_worker):
        for index, connection in enumerate(self.connections):
            try:
                connection.send((command, None if data_per_worker is None else data_per_worker[index]))
            except OSError:  # its end of the pipe closed: it died
                raise self._died(index) from None
        return [self._answer(index) for index in range(len(self.connections))]

    def _answer(self, index):
        connection, process = self.connections[index], self.processes[index]
        while not connection.poll(1.0):
            if not process.is_alive():
                raise self._died(index)
        try:
            status, answer = connection.recv()
        except (EOFError, OSError):  # its end of the pipe closed: it died while answering
            raise self._died(index) from None
        if status == "error":
            raise EnvWorkerError(f"env worker {index} failed:\n{answer}")
        return answer

    def _died(self, index):
        process = self.processes[index]
        process.join(1)
        return EnvWorkerError(f"env worker {index} (pid {process.pid}) died (exit code {process.exitcode}): the run "
                              "stops; go on from its last checkpoint with --resume")  # fmt: skip

    def reset(self, seed=None):
        self._ask_all("reset", [None if seed is None else seed + int(share[0]) for share in self.shares])
        return self.arrays["obs"].copy(), {}

    def step(self, actions):
        if actions.dtype != self.arrays["action"].dtype:  # SyncVectorEnv hands the envs the array as it is
            raise TypeError(f"env workers take {self.arrays['action'].dtype} actions (the action space's), got "
                            f"{actions.dtype}: a cast would hand the envs other inputs than one process")  # fmt: skip
        self.arrays["action"][:] = actions
        self._ask_all("step", None)
        infos = {}
        if self.arrays["has_final_obs"].any():
            infos = {"final_obs": self.arrays["final_obs"].copy(), "_final_obs": self.arrays["has_final_obs"].copy()}
        return (self.arrays["obs"].copy(), self.arrays["reward"].copy(), self.arrays["terminated"].copy(),
                self.arrays["truncated"].copy(), infos)  # fmt: skip

    def env_states(self):
        # The states travel pickled as bytes: a tensor sent as it is would be moved to shared memory, a file
        # descriptor for each, hundreds for 256 MuJoCo envs.
        return [state for states in self._ask_all("get_states", None) for state in pickle.loads(states)]

    def restore(self, states, obs):
        self.arrays["obs"][:] = obs  # rows of envs whose simulator cannot be restored become new episodes' first
        self._ask_all("set_states", [pickle.dumps([states[i] for i in share]) for share in self.shares])
        return self.arrays["obs"].copy()

    def close(self):
        """Stop the workers: each ends its envs and returns; one that does not within 5 s is killed."""
        for connection, process in zip(self.connections, self.processes, strict=True):
            if process.is_alive():
                try:
                    connection.send(("close", None))
                except OSError:  # its pipe already closed
                    pass
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()


def shared_array(memory, num_envs, shape, dtype):
    """A NumPy view of shared memory: one row per env."""
    return np.frombuffer(memory, dtype=dtype, count=num_envs * math.prod(shape)).reshape(num_envs, *shape)


def env_worker(connection, memory, layout, num_envs, env_id, dt, time_limit, seed, start, stop):
    """A worker of EnvWorkers: envs start..stop - 1, answering its run's commands until told to close or until the
    run's process is gone. It steps them as SyncVectorEnv does with SAME_STEP autoreset (an env whose episode
    ended is reset at once, its last observation kept apart), without merging their infos, which the training
    loop does not read: a sixth of SyncVectorEnv's time on 256 HalfCheetahs."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C and SIGTERM are for the run's process, which closes us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rows = {name: shared_array(memory[name], num_envs, *layout[name])[start:stop] for name in layout}
    envs = [make_env(env_id, dt, time_limit, seed + i) for i in range(start, stop)]
    while True:
        try:
            command, data = connection.recv()
        except (EOFError, OSError):  # the run's process ended without closing us
            return
        try:
            answer = None
            if command == "step":
                for index, env in enumerate(envs):
                    obs, rows["reward"][index], terminated, truncated, _ = env.step(rows["action"][index])
                    rows["terminated"][index], rows["truncated"][index] = terminated, truncated
                    rows["has_final_obs"][index] = terminated or truncated
                    if terminated or truncated:
                        rows["final_obs"][index] = obs
                        obs, _ = env.reset()
                    rows["obs"][index] = obs
            elif command == "reset":
                for index, env in enumerate(envs):  # env i seeded seed + i, as SyncVectorEnv.reset(seed=seed) does
                    rows["obs"][index] = env.reset(seed=None if data is None else data + index)[0]
            elif command == "get_states":
                answer = pickle.dumps([env_state(env) for env in envs])  # bytes: see EnvWorkers.env_states
            elif command == "set_states":
                for index, (env, state) in enumerate(zip(envs, pickle.loads(data), strict=True)):
                    if not set_env_state(env, state):
                        rows["obs"][index] = env.reset()[0]
            elif command == "close":
                for env in envs:
                    env.close()
                connection.send(("ok", None))
                return
            connection.send(("ok", answer))
        except Exception:
            connection.send(("error", traceback.format_exc()))
