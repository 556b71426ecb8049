"""Helpers shared by the test files: running the scripts, reading their output, exact gradients."""

import atexit
import csv
import functools
import glob
import json
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import torch

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--num-envs", "4", "--num-eval-envs", "2", "--updates-per-round", "2", "--batch-size", "16",
        "--time-limit", "0.5", "--eval-every", "1"]  # fmt: skip


# A grid of two short DQN runs for the sweep executor (sweeps/run_local.py), as a sweep file.
TINY_SWEEP = """
program: dqn_baseline.py
method: grid
command:
  - ${env}
  - ${interpreter}
  - ${program}
  - ${args_no_boolean_flags}
parameters:
  env_id: {value: CartPole-v1}
  dt: {values: [0.02, 0.01]}
  seed: {value: 4}
  total_time: {value: 0.8}
  num_envs: {value: 4}
  num_eval_envs: {value: 2}
  updates_per_round: {value: 2}
  batch_size: {value: 16}
  time_limit: {value: 0.5}
"""


def executor(*args, cwd, env=None, timeout=600):
    """sweeps/run_local.py with these arguments, in `cwd` (a repository-like folder: conftest's workdir)."""
    return subprocess.run(
        [sys.executable, "-m", "sweeps.run_local", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )  # fmt: skip


def with_ctrl_c():
    """Popen's preexec_fn for the Ctrl-C tests: the child gets SIGINT's default action, as from a terminal.
    A shell without job control starts background jobs with SIGINT ignored, and a child inherits that, so
    pytest run from such a job would otherwise test a process that cannot be interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Starting a script costs a fresh interpreter about 3 CPU seconds before its first line: 1.7 in `import torch` and 1.3
# in the torch._inductor that the scripts' torch.use_deterministic_algorithms imports. The suite starts a few hundred,
# which was a third of its time on CI's two cores. So run_script and start_and_signal fork each script from a server
# that has imported these two and nothing else, and run it there as `python script.py args` would: argv, sys.path,
# cwd, environment, __main__, the same exit status and output, the interpreter's shutdown, and torch's and NumPy's
# global generators seeded from the OS as in a fresh interpreter (not the string hashes' seed: the server's, shared). A
# command whose environment changes what these imports read (OMP_NUM_THREADS, ...) gets a fresh interpreter instead,
# as does every command the sweep tools start.
LAUNCHER = multiprocessing.get_context("forkserver")
LAUNCHER.set_forkserver_preload(["torch", "torch._inductor"])
# "TORCH": TORCH_*, TORCHINDUCTOR_* and TORCHDYNAMO_*; with INDUCTOR_*, AOT_INDUCTOR_*, TRITON_* and CXX, what
# torch._inductor's and torch._dynamo's settings read as they load.
READ_AT_IMPORT = ("OMP_", "GOMP_", "KMP_", "MKL_", "TORCH", "PYTORCH_", "CUDA_", "CUBLAS_", "PYTHON", "INDUCTOR_",
                  "AOT_INDUCTOR_", "TRITON_", "CXX")  # fmt: skip


@functools.cache
def _fresh_interpreter_path():
    """sys.path after the script's folder in a fresh interpreter (pytest's has more), read once per worker."""
    probe = "import json, sys; print(json.dumps(sys.path[1:]))"
    return json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)


_server_env = {}  # the environment the server imported torch under: the worker's, when it started the first script


def _forkable(env):
    """Whether a script with environment `env` may start from the server."""
    if not _server_env:
        _server_env.update(os.environ)
    names = {name for name in {*env, *_server_env} if name.startswith(READ_AT_IMPORT)}
    return all(env.get(name) == _server_env.get(name) for name in names)


def _run_as_main(script, args, cwd, env, path, stdout, stderr, ctrl_c):
    """In the forked process: become `python script args` in cwd with env, writing to the files stdout and stderr
    (with Python's Ctrl-C handler if `ctrl_c`, as with_ctrl_c gives a fresh interpreter)."""
    for stream, name in ((1, stdout), (2, stderr)):
        file = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(file, stream)
        os.close(file)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv, sys.path[:] = [script, *args], [str(Path(script).parent), *path]
    if ctrl_c:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Otherwise every script would draw the server's numbers. (`random` reseeds itself after a fork; the GPUs'
    # generators, which the server never started, start in the script as in a fresh interpreter.)
    torch.default_generator.seed()
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:  # what the interpreter does at exit, which a process of multiprocessing skips: wait, then atexit
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()


class ScriptProcess:
    """`python script args` started from the server, or as a fresh interpreter (see above); Popen's few methods
    that the tests use, the output read back once it has ended. `ctrl_c`: the script takes SIGINT as from a terminal,
    also where the suite runs with SIGINT ignored (a background job, whose children inherit that)."""

    def __init__(self, script, *args, cwd, env=None, ctrl_c=False):
        env, script = {**os.environ, **(env or {})}, str(ROOT / script)
        self.outputs = tempfile.TemporaryDirectory()
        self.files = [os.path.join(self.outputs.name, name) for name in ("stdout", "stderr")]
        if _forkable(env):
            path = _fresh_interpreter_path()
            self.process = LAUNCHER.Process(target=_run_as_main,
                                            args=(script, args, str(cwd), env, path, *self.files, ctrl_c))  # fmt: skip
            self.process.start()
        else:
            with open(self.files[0], "w") as stdout, open(self.files[1], "w") as stderr:
                self.process = subprocess.Popen([sys.executable, script, *args], cwd=cwd, env=env, stdout=stdout,
                                                stderr=stderr, preexec_fn=with_ctrl_c if ctrl_c else None)  # fmt: skip
        self.pid = self.process.pid

    def poll(self):
        if isinstance(self.process, subprocess.Popen):
            return self.process.poll()
        return self.process.exitcode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def communicate(self, timeout=None):
        """Wait for the end (killing the process after `timeout` seconds: subprocess.TimeoutExpired), then
        (returncode, stdout, stderr)."""
        if isinstance(self.process, subprocess.Popen):
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()  # reaped, as on the forked path
                raise
        else:
            self.process.join(timeout)
            if self.process.exitcode is None:
                self.process.kill()
                self.process.join()
                raise subprocess.TimeoutExpired(self.files, timeout)
        stdout, stderr = (Path(name).read_text() for name in self.files)
        self.outputs.cleanup()
        return self.poll(), stdout, stderr


# A probe: `script` run as `python script args` would, with `profile` (defined in a body) seeing every function call
# and return in every thread, and the body's `records` written as JSON to `output` at the end. A body is a format
# string: {script!r} is the script's path, other fields are the caller's (braces doubled). The root goes on sys.path:
# the probe is in another folder, and the suite runs where the packages are not installed (CI).
PROFILED = """
import json, runpy, sys, threading, time
sys.path.insert(0, {root!r})
{body}
sys.argv[0] = {script!r}
threading.setprofile(profile)
sys.setprofile(profile)
try:
    runpy.run_path({script!r}, run_name="__main__")
finally:
    sys.setprofile(None)
    with open({output!r}, "w") as file:
        json.dump(records, file)
"""


def profiled_script(folder, script, body, output, **fields):
    """Write PROFILED for `script` with `body` in `folder` (made if missing); returns the probe's path, to run with
    run_script or ScriptProcess from `folder`, where `output` appears."""
    folder.mkdir(parents=True, exist_ok=True)
    path = str(ROOT / script)
    probe = folder / f"profiled_{Path(script).stem}.py"
    probe.write_text(PROFILED.format(root=str(ROOT), script=path, output=output,
                                     body=body.format(script=path, **fields)))  # fmt: skip
    return probe


def run_script(script, *args, cwd, env=None, check=True, timeout=300, ctrl_c=False):
    returncode, stdout, stderr = ScriptProcess(script, *args, cwd=cwd, env=env, ctrl_c=ctrl_c).communicate(timeout)
    if check:
        assert returncode == 0, stderr[-3000:]
    return subprocess.CompletedProcess([script, *args], returncode, stdout, stderr)


def start_and_signal(script, *args, cwd, signum, rows=3, env=None):
    """Start a run, send `signum` once its evals.csv has `rows` lines (the header included), wait for it."""
    process = ScriptProcess(script, *args, cwd=cwd, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        files = glob.glob(str(cwd / "runs" / "*" / "evals.csv"))
        if files and len(open(files[0]).read().splitlines()) >= rows:
            break
        time.sleep(0.01)
    process.send_signal(signum)
    return process.communicate(timeout=120)


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


def discrete_td(value, advantage, transition, dt, gamma):
    """One transition's TD error of Alg. 1 (discrete DAU), Q - Q~ with Q = V(s) + dt A(s, a), and A(s, a) itself
    (a graph, for its per-sample gradient), on the discrete scripts' networks."""
    obs, action, reward, terminated, next_obs = transition
    with torch.no_grad():
        target = reward * dt + (1 - terminated) * gamma**dt * value(next_obs[None])
    advantages = advantage(obs[None])[0]
    advantage_taken = advantages[action.item()] - advantages.max()
    return (value(obs[None]) + dt * advantage_taken - target).item(), advantage_taken


def per_sample_gradient(output, parameters):
    return torch.cat([g.flatten() for g in torch.autograd.grad(output, parameters)])


def flat(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def read_wandb_run(folder):
    """What an offline W&B run (wandb/offline-run-*/) recorded, read back from its transaction log: the history
    rows (dicts of the logged values), the metric definitions, the config and whether it was marked preempting.
    The log is LevelDB's record format (32 KiB blocks; 7-byte chunk headers: checksum, length, type full / first /
    middle / last) after a 7-byte W&B header, each record a wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2

    (path,) = Path(folder).glob("run-*.wandb")
    data, position, pending, records = path.read_bytes(), 7, b"", []
    while position + 7 <= len(data):
        left_in_block = 32768 - position % 32768
        length, kind = int.from_bytes(data[position + 4 : position + 6], "little"), data[position + 6]
        if left_in_block < 7 or (length == 0 and kind == 0):  # a block's padding
            position += left_in_block
            continue
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or its last chunk
            records.append(wandb_internal_pb2.Record.FromString(pending))
            pending = b""
    history, metrics, config, preempting = [], [], {}, False
    for record in records:
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})  # fmt: skip
        elif kind == "metric":
            metrics.append(record.metric)
        elif kind == "run":
            config |= {item.key: json.loads(item.value_json) for item in record.run.config.update}
        elif kind == "preempting":
            preempting = True
    return SimpleNamespace(history=history, metrics=metrics, config=config, preempting=preempting)


def described_point(sweep, point):
    """run.json's "args" and what describe_run adds (schema, identity, algorithm, label) for a grid point's run, as
    its script prints them with --print-args (sweeps.grid_runs.resolved)."""
    from sweeps.grid_runs import resolved

    printed = resolved(sweep, point)
    return {"args": printed["args"], **{key: printed[key] for key in ("schema", "identity", "algorithm", "label")}}
