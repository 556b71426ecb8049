"""--capture-video: evaluation episodes recorded at real speed at any dt (`PhysicalTimeVideo`), at evaluations 0, 1,
4, 16, ... and at the end of a run (`EvaluationVideos`), in a separate env so that the evaluation envs' episodes
stay as they are."""

import math
import os

import mujoco
from gymnasium.envs.mujoco import MujocoEnv
from gymnasium.wrappers import RecordVideo

from dt_wrappers import make_env

VIDEO_EVALUATIONS = {0} | {4**k for k in range(32)}


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


class EvaluationVideos:
    """--capture-video: one episode of the deterministic policy, recorded at evaluations 0, 1, 4, 16, 64...
    and at the end, into `folder` (`fps` frames per physical second)."""

    def __init__(self, env_id, dt, time_limit, folder, seed=None, fps=30):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (classic control, Box2D) renders off screen
        if "DISPLAY" not in os.environ:  # headless: MuJoCo renders through EGL (read when its renderer is made)
            os.environ.setdefault("MUJOCO_GL", "egl")
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
