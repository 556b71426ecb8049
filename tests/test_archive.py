"""The runs' catalogue (harness/archive.py): a run's identity and label, every kept run recognised by the command
that made it (sweeps/run_local.py's plan), duplicates and run.json files that are not whole refused, a label at
several budgets or evaluation intervals, the code that made a run, kept runs made again."""

import json
import os
import subprocess
import sys
from unittest.mock import patch

import pytest
import torch
from helpers import ROOT, TINY_SWEEP, described_point, executor, read_csv

from analysis import scores
from harness import archive
from harness.run_info import VALUE_BEFORE, run_identity
from sweeps import grid_runs, migrate_runs, run_local

RESULTS = "docs/results"
LOCOMOTION_DTS = "dt=0.05,0.02,0.01,0.005"
RESEARCH = "cartpole_dau_research"
FIVE_SEEDS = ("total_time=1800", "eval_every=150", "seed=1,2,3,4,5")
# The kept grids and the commands docs/reproduce.md says made them: (sweep files, --override, --results folder).
# DDPG's grids made before its unscaled actor's default changed (issue 84) name the env's rate, as their README sweep
# files do (the paper's DAU has that rate by default: the same points).
OLD_ACTOR, OLD_ACTOR_002 = "policy_learning_rate=0.03", "policy_learning_rate=0.02"
KEPT_GRIDS = [
    (("pendulum_dau", "pendulum_ddpg", "cartpole_dau", "cartpole_dqn"), FIVE_SEEDS, RESULTS),
    (("pendulum_dau", "pendulum_ddpg"), (*FIVE_SEEDS, OLD_ACTOR_002), RESULTS),
    (("cartpole_dau",), (*FIVE_SEEDS, "round_seconds=0.1"), RESULTS),
    (("cartpole_dau", "cartpole_dqn"), ("total_time=1800", "eval_every=150", "seed=6,7,8,9,10,11,12,13,14,15"),
     RESULTS),  # issue 47's seeds
    (("halfcheetah_dau", "halfcheetah_ddpg"), ("total_time=30000", "seed=1,2,3,4,5", LOCOMOTION_DTS, OLD_ACTOR),
     RESULTS),
    (("ant_dau", "ant_ddpg"), ("total_time=50000", "seed=1,2,3,4,5", LOCOMOTION_DTS, OLD_ACTOR), RESULTS),
    (("bipedal_dau", "bipedal_ddpg"), ("total_time=20000", "seed=1,2,3,4,5", "dt=0.01,0.005,0.002", OLD_ACTOR_002),
     RESULTS),
    (("cartpole_dau", "cartpole_dqn"), ("seed=1,2,3,4,5",), f"{RESULTS}/cartpole_12600"),
    (("cartpole_dau",), (*FIVE_SEEDS, "ou_sigma=15", "exp_name=ou15"), f"{RESULTS}/cartpole_ou_sigma_15_grid"),
    # Made with dau_discrete.py's options and the three research variants that dau_discrete_research.py merged.
    ((RESEARCH,), (*FIVE_SEEDS, "exploration=ou-scaled"), f"{RESULTS}/cartpole_ou_scaled_grid"),
    ((RESEARCH,), (*FIVE_SEEDS, "value_learning_rate=0.01"), f"{RESULTS}/cartpole_value_lr_grid"),
    ((RESEARCH,), (*FIVE_SEEDS, "value_learning_rate=0.03"), f"{RESULTS}/cartpole_value_lr_003_grid"),
    ((RESEARCH,), ("total_time=1800", "eval_every=150", "seed=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15",
                                  "learning_rate_reference_dt=0.01"), f"{RESULTS}/cartpole_sqrt_rule_grid"),  # issue 49
    ((RESEARCH,), ("total_time=1800", "eval_every=150", "value_horizon=0.05",
                                 "seed=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15"), f"{RESULTS}/cartpole_horizon_grid"),  # 56
    *[((RESEARCH,), ("total_time=900", "eval_every=150", "seed=1,2,3,4,5", "dt=0.0005,0.01", *clip),
       f"{RESULTS}/cartpole_clip_probes") for clip in (("advantage_rate_clip=430,2000",), ())],  # issue 56's probes
    ((RESEARCH,), ("value_horizon=0.05", "seed=1,2,3,4,5", "dt=0.01,0.005,0.002,0.001"),
     f"{RESULTS}/cartpole_horizon_12600"),  # at the paper's budget (dt 0.0005 not run)
    ((RESEARCH,), ("total_time=1800", "eval_every=150", "value_horizon=0.01",
                   "seed=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15"), f"{RESULTS}/cartpole_horizon_001_grid"),  # issue 64
    (("pendulum_dau_horizon",), FIVE_SEEDS, f"{RESULTS}/pendulum_horizon_grid"),  # issue 56's continuous horizon
    (("bipedal_dau_horizon",), ("total_time=20000", "seed=1,2,3,4,5", "dt=0.01,0.005,0.002"),
     f"{RESULTS}/bipedal_horizon_grid"),  # issue 56's continuous horizon on BipedalWalker
    (("bipedal_dau",), ("total_time=20000", "seed=1,2", "dt=0.01,0.005"), f"{RESULTS}/bipedal_dau_diagnostics"),
    (("../research/cartpole_dau_ring",), (), f"{RESULTS}/cartpole_ring"),  # issue 76: the appendix's ring, 1800 s
    (("../research/cartpole_dau_official",), (), f"{RESULTS}/cartpole_official"),  # issue 76 §5: the ring + four
    (("../research/cartpole_dau_ring_12600",), (), f"{RESULTS}/cartpole_ring_12600"),  # issue 76 §3: 12600 s
    *[((f"../research/pendulum_ddpg_{probe}",), ("dt=0.01",), f"{RESULTS}/pendulum_ddpg_probes/{probe}")
      for probe in ("policy_lr_01", "authors_rates", "tau_09", "authors_ou")],  # issue 84 §2: DDPG's probes
    *[((f"../research/pendulum_ddpg_{probe}",), ("dt=0.0005", "seed=1,2"), f"{RESULTS}/pendulum_ddpg_probes/{probe}")
      for probe in ("policy_lr_01", "authors_ou_00005")],  # 2 seeds at dt 0.0005
    (("../research/pendulum_dau_policy_lr_01",), (), f"{RESULTS}/pendulum_dau_policy_lr_01"),  # 84 §4
    (("../research/halfcheetah_dau_policy_lr_01",), (), f"{RESULTS}/halfcheetah_dau_policy_lr_01"),  # 84 §4
    (("../authors/pendulum_ddpg",), (), f"{RESULTS}/authors_pendulum_ddpg"),  # issue 84 §3: their baselines
    (("../authors/cartpole_dqn",), (), f"{RESULTS}/authors_cartpole_dqn"),  # on our whole grids
    *[((f"../authors/pendulum_ddpg_{probe}",), (), f"{RESULTS}/authors_pendulum_ddpg_probes/{probe}")
      for probe in ("no_resets", "tau_09", "128_envs")],  # issue 84 §3: settings their code allows
    *[((f"../research/pendulum_ddpg_{probe}",), (), f"{RESULTS}/pendulum_ddpg_probes/{probe}")
      for probe in ("128_envs", "128_envs_00005", "128_envs_authors_rates", "128_envs_authors_rates_ou",
                    "authors_actor_00005", "authors_ou_ring_00005", "authors_ring_00005", "authors_noise_00005")],
    *[((f"../research/cartpole_dqn_authors_ou_{step}",), (), f"{RESULTS}/cartpole_dqn_probes/authors_ou_{step}")
      for step in ("0001", "00005", "ring_00005")],  # issue 84 §4: DQN with the authors' noise (and their memory)
]  # fmt: skip


