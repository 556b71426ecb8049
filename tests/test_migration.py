"""Runs that describe themselves (issue 86 §1): run.json records its resolved arguments, identity, label and schema
version when it is written, so that reading runs (analysis/, harness/archive.py) imports no training script and
makes no env; the kept runs were migrated once (sweeps/migrate_runs.py), and read as they did before."""

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, TINY, run_script

from analysis.scores import read_curve, run_score
from harness import archive
from harness.run_info import SCHEMA
from sweeps.migrate_runs import CHANGED_DEFAULTS, described, migrate
from sweeps.print_args import resolve

BEFORE = ROOT / "tests" / "data" / "kept_runs_before.json"  # every kept run as the code before the migration read it


def test_reading_runs_imports_no_script_and_makes_no_env():
    """Reading docs/results (analysis.scores.load_runs) leaves no training script, no env (Gymnasium, MuJoCo,
    dt_wrappers), no harness part of a run (its arguments, settings) and no torch in sys.modules."""
    code = (
        "import sys\n"
        "from analysis.scores import load_runs\n"
        "runs = load_runs('docs/results')\n"
        "assert len(runs) >= 5, sorted(runs)\n"
        "names = ('dt_wrappers', 'gymnasium', 'mujoco', 'torch', 'tyro', 'harness.args', 'harness.settings',\n"
        "         'harness.run', 'dau_continuous', 'dau_discrete', 'dau_discrete_research', 'ddpg_baseline',\n"
        "         'dqn_baseline', 'dau_continuous_horizon')\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in names or name in names))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout[:2000]


def test_every_kept_run_reads_as_before_the_migration():
    """Every kept run (the snapshot made with the code before the migration, tests/data/kept_runs_before.json) is
    still there, records the schema, and reads with the same label, grid point and score; a run kept since records
    the schema too (read_run refuses one that does not)."""
    before = json.loads(BEFORE.read_text())["runs"]
    found = {str(path.parent.relative_to(ROOT)) for root in ("docs/results", "docs/gpu")
             for path in (ROOT / root).rglob("run.json")}  # fmt: skip
    assert set(before) <= found, sorted(set(before) - found)[:3]
    for folder in found - set(before):
        assert archive.read_run(ROOT / folder / "run.json")["schema"] == archive.SCHEMA, folder
    for folder, wanted in before.items():
        run = archive.read_run(ROOT / folder / "run.json")
        assert run["schema"] == archive.SCHEMA, folder
        assert (archive.label(run), archive.identity(run)) == (run["label"], run["identity"]), folder
        assert run["identity"] == wanted["identity"], folder
        if run["script"] in CHANGED_DEFAULTS:  # labelled again since: today's label, which differs by that default only
            assert run["label"] == described(run)["label"], folder
            changed = set(run["label"].split("+")) ^ set(wanted["label"].split("+"))
            assert all(part.startswith(CHANGED_DEFAULTS[run["script"]][0] + "=") for part in changed), (folder, changed)
        else:
            assert run["label"] == wanted["label"], folder
        if "score" in wanted:
            assert np.isclose(run_score(read_curve(ROOT / folder, run)), wanted["score"], rtol=0, atol=1e-9), folder


# Command lines whose labels the kept runs have: today's scripts label a new run as the migration labels a kept one.
COMMAND_LINES = {
    "dau_discrete.py": [["--dt", "0.01"], ["--dt", "0.001", "--round-seconds", "0.1"], ["--ou-sigma", "15"]],
    "dau_discrete_research.py": [["--value-horizon", "0.05"], ["--buffer-transitions", "1000000", "--squared-loss"]],
    "ddpg_baseline.py": [
        ["--dt", "0.005"],
        ["--scaled", "--tau", "0.9", "--policy-learning-rate", "0.1"],
        ["--scaled"],
        ["--policy-learning-rate", "0.02"],
    ],  # the two variants' actor defaults
    "dau_continuous.py": [["--env-id", "HalfCheetah-v4", "--dt", "0.02", "--round-seconds", "0.1"]],
}


@pytest.mark.slow  # imports the scripts and makes an env to label a run (15 s)
def test_a_kept_run_of_a_changed_default_is_labelled_again_once(tmp_path):
    """A run.json at SCHEMA written before its script's default changed (CHANGED_DEFAULTS: DDPG's unscaled actor rate,
    issue 84) gets today's label and keeps its identity; a second pass rewrites nothing; one whose identity the new
    label would not match is refused."""
    kept = ROOT / "docs/results/Pendulum-v1__ddpg_baseline__dt0.01__1__1795425061/run.json"
    run = json.loads(kept.read_text()) | {"label": "DDPG-unscaled"}  # as written before d2f9cb3
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    assert [len(paths) for paths in migrate([tmp_path])] == [1, 0]
    again = json.loads((tmp_path / "old" / "run.json").read_text())
    assert again == run | {"label": "DDPG-unscaled+policy_learning_rate=0.02"} and list(again) == list(run)
    assert [len(paths) for paths in migrate([tmp_path])] == [0, 1]
    (tmp_path / "old" / "run.json").write_text(json.dumps(run | {"identity": "0" * 16}))
    (tmp_path / "first").mkdir()  # read before the refused one: not written either
    (tmp_path / "first" / "run.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="would change its identity"):
        migrate([tmp_path])
    assert json.loads((tmp_path / "first" / "run.json").read_text())["label"] == "DDPG-unscaled"


def test_a_new_run_is_labelled_as_the_migration_labels_a_kept_one():
    """--print-args's label and identity (a run's, computed when it is written from the script's own defaults) are
    those the migration computes from the same arguments with the tables of the read path before it."""
    for script, argvs in COMMAND_LINES.items():
        for argv, printed in zip(argvs, resolve(script, argvs), strict=True):
            run = {"script": script, "args": printed["args"]}
            assert {key: printed[key] for key in ("identity", "label", "algorithm")} == {
                key: described(run)[key] for key in ("identity", "label", "algorithm")
            }, (script, argv)


def test_a_run_records_what_print_args_prints(workdir):
    """A run's run.json records the arguments, identity and label that --print-args printed for its command line,
    and the schema."""
    argv = [*TINY, "--dt", "0.01", "--total-time", "2", "--ou-sigma", "15"]
    printed = json.loads(run_script("dau_discrete.py", *argv, "--print-args", cwd=workdir).stdout.splitlines()[-1])
    assert not (workdir / "runs").exists() or not any((workdir / "runs").iterdir())  # no run
    run_script("dau_discrete.py", *argv, cwd=workdir)
    (path,) = (workdir / "runs").glob("*/run.json")
    run = json.loads(path.read_text())
    assert run["schema"] == SCHEMA and "ou_sigma=15" in run["label"].split("+") and not run["args"]["print_args"]
    assert {key: run[key] for key in ("args", "identity", "label", "algorithm")} == {
        key: printed[key] for key in ("args", "identity", "label", "algorithm")
    }
