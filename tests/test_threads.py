"""torch's thread count (harness/threads.py): one per core that other processes leave idle at the start, unless
OMP_NUM_THREADS is set; a resumed run keeps its own; and a count chosen so computes what OMP_NUM_THREADS=N does."""

import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT, TINY, read_csv

import harness.threads
from harness.checkpoint import Resumed


class FakeTorch:
    """torch's two thread calls, on a machine of `cores` cores."""

    def __init__(self, cores):
        self.threads = cores

    def get_num_threads(self):
        return self.threads

    def set_num_threads(self, threads):
        self.threads = threads


@pytest.fixture
def two_cores(monkeypatch):
    fake = FakeTorch(2)
    monkeypatch.setattr(harness.threads, "torch", fake)
    for name in harness.threads.SET_BY:
        monkeypatch.delenv(name, raising=False)
    return fake


@pytest.mark.parametrize("idle,threads", [(2.0, 2), (1.8, 2), (1.7, 1), (1.0, 1), (0.0, 1)])
def test_the_count_is_the_cores_left_idle(two_cores, idle, threads):
    """Two cores idle: torch's two threads, untouched (no line printed); one busy, or both: one thread, and a line
    that says so and how to set it. A core counts where three quarters of it are idle."""
    note = harness.threads.choose_threads(idle=lambda: idle)
    assert two_cores.threads == threads
    assert (note is None) == (threads == 2)
    if note:
        assert note.startswith("torch threads: 1 of 2") and "OMP_NUM_THREADS" in note


def test_a_count_the_user_sets_and_a_resumed_runs_count_are_kept(two_cores, monkeypatch):
    busy = lambda: 0.0  # noqa: E731
    assert harness.threads.choose_threads(resuming=True, resumed_threads=2, idle=busy) is None
    assert two_cores.threads == 2  # the count the run started with, whatever the load now
    harness.threads.choose_threads(resuming=True, resumed_threads=None, idle=busy)
    assert two_cores.threads == 2  # a checkpoint from before the record: torch's count, as then
    two_cores.threads = 2
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert harness.threads.choose_threads(idle=busy) is None and two_cores.threads == 2


def test_the_checkpoint_records_the_count():
    checkpoint = {"run_name": "r", "device": "cpu", "wandb_id": None, "args": {}, "counters": {},
                  "evals_csv_bytes": 0, "diagnostics_csv_bytes": 0}  # fmt: skip
    assert Resumed(checkpoint).torch_threads is None
    assert Resumed(checkpoint | {"torch_threads": 3}).torch_threads == 3


def test_idle_cores_sees_busy_processes():
    """psutil's per-core load over the window: with a busy process on every core, less than one core idle."""
    cores = len(os.sched_getaffinity(0))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        assert harness.threads.idle_cores(window=0.5) < 0.75
    finally:
        for process in busy:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_on_busy_cores_a_run_takes_one_thread_and_computes_what_omp_num_threads_1_does(tmp_path):
    """A run started with every core busy and no OMP_NUM_THREADS: one thread (run.json), the line saying so, and
    the evaluations of OMP_NUM_THREADS=1's run of the same command (where the cores are only 2: with more idle
    cores the count would be their number)."""
    command = [sys.executable, str(ROOT / "dau_discrete.py"), *TINY, "--dt", "0.01", "--total-time", "3"]
    environment = {name: value for name, value in os.environ.items() if name not in harness.threads.SET_BY}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
    try:
        (tmp_path / "chosen").mkdir()
        chosen = subprocess.run(command, cwd=tmp_path / "chosen", env=environment, capture_output=True, text=True,
                                timeout=600, check=True)  # fmt: skip
    finally:
        for process in busy:
            process.kill()
            process.wait()
    (tmp_path / "set").mkdir()
    subprocess.run(command, cwd=tmp_path / "set", env=environment | {"OMP_NUM_THREADS": "1"}, check=True, timeout=600)
    (chosen_dir,) = (tmp_path / "chosen" / "runs").glob("*__*")
    (set_dir,) = (tmp_path / "set" / "runs").glob("*__*")
    assert json.loads((chosen_dir / "run.json").read_text())["machine"]["torch_threads"] == 1
    assert "torch threads: 1 of" in chosen.stdout or len(os.sched_getaffinity(0)) == 1

    def returns(run_dir):
        return [row["scaled_return"] for row in read_csv(run_dir / "evals.csv")]

    assert returns(chosen_dir) == returns(set_dir) and len(returns(set_dir)) >= 3