@pytest.mark.slow  # a --print-args process per sweep file and override set: about 4 s each, 30 of them
@pytest.mark.parametrize("files,overrides,results", KEPT_GRIDS, ids=lambda value: str(value).split("/")[-1][:40])
def test_every_kept_run_is_found_by_the_command_that_made_it(files, overrides, results, monkeypatch):
    """Runs made before an argument existed (no value_update, round_seconds... in their run.json) are recognised:
    a run.json reads as the code that wrote it computed (harness.run_info.VALUE_BEFORE)."""
    monkeypatch.chdir(ROOT)
    runs = run_local.finished_runs(ROOT / results)
    for name in files:
        sweep = run_local.load_sweep(ROOT / "sweeps" / "paper" / f"{name}.yaml", overrides)
        missing = [point for point in run_local.grid(sweep) if not run_local.is_done(sweep, point, runs)]
        assert not missing, (name, missing[:3])


# The kept grids of the research variants, and their first diagnostics rows that HEAD must write again.
# (Issue 84's probes ran the paper scripts with flags, not a variant: left out.)
VARIANT_GRIDS = [
    grid
    for grid in KEPT_GRIDS
    if any("research" in name or "horizon" in name for name in grid[0])
    and not any(probe in name for probe in ("pendulum_ddpg_", "cartpole_dqn_", "dau_policy_lr") for name in grid[0])
]


