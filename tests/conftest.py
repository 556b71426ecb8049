import os

# The scripts train on a GPU whenever torch sees one. The suite tests the CPU unless DAU_TEST_DEVICE=cuda
# (docs/common.md, "On a GPU"): hidden here, the GPU is hidden from every script a test starts too.
if os.environ.get("DAU_TEST_DEVICE", "cpu") != "cuda":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # as the scripts set it: deterministic cuBLAS

import pytest  # noqa: E402
import torch  # noqa: E402
from helpers import ROOT  # noqa: E402

# Headless MuJoCo rendering through EGL (no display on CI).
os.environ.setdefault("MUJOCO_GL", "egl")
# Tests never reach W&B's servers.
os.environ.setdefault("WANDB_MODE", "offline")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `-n 2` (pyproject.toml): two workers share the two cores, so each, and every script it starts, runs
    # one torch thread (two threads stall when the other core is busy).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)


def pytest_collection_modifyitems(items):
    """The full tier's tests (`slow`: the minutes-long learning tests among them) first, so that the short ones fill
    the other worker meanwhile instead of a long test starting last and running alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def float64():
    """Exact comparisons: TD errors are divided by dt, so float32 rounding would dominate."""
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


@pytest.fixture
def workdir(tmp_path):
    """A repository-like working directory (the sweep files name their programs relative to it)."""
    for path in [*ROOT.glob("*.py"), ROOT / "harness", ROOT / "sweeps", ROOT / "analysis"]:
        (tmp_path / path.name).symlink_to(path)
    return tmp_path
