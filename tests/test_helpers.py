"""The suite's own launcher (helpers.ScriptProcess): a script forked from the server that has imported torch (and
torch._inductor) runs as it would as `python script.py args` in a fresh interpreter, so that every test that starts a
script tests the script, not the launcher."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, ScriptProcess

PROBE = """
import atexit, json, os, random, sys, threading, time
import numpy as np
import torch

def at_exit():
    print("atexit ran", flush=True)

atexit.register(at_exit)
if sys.argv[1] == "wait":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
    print("waiting", flush=True)
    time.sleep(60)
if sys.argv[1] == "raise":
    raise ValueError("a probe's error")
threading.Thread(target=lambda: (time.sleep(0.3), print("thread ended", flush=True))).start()
print(json.dumps({"argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "name": __name__, "file": __file__,
                  "probe_variable": os.environ.get("PROBE_VARIABLE"), "threads": torch.get_num_threads(),
                  "torch": torch.rand(1).item(), "numpy": np.random.rand(), "random": random.random()}))
sys.exit(int(sys.argv[1]))
"""


GENERATORS = ("torch", "numpy", "random")  # each seeded from the OS in a fresh interpreter


@pytest.fixture
def probe(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    (tmp_path / "work").mkdir()
    return path


def forked(probe, *args, env=None):
    """The probe started from the server (asserted: not as a fresh interpreter): (returncode, stdout, stderr)."""
    process = ScriptProcess(probe, *args, cwd=probe.parent / "work", env=env)
    assert not isinstance(process.process, subprocess.Popen)
    return subprocess.CompletedProcess(args, *process.communicate(timeout=60))


def fresh(probe, *args, env):
    return subprocess.run([sys.executable, str(probe), *args], capture_output=True, text=True,
                          cwd=probe.parent / "work", env={**os.environ, **env})  # fmt: skip


def test_a_forked_script_runs_as_under_a_fresh_interpreter(probe):
    env = {"PROBE_VARIABLE": "set by the test"}
    outputs = []
    for result in [forked(probe, "3", env=env), forked(probe, "3", env=env), fresh(probe, "3", env=env)]:
        assert result.returncode == 3 and result.stderr == "", result.stderr
        lines = result.stdout.splitlines()
        # The interpreter's shutdown: non-daemon threads are waited for, then the atexit functions run.
        assert lines[1:] == ["thread ended", "atexit ran"], lines
        outputs.append(json.loads(lines[0]))
    for output in outputs:
        assert {k: v for k, v in output.items() if k not in GENERATORS} == {
            k: v for k, v in outputs[-1].items() if k not in GENERATORS
        }
    # Each forked script draws from a fresh RNG state, as a fresh interpreter does (not the server's, shared by all).
    assert all(outputs[0][generator] != outputs[1][generator] for generator in GENERATORS)


def test_a_forked_script_reports_errors_and_signals_as_a_fresh_interpreter_does(probe):
    raised, reference = forked(probe, "raise"), fresh(probe, "raise", env={})
    assert raised.returncode == reference.returncode == 1
    assert raised.stderr.splitlines()[-1] == reference.stderr.splitlines()[-1] == "ValueError: a probe's error"
    for signum, handled in ((signal.SIGTERM, 7), (signal.SIGKILL, -signal.SIGKILL)):
        process = ScriptProcess(probe, "wait", cwd=probe.parent / "work")
        stdout = pathlib.Path(process.files[0])
        deadline = time.time() + 60
        while time.time() < deadline and not (stdout.exists() and "waiting" in stdout.read_text()):
            time.sleep(0.01)
        process.send_signal(signum)
        returncode, stdout, _ = process.communicate(timeout=30)
        assert returncode == handled and ("atexit ran" in stdout) == (signum == signal.SIGTERM)


def test_an_environment_that_the_servers_imports_read_gets_a_fresh_interpreter(probe):
    threads = str(3 - int(os.environ.get("OMP_NUM_THREADS", "1")))  # not the server's: 2 if it has 1, else 1
    process = ScriptProcess(probe, "0", cwd=probe.parent / "work", env={"OMP_NUM_THREADS": threads})
    assert isinstance(process.process, subprocess.Popen)
    returncode, stdout, stderr = process.communicate(timeout=60)
    assert returncode == 0 and json.loads(stdout.splitlines()[0])["threads"] == int(threads), stderr
    # The server's torch._inductor read its own settings as it loaded (TORCHINDUCTOR_*, not TORCH_*).
    process = ScriptProcess(probe, "0", cwd=probe.parent / "work", env={"TORCHINDUCTOR_CACHE_DIR": str(probe.parent)})
    assert isinstance(process.process, subprocess.Popen)
    assert process.communicate(timeout=60)[0] == 0


# The order in which the quick tier failed (issue 78): in one worker, a test that builds torch.optim.SGD in-process
# (which imports torch._dynamo, which sets TORCHINDUCTOR_CACHE_DIR) after a script has started the server, then the
# fork probes, which then got fresh interpreters.
AFTER_DYNAMO = ["tests/test_analysis.py::test_the_failure_boundary_table_and_figure_from_a_runs_checkpoint",
                "tests/test_helpers.py::test_a_forked_script_runs_as_under_a_fresh_interpreter"]  # fmt: skip


@pytest.mark.slow  # a pytest of its own: 20 s, a sixth of the quick tier's time on 2 cores
def test_the_fork_probes_pass_after_a_test_that_imports_torch_dynamo_in_one_process():
    """The order that failed, in a pytest of its own in one process (-n 0): each test leaves the environment that the
    server's imports read as it found it (conftest.py), so the probe's script still starts from the server."""
    # Without this worker's xdist variables, and without a TORCHINDUCTOR_CACHE_DIR, which torch._dynamo would then
    # not change.
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "TORCHINDUCTOR_"))}
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", *AFTER_DYNAMO],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
