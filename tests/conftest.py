import os

# Headless MuJoCo rendering through EGL (no display on CI).
os.environ.setdefault("MUJOCO_GL", "egl")
# Tests never reach W&B's servers.
os.environ.setdefault("WANDB_MODE", "offline")
