"""Runs that describe themselves (issue 86 §1): run.json records its resolved arguments, identity, label and schema
version when it is written, so that reading runs (analysis/, harness/archive.py) imports no training script and
makes no env; the kept runs were migrated once (sweeps/migrate_runs.py), and read as they did before."""

import json
import subprocess
import sys

import numpy as np
from helpers import ROOT

from analysis.scores import read_curve, run_score
from harness import archive

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
    still there, records the schema, and reads with the same label, grid point and score."""
    before = json.loads(BEFORE.read_text())["runs"]
    found = {str(path.parent.relative_to(ROOT)) for root in ("docs/results", "docs/gpu")
             for path in (ROOT / root).rglob("run.json")}  # fmt: skip
    assert found == set(before)
    for folder, wanted in before.items():
        run = archive.read_run(ROOT / folder / "run.json")
        assert run["schema"] == archive.SCHEMA, folder
        assert (run["label"], run["identity"]) == (wanted["label"], wanted["identity"]), folder
        assert (archive.label(run), archive.identity(run)) == (wanted["label"], wanted["identity"]), folder
        if "score" in wanted:
            assert np.isclose(run_score(read_curve(ROOT / folder, run)), wanted["score"], rtol=0, atol=1e-9), folder