# Physical seconds HEAD's run plays: its first two diagnostics rows (one every --eval-every / 10) and a round more,
# long before the replay ring could wrap.
def reproduced_time(eval_every):
    return 2 * eval_every / 10 + 30


@pytest.mark.slow
@pytest.mark.parametrize("files,overrides,results", VARIANT_GRIDS, ids=lambda value: str(value).split("/")[-1][:40])
def test_head_writes_a_kept_variant_runs_rows_on_the_machine_that_made_it(files, overrides, results, tmp_path):
    """The kept runs of the research variants were made by scripts since merged (dau_discrete_research.py) or by
    earlier commits: HEAD's script, started by the sweep file's agent command at one point of the grid (the finest
    dt up to 0.005 and the first seed), writes the kept run's diagnostics.csv rows (its first two at least) and
    evaluations over its first reproduced_time physical seconds, bit for bit as printed; the shorter run's last row
    of each file, written as it ends, is not one of the kept run's. Only on a CPU of the kept run's model with its
    one torch thread: another CPU takes another code path in MKL, and other numbers (docs/log.md, 2026-11-28)."""
    from harness.run_info import machine_info

    sweep = run_local.load_sweep(ROOT / "sweeps" / "paper" / f"{files[0]}.yaml", overrides)
    pairs = [(path, run) for path, run in run_local.readable_runs(ROOT / results) if run.get("completed")]
    points = [point for point in run_local.grid(sweep) if run_local.is_done(sweep, point, [run for _, run in pairs])]
    point = min(points, key=lambda point: (abs(point["dt"] - 0.005), point["seed"]))
    path, kept = next((path, run) for path, run in pairs if grid_runs.same_point(sweep, point, [run]))
    if kept["machine"]["cpu"] != machine_info(torch.device("cpu"))["cpu"] or kept["machine"]["torch_threads"] != 1:
        pytest.skip(f"{path.parent.name} was made on {kept['machine']['cpu']}, with one torch thread")
    sweep_here = sweep | {"program": str(ROOT / sweep["program"])}  # started from a folder of its own
    played = reproduced_time(run_local.run_args(sweep, point)["eval_every"])
    command = run_local.agent_command(sweep_here, point | {"total_time": played})
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(command, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300)
    (run_dir,) = (tmp_path / "runs").glob("*__*")
    for name in ("diagnostics.csv", "evals.csv"):
        rows = [[row for row in read_csv(folder / name) if float(row["physical_time"]) <= played]
                for folder in (run_dir, path.parent)]  # fmt: skip
        for row in (*rows[0], *rows[1]):
            row.pop("wall_time", None)
        # The shorter run's last row of each file, at its end, is not one of the kept run's; every other row is, and
        # every kept row up to there is one of the shorter run's.
        if rows[0] and rows[0][-1]["physical_time"] not in {row["physical_time"] for row in rows[1]}:
            rows[0].pop()
        rows[1] = [
            row for row in rows[1] if rows[0] and float(row["physical_time"]) <= float(rows[0][-1]["physical_time"])
        ]
        assert rows[0] == rows[1] and len(rows[0]) >= (2 if name == "diagnostics.csv" else 1), name


