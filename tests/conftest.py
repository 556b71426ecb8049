import os

# The scripts train on a GPU whenever torch sees one. The suite tests the CPU unless DAU_TEST_DEVICE=cuda
# (docs/common.md, "On a GPU"): hidden here, the GPU is hidden from every script a test starts too.
if os.environ.get("DAU_TEST_DEVICE", "cpu") != "cuda":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # as the scripts set it: deterministic cuBLAS

import pytest  # noqa: E402
import torch  # noqa: E402
from helpers import READ_AT_IMPORT, ROOT  # noqa: E402

# Headless MuJoCo rendering through EGL (no display on CI).
os.environ.setdefault("MUJOCO_GL", "egl")
# Tests never reach W&B's servers.
os.environ.setdefault("WANDB_MODE", "offline")
# One torch thread in every test and every script a test starts, with or without xdist: `-n 2` (pyproject.toml) has
# two workers share the two cores (two threads stall when the other core is busy), and a fixed count keeps the
# scripts from choosing theirs from the cores' load (harness/threads.py), which would make two runs of one test
# differ (a test that wants another count sets OMP_NUM_THREADS itself).
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_collection_modifyitems(items):
    """The full tier's tests (`slow`: the minutes-long learning tests among them) first, so that the short ones fill
    the other worker meanwhile instead of a long test starting last and running alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def environment_read_at_import():
    """Each test leaves the variables that the script server's imports read (helpers.READ_AT_IMPORT) as it found
    them. The server records the worker's environment at its first script, and a script whose environment differs
    there starts as a fresh interpreter (helpers._forkable); a test's in-process imports can change it for good:
    torch._dynamo, which torch.optim imports, sets TORCHINDUCTOR_CACHE_DIR as it loads. Then every later script of
    that worker started fresh, about 3 s slower each, and the fork probes of tests/test_helpers.py failed."""
    before = {name: value for name, value in os.environ.items() if name.startswith(READ_AT_IMPORT)}
    yield
    for name in [name for name in os.environ if name.startswith(READ_AT_IMPORT) and name not in before]:
        del os.environ[name]
    os.environ.update(before)


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
