import os

import pytest
import torch

# Headless MuJoCo rendering through EGL (no display on CI).
os.environ.setdefault("MUJOCO_GL", "egl")
# Tests never reach W&B's servers.
os.environ.setdefault("WANDB_MODE", "offline")


@pytest.fixture
def float64():
    """Exact comparisons: TD errors are divided by dt, so float32 rounding would dominate."""
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)