@pytest.mark.parametrize("path", sorted((ROOT / "sweeps" / "readme").glob("*.yaml")), ids=lambda path: path.stem)
def test_each_readme_sweep_file_is_the_kept_grid_of_its_row(path, monkeypatch):
    """sweeps/readme/: a file per README row and algorithm, whose grid is that row's kept runs exactly: every point
    has its finished run in docs/results (docs/results/cartpole_12600 at the paper's budget), no kept run of that
    script's label, env and budget is outside the grid, and the header gives the run count."""
    monkeypatch.chdir(ROOT)
    sweep = run_local.load_sweep(path)
    folder = ROOT / RESULTS / ("cartpole_12600" if path.stem.endswith("_12600") else "")
    runs = run_local.finished_runs(folder)
    points = run_local.grid(sweep)
    assert all(run_local.is_done(sweep, point, runs) for point in points), path.name
    wanted = {run_local.point_identity(sweep, point) for point in points}
    parameters = sweep["parameters"]
    label = described_point(sweep, points[0])["label"]
    kin = [run for run in runs if archive.label(run) == label and run["args"]["env_id"] == parameters["env_id"]["value"]
           and run["args"]["total_time"] == parameters["total_time"]["value"]]  # fmt: skip
    assert {archive.identity(run) for run in kin} == wanted and len(kin) == len(points), (path.name, len(kin))
    assert f"# {len(points)} runs. Cost on 2-core CPU machines" in path.read_text()


def test_a_grid_point_is_what_its_run_computes():
    args = migrate_runs.resolved_args("dau_discrete.py", {"env_id": "CartPole-v1", "dt": 0.01, "seed": 1})
    point = run_identity("dau_discrete.py", args)
    for same in ({"total_time": int(args["total_time"])}, {"exp_name": "x"}, {"track": True}, {"env_workers": 2},
                 {"checkpoint_every": 5.0}, {"wandb_group": "g"}):  # fmt: skip
        assert run_identity("dau_discrete.py", args | same) == point, same
    for other in ({"seed": 2}, {"dt": 0.005}, {"ou_sigma": 15}, {"total_time": 600}, {"value_update": "greedy"}):
        assert run_identity("dau_discrete.py", args | other) != point, other
    assert run_identity("dqn_baseline.py", args) != point
    before = {key: value for key, value in args.items() if key not in ("value_update", "value_learning_rate")}
    assert run_identity("dau_discrete.py", before) == point  # a run.json from before those options
    research = migrate_runs.resolved_args("dau_discrete_research.py", {"env_id": "CartPole-v1", "dt": 0.01, "seed": 1})
    assert run_identity("dau_discrete_research.py", research) == point  # the research variant, its options off
    for option in ({"terminal_rows": 64}, {"value_horizon": 0.05}, {"advantage_rate_clip": 2000.0},
                   {"exploration": "ou-scaled"}, {"learning_rate_reference_dt": 0.01},
                   {"buffer_transitions": 1_000_000}, {"squared_loss": True}, {"truncation_as_termination": True},
                   {"first_round_steps": 19}, {"zero_last_bias": True}):  # fmt: skip
        assert run_identity("dau_discrete_research.py", research | option) != point, option
        # The variants it merged (their kept runs keep their names): the same grid point, option on or off.
        for merged in migrate_runs.MERGED:
            assert run_identity(merged, args) == point
            assert run_identity(merged, args | option) == run_identity("dau_discrete_research.py", research | option)
    pendulum = migrate_runs.resolved_args("dau_continuous.py", {"env_id": "Pendulum-v1", "dt": 0.01, "seed": 1})
    continuous_point, horizon = run_identity("dau_continuous.py", pendulum), {"value_horizon": 0.05}
    assert run_identity("dau_continuous_horizon.py", pendulum | {"value_horizon": None}) == continuous_point
    assert run_identity("dau_continuous_horizon.py", pendulum | horizon) != continuous_point
    assert run_identity("dau_continuous_horizon.py", pendulum | horizon) != run_identity(
        "dau_discrete_research.py", pendulum | horizon
    )  # two scripts, one option's name: two computations
    # An option added later, off, changes no identity already made (claim files and logs keep their names).
    with patch.dict(VALUE_BEFORE, {"an_option_added_later": 0.0}):
        assert run_identity("dau_discrete.py", args | {"an_option_added_later": 0.0}) == point


def label(script, env_id="CartPole-v1", dt=0.01, **given):
    """The label the migration gives a run.json of `script` (as sweeps.migrate_runs reads the kept runs)."""
    args = migrate_runs.resolved_args(migrate_runs.MERGED.get(script, script), {"env_id": env_id, "dt": dt, **given})
    return migrated_label({"script": script, "args": args})


def migrated_label(run):
    return migrate_runs.described(run)["label"]


