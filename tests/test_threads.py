"""torch's thread count (harness/threads.py): one, whatever the load, unless OMP_NUM_THREADS or MKL_NUM_THREADS is
set (then theirs, with a line saying that a count other than 1 gives other numbers than the kept runs); a resumed run
keeps its checkpoint's; and the same command and seed give the same evaluations on idle cores and on busy ones."""

import json
import os
import subprocess
import sys

import psutil
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


@pytest.mark.parametrize("load", [0.0, 50.0, 100.0])
def test_a_run_takes_one_thread_whatever_the_load(two_cores, monkeypatch, load):
    """Idle cores, half-busy ones or busy ones (the load psutil would read): one thread and no line. On idle cores the
    run took two, and one on busy cores: the same command gave other numbers with the load (issue 86)."""
    monkeypatch.setattr(psutil, "cpu_percent", lambda *args, **kwargs: [load] * 2)
    assert harness.threads.choose_threads() is None
    assert two_cores.threads == 1


@pytest.mark.parametrize("name", harness.threads.SET_BY)
def test_a_count_the_user_sets_is_kept_and_one_other_than_1_is_said(two_cores, monkeypatch, name):
    """OMP_NUM_THREADS or MKL_NUM_THREADS: the count torch read from it, kept; one line where it is not 1, saying that
    it gives other numbers than the kept runs; none where it is 1."""
    monkeypatch.setenv(name, "2")
    note = harness.threads.choose_threads()
    assert two_cores.threads == 2 and name in note and "other numbers" in note and "kept runs" in note
    assert len(note.splitlines()) == 1
    two_cores.threads = 1
    monkeypatch.setenv(name, "1")
    assert harness.threads.choose_threads() is None and two_cores.threads == 1


def test_a_resumed_run_keeps_its_checkpoints_count(two_cores):
    """The count its checkpoint records, said in a line where it is not 1; a checkpoint from before the record:
    torch's own count, as then."""
    note = harness.threads.choose_threads(resuming=True, resumed_threads=2)
    assert two_cores.threads == 2 and note.startswith("torch threads: 2") and "other numbers" in note
    assert harness.threads.choose_threads(resuming=True, resumed_threads=1) is None
    assert two_cores.threads == 1
    two_cores.threads = 2
    harness.threads.choose_threads(resuming=True, resumed_threads=None)
    assert two_cores.threads == 2  # a checkpoint from before the record: torch's count, as then


def test_the_checkpoint_records_the_count():
    checkpoint = {"run_name": "r", "device": "cpu", "wandb_id": None, "args": {}, "counters": {},
                  "evals_csv_bytes": 0, "diagnostics_csv_bytes": 0}  # fmt: skip
    assert Resumed(checkpoint).torch_threads is None
    assert Resumed(checkpoint | {"torch_threads": 3}).torch_threads == 3


@pytest.mark.slow
def test_the_same_command_and_seed_give_the_same_evaluations_on_idle_and_busy_cores(tmp_path):
    """The same command, without OMP_NUM_THREADS, started once as it comes and once with a busy process on every core:
    one thread in both (run.json), no line about threads, and the same evals.csv. The count followed the load at the
    start (two threads on idle cores, one on busy ones), and the evaluations with it (issue 86)."""
    command = [sys.executable, str(ROOT / "dau_discrete.py"), *TINY, "--dt", "0.01", "--total-time", "3"]
    environment = {name: value for name, value in os.environ.items() if name not in harness.threads.SET_BY}
    outputs = {}
    for name in ("as-it-comes", "busy"):
        (tmp_path / name).mkdir()
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
        if name == "as-it-comes":
            for process in busy:
                process.kill()
                process.wait()
        try:
            outputs[name] = subprocess.run(command, cwd=tmp_path / name, env=environment, capture_output=True,
                                           text=True, timeout=600, check=True).stdout  # fmt: skip
        finally:
            for process in busy:
                process.kill()
                process.wait()
    runs = {name: next((tmp_path / name / "runs").glob("*__*")) for name in outputs}
    for name, run_dir in runs.items():
        assert json.loads((run_dir / "run.json").read_text())["machine"]["torch_threads"] == 1, name
        assert "torch threads" not in outputs[name]

    def returns(run_dir):
        return [row["scaled_return"] for row in read_csv(run_dir / "evals.csv")]

    assert returns(runs["as-it-comes"]) == returns(runs["busy"]) and len(returns(runs["busy"])) >= 3
