"""Helpers shared by the test files: running the scripts, reading their output, exact gradients."""

import csv
import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--num-envs", "4", "--num-eval-envs", "2", "--updates-per-round", "2", "--batch-size", "16",
        "--time-limit", "0.5", "--eval-every", "1"]  # fmt: skip


def with_ctrl_c():
    """Popen's preexec_fn for the Ctrl-C tests: the child gets SIGINT's default action, as from a terminal.
    A shell without job control starts background jobs with SIGINT ignored, and a child inherits that, so
    pytest run from such a job would otherwise test a process that cannot be interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_script(script, *args, cwd, env=None, check=True, timeout=300):
    result = subprocess.run(
        [sys.executable, str(ROOT / script), *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )  # fmt: skip
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def start_and_signal(script, *args, cwd, signum, rows=3, env=None):
    """Start a run, send `signum` once its evals.csv has `rows` lines (the header included), wait for it."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / script), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        files = glob.glob(str(cwd / "runs" / "*" / "evals.csv"))
        if files and len(open(files[0]).read().splitlines()) >= rows:
            break
        time.sleep(0.01)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    return process.returncode, stdout, stderr


def read_csv(path):
    with open(path) as file:
        return list(csv.DictReader(file))


def read_evals(cwd):
    (evals,) = Path(cwd).glob("runs/*/evals.csv")
    return read_csv(evals)


def assert_batch_stats(module, stats, tds, terminated):
    """update()'s returned TRAINING_STATS for a batch whose TD errors Q - Q~ are `tds`: the TD loss mean(td^2),
    its terminal transitions' part mean(d td^2), and their share mean(d), as diagnostics.csv logs them."""
    named, tds = dict(zip(module.TRAINING_STATS, stats.tolist(), strict=True)), torch.tensor(tds)
    torch.testing.assert_close(named["losses/td"], (tds**2).mean().item(), rtol=1e-9, atol=0)
    torch.testing.assert_close(named["losses/td_terminal"], (terminated * tds**2).mean().item(), rtol=1e-9, atol=0)
    assert named["batch/terminal_share"] == terminated.mean().item() > 0


def fixed_batch(obs_dim=3, action_dim=2, n=8, seed=0, num_actions=None):
    """A replay batch (obs, action, reward, terminated, next_obs); every third transition terminated.
    Actions in [-1, 1]^action_dim, or indices (n, 1) when num_actions is given."""
    generator = torch.Generator().manual_seed(seed)
    obs, next_obs = torch.randn(n, obs_dim, generator=generator), torch.randn(n, obs_dim, generator=generator)
    if num_actions is None:
        action = torch.rand(n, action_dim, generator=generator) * 2 - 1
    else:
        action = torch.randint(num_actions, (n, 1), generator=generator)
    reward = torch.randn(n, generator=generator)
    terminated = (torch.arange(n) % 3 == 0).to(torch.get_default_dtype())
    return [obs, action, reward, terminated, next_obs]


def per_sample_gradient(output, parameters):
    return torch.cat([g.flatten() for g in torch.autograd.grad(output, parameters)])


def flat(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])