def test_a_run_is_labelled_by_its_algorithm_and_its_non_default_arguments():
    assert label("dau_discrete.py") == label("dau_discrete.py", seed=3, total_time=600, exp_name="x") == "DAU"
    assert label("dqn_baseline.py") == "DQN-unscaled" and label("dqn_baseline.py", scaled=True) == "DQN-scaled"
    assert label("ddpg_baseline.py", env_id="Pendulum-v1") == "DDPG-unscaled"
    assert label("dau_continuous.py", env_id="HalfCheetah-v4", dt=0.005) == "DAU"  # the env's settings are defaults
    assert label("dau_continuous.py", env_id="HalfCheetah-v4", tau=0.5) == "DAU+tau=0.5"
    assert label("dau_discrete_research.py") == "DAU"  # its options off: the paper's DAU
    assert label("dau_discrete_research.py", terminal_rows=64, value_horizon=0.01) == (
        "DAU+terminal_rows=64+value_horizon=0.01"
    )
    # The variants it merged, whose kept runs keep their names, are labelled as it labels the same arguments.
    assert label("dau_discrete_beyond_paper.py") == "DAU"
    assert label("dau_discrete_beyond_paper.py", value_learning_rate=0.01) == "DAU+value_learning_rate=0.01"
    assert label("dau_discrete_beyond_paper.py", ou_sigma=15, exploration="ou-scaled") == (
        "DAU+exploration=ou-scaled+ou_sigma=15"
    )
    assert label("dau_discrete_td_noise.py") == "DAU"
    assert label("dau_discrete_td_noise.py", terminal_rows=64) == "DAU+terminal_rows=64"
    assert label("dau_discrete_horizon.py") == "DAU"
    assert label("dau_discrete_horizon.py", value_horizon=0.05) == "DAU+value_horizon=0.05"
    assert label("dau_discrete_horizon.py", advantage_rate_clip=430.0, value_horizon=0.05) == (
        "DAU+advantage_rate_clip=430+value_horizon=0.05"
    )
    assert label("dau_continuous_horizon.py", env_id="Pendulum-v1") == "DAU"
    assert label("dau_continuous_horizon.py", env_id="Pendulum-v1", value_horizon=0.05) == "DAU+value_horizon=0.05"
    # --round-seconds sets steps and updates per round: the label shows the option, not what it set.
    assert label("dau_discrete.py", dt=0.001, round_seconds=0.1) == "DAU+round_seconds=0.1"
    # dau_discrete.py's run.json: before the options (none of them), with them (off or on), and today's.
    old = migrate_runs.resolved_args("dau_discrete.py", {"env_id": "CartPole-v1", "dt": 0.01})
    del old["round_seconds"]
    assert migrated_label({"script": "dau_discrete.py", "args": old}) == "DAU"
    with_options = old | {"value_update": "all", "value_learning_rate": None}
    assert migrated_label({"script": "dau_discrete.py", "args": with_options}) == "DAU"
    with_options["value_learning_rate"] = 0.03
    assert migrated_label({"script": "dau_discrete.py", "args": with_options}) == "DAU+value_learning_rate=0.03"
    patched = {"script": "dau_discrete_rs.py", "args": {**old, "reward_scale": 100.0}}  # a probe's copy of a script
    assert migrated_label(patched) == "dau_discrete_rs+reward_scale=100"
    assert migrate_runs.described(patched)["algorithm"] == "DAU"  # compare.py's
    assert migrate_runs.described({"script": "other.py", "args": {}})["algorithm"] is None
    # A probe's patch with its option off computes what the script computes (docs/results/cartpole_probes: seeds 4
    # and 5 of value_update_greedy ran with weight_decay.patch applied, at 0): the same label, one variant a folder.
    assert migrated_label({"script": "dau_discrete.py", "args": {**old, "weight_decay": 0.0}}) == "DAU"
    assert migrated_label({"script": "dau_discrete.py", "args": {**old, "weight_decay": 1.0}}) == "DAU+weight_decay=1"
    assert migrated_label({**patched, "args": {**old, "reward_scale": 1.0}}) == "dau_discrete_rs"


def write_run(folder, name, script="dau_discrete.py", seed=1, **given):
    args = migrate_runs.resolved_args(script, {"env_id": "CartPole-v1", "dt": 0.01, "seed": seed, "total_time": 300,
                                               "eval_every": 150, **given})  # fmt: skip
    (folder / name).mkdir(parents=True)
    info = {"script": script, "dt": 0.01, "args": args, "completed": True}
    (folder / name / "run.json").write_text(json.dumps(info | migrate_runs.described(info)))
    (folder / name / "evals.csv").write_text("physical_time,scaled_return\n0,20\n150,100\n300,200\n")


def test_two_finished_runs_of_one_point_are_refused_naming_both(tmp_path):
    write_run(tmp_path, "first")
    write_run(tmp_path, "greedy", value_update="greedy")  # another label: no clash
    write_run(tmp_path, "other_seed", seed=2)
    assert {key[1] for key in archive.finished_runs(tmp_path)} == {"DAU", "DAU+value_update=greedy"}
    write_run(tmp_path, "second", exp_name="again")  # the same point under another name
    with pytest.raises(archive.DuplicateRuns, match="first and .*second"):
        archive.finished_runs(tmp_path)
    for command in (["-m", "analysis.plot", "--runs", str(tmp_path), "--out", str(tmp_path / "f.png")],
                    ["-m", "analysis.invariance", "--runs", str(tmp_path)]):  # fmt: skip
        result = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        assert result.returncode != 0 and "Traceback" not in result.stderr, (command, result.stderr[-500:])
        assert "two finished runs of CartPole-v1 DAU" in result.stderr and "second" in result.stderr, command
    from analysis import compare, diagnostics

    options = compare.Options(variants=(tmp_path,), reference=tmp_path, total_time=300)
    with pytest.raises(archive.DuplicateRuns, match="first and .*second"):  # their commands: plot's one line
        compare.comparison_table(options)
    with pytest.raises(archive.DuplicateRuns, match="first and .*second"):
        diagnostics.load_diagnostics(tmp_path, "CartPole-v1", "DAU")


def test_a_label_at_several_budgets_is_named_by_its_budget(tmp_path):
    write_run(tmp_path, "short")
    write_run(tmp_path / "more", "long", total_time=600)
    runs = scores.load_runs([tmp_path, tmp_path / "more"])
    assert set(runs["CartPole-v1"]) == {"DAU@300s", "DAU@600s"}


def test_a_run_json_that_is_not_whole_is_refused_in_one_line_naming_it(tmp_path, workdir):
    """A half-written or corrupt run.json, read as nothing, took its run out of the plots and the "done" lists
    without a word; every tool now refuses it, naming the file: the tools that read results stop, the executor
    leaves that run out and goes on."""
    write_run(tmp_path, "whole")
    write_run(tmp_path, "cut", seed=2)
    (tmp_path / "cut" / "run.json").write_text('{"script": "dau_discrete.py", "dt": 0.0')
    with pytest.raises(archive.RefusedRuns, match=r"cut/run.json is not a whole run.json"):
        archive.finished_runs(tmp_path)
    (tmp_path / "cut" / "run.json").write_text("[]")  # JSON, but not a run's
    with pytest.raises(archive.RefusedRuns, match=r"cut/run.json is not a run.json \(a JSON list\)"):
        archive.finished_runs(tmp_path)
    (tmp_path / "cut" / "run.json").write_text('{"script": "dau_discrete.py", "dt": 0.0')
    for command in (["-m", "analysis.plot", "--runs", str(tmp_path), "--out", str(tmp_path / "f.png")],
                    ["-m", "analysis.invariance", "--runs", str(tmp_path)],
                    ["-m", "sweeps.collect", "--runs", str(tmp_path), "--out", str(tmp_path / "kept")]):  # fmt: skip
        result = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        assert result.returncode != 0 and "Traceback" not in result.stderr, (command, result.stderr[-500:])
        assert len(result.stderr.strip().splitlines()) == 1 and "cut/run.json" in result.stderr, result.stderr
    assert not (tmp_path / "kept").exists()  # refused before anything was copied
    (workdir / "tiny.yaml").write_text(TINY_SWEEP)
    (workdir / "runs").mkdir()
    (workdir / "runs" / "cut").mkdir()
    (workdir / "runs" / "cut" / "run.json").write_text("{")
    # The executor refuses that run alone, in one line, and plans the rest (issue 66: the run may be another grid's).
    plan = executor("tiny.yaml", "--dry-run", cwd=workdir, timeout=120)
    assert plan.returncode == 0 and "Traceback" not in plan.stderr, plan.stderr
    (refusal,) = plan.stderr.strip().splitlines()
    assert refusal.startswith("refused runs/cut/run.json is not a whole run.json"), refusal
    assert "0 already finished, 2 to run" in plan.stdout, plan.stdout


def test_a_run_json_without_script_or_args_or_that_cannot_be_read_is_refused_naming_it(tmp_path):
    """JSON objects that are not a run's (a hand edit, another tool's file) and a run.json that cannot be read are
    refused as a cut one is, naming the file (issue 73: a KeyError or an OSError, with a traceback)."""
    write_run(tmp_path, "whole")
    (tmp_path / "bare").mkdir()
    neither, listed = '"script" string or "args" object', '{"script": "dau_discrete.py", "args": [], "completed": true}'
    for text, missing in (('{"completed": true}', neither), ("{}", neither), (listed, '"args" object')):
        (tmp_path / "bare" / "run.json").write_text(text)
        with pytest.raises(archive.RefusedRuns, match=rf"bare/run.json is not a run.json \(no {missing}\): restore"):
            archive.finished_runs(tmp_path)
    (tmp_path / "bare" / "run.json").unlink()
    (tmp_path / "bare" / "run.json").mkdir()
    with pytest.raises(archive.RefusedRuns, match=r"bare/run.json cannot be read \(Is a directory\): restore it"):
        archive.finished_runs(tmp_path)


def test_a_label_that_mixes_evaluation_intervals_is_refused(tmp_path):
    """One label whose runs evaluate at different intervals would average curves sampled at different times: the
    tools refuse it, naming the label and the intervals, as they refuse duplicate runs."""
    write_run(tmp_path, "every_150")
    write_run(tmp_path, "every_100", seed=2, eval_every=100)
    with pytest.raises(archive.RefusedRuns, match=r"CartPole-v1 DAU mixes evaluation intervals.*100.*150"):
        scores.load_runs(tmp_path)


def test_the_code_that_made_a_run_is_read_from_run_json():
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert archive.code_of({}) == "unrecorded"  # the kept runs from before the record
    assert archive.code_of({"code": [{"commit": None, "uncommitted_changes": None}]}) == "no git"
    assert archive.code_of({"code": [{"commit": commit, "uncommitted_changes": False}]}) == "0123456"
    resumed = [{"commit": commit, "uncommitted_changes": True}, {"commit": "f" * 40, "uncommitted_changes": False}]
    assert archive.code_of({"code": resumed}) == "0123456+changes then fffffff"
    resumed_since = [{"commit": "unrecorded", "uncommitted_changes": None}, resumed[1]]  # a run older than the record
    assert archive.code_of({"code": resumed_since}) == "unrecorded then fffffff"


# Kept runs made again later for a file the first ones lack (diagnostics.csv): (the reruns' folder, the first runs').
RERUNS = [(f"{RESULTS}/bipedal_dau_diagnostics", RESULTS)]


@pytest.mark.parametrize("reruns,first", RERUNS, ids=lambda value: value.split("/")[-1])
def test_a_kept_run_made_again_logs_the_same_evaluations(reruns, first):
    """Same seed, same numbers across sessions and commits: each rerun's evals.csv is its first run's, the wall-time
    column aside, up to the one evaluation the schedule moved since (docs/log.md, 2026-11-26: BipedalWalker at dt
    0.005, 16012.8 -> 16000 s). From there on the evaluations' terrains differ: an evaluation env whose episode ends
    first starts another while the others finish, so the draws it has made depend on the policy evaluated."""
    first_runs = {run_identity(info["script"], info["args"]): info for info in run_local.finished_runs(ROOT / first)}
    made_again = run_local.finished_runs(ROOT / reruns)
    assert made_again, reruns

    def evaluations(folder, info):
        return [{name: value for name, value in row.items() if name != "wall_time"}
                for row in read_csv(ROOT / folder / info["run_name"] / "evals.csv")]  # fmt: skip

    for info in made_again:
        original = first_runs[run_identity(info["script"], info["args"])]
        again, before = evaluations(reruns, info), evaluations(first, original)
        times = zip((row["physical_time"] for row in again), (row["physical_time"] for row in before), strict=True)
        moved = [index for index, (time, first_time) in enumerate(times) if time != first_time]
        assert len(moved) <= 1, (info["run_name"], moved)  # the schedule moved at most one evaluation of a run
        same_until = moved[0] if moved else len(again)
        assert again[:same_until] == before[:same_until], info["run_name"]
