"""The analysis tools on hand-made runs: the robustness tables and figure (analysis/plot.py, analysis/tables.py),
compare.py's table and verdict, the diagnostics, the spread of one command, the phase plane and the failure
boundary."""

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import run_script

import dau_discrete
from analysis import robustness
from sweeps import migrate_runs


def write_run(runs_dir, script, dt, seed, returns, eval_every=150.0, start_time=1, wall_time=60.0, **args):
    run_dir = Path(runs_dir, f"Pendulum-v1__{script[:-3]}__dt{dt:g}__{seed}__{start_time}")
    run_dir.mkdir(parents=True)
    rows = ["physical_time,env_steps,updates,wall_time,scaled_return"]
    rows += [f"{k * eval_every + 0.5 * dt},0,0,0,{value}" for k, value in enumerate(returns)]
    (run_dir / "evals.csv").write_text("\n".join(rows) + "\n")
    given = {"env_id": "Pendulum-v1", "dt": dt, "seed": seed, "total_time": 600.0, "eval_every": 150.0}
    run_args = migrate_runs.resolved_args(script, given | args)  # as the script records them: labelled DAU, DDPG-...
    info = {"script": script, "run_name": run_dir.name, "dt": dt, "args": run_args, "completed": True}
    info |= migrate_runs.described(info)
    (run_dir / "run.json").write_text(json.dumps(info | {"wall_time": wall_time}))
    return run_dir


def test_the_robustness_table_and_figure(tmp_path):
    from analysis import plot, scores, tables

    for seed, shift in ((1, 0.0), (2, 20.0)):  # DAU: every dt ends near -150; DDPG: -300 at dt 0.01, -1000 at 0.001
        write_run(tmp_path, "dau_continuous.py", 0.01, seed, [-1400, -600, -200, -160 + shift, -140 + shift])
        write_run(tmp_path, "dau_continuous.py", 0.001, seed, [-1400, -900, -300, -170 + shift, -150 + shift],
                  wall_time=540.0 + 120 * seed)  # fmt: skip
        write_run(tmp_path, "ddpg_baseline.py", 0.01, seed, [-1400, -500, -300, -300, -300 + shift], scaled=False)
        write_run(tmp_path, "ddpg_baseline.py", 0.001, seed, [-1400, -1000, -1000, -1000, -1000 + shift])
    unfinished = write_run(tmp_path, "dau_continuous.py", 0.01, 3, [-1400, 0])
    info = json.loads((unfinished / "run.json").read_text())
    (unfinished / "run.json").write_text(json.dumps({**info, "completed": False}))  # ignored

    runs = scores.load_runs(tmp_path)
    table = tables.robustness_table(runs).splitlines()
    # Run scores: the mean of the evaluations over the second half of 600 s (physical times 300, 450, 600): DAU
    # -166.7 / -153.3 at dt 0.01 and -206.7 / -193.3 at 0.001; DDPG -300 / -293.3 and -1000 / -993.3. Untrained
    # -1400, best -160 (DAU at dt 0.01): the score is (return + 1400) / 1240. Intervals of a mean of two runs: a
    # bootstrap draws both of one (1/4 each) or one of each (1/2), so the 95% interval is the two runs' range.
    dau_cells = "| DAU | -160.0 [-166.7, -153.3] (n=2) | -200.0 [-206.7, -193.3] (n=2) |"
    assert table[4].startswith(f"{dau_cells} {1200 / 1240:.2f} [")  # fine / coarse: dt 0.001 over dt 0.01
    halvings = np.log2(0.01 / 0.001)
    assert f"| {(1200 / 1240 - 1) / halvings:+.3f} [" in table[4]  # the slope per halving of dt
    ddpg_ratio = (-996.6667 + 1400) / (-296.6667 + 1400)
    assert table[5].startswith("| DDPG-unscaled | -296.7 [-300.0, -293.3] (n=2) | -996.7 [-1000.0, -993.3] (n=2) | "
                               f"{ddpg_ratio:.2f} [")  # fmt: skip
    # Worst / best, each dt resampled on its own: from the worst dt's lowest draw over the best's highest, and back.
    assert table[5].endswith(f"| {ddpg_ratio:.2f} [{(-1000 + 1400) / (-293.3333 + 1400):.2f}, "
                             f"{(-993.3333 + 1400) / (-300 + 1400):.2f}] |")  # fmt: skip
    assert table[6] == "| P(DAU > DDPG-unscaled) | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] | | | |"
    # Every step: each dt's mean score over the two dt's mean (DAU's scores 1 and 1200 / 1240), the runs that learn
    # (Pendulum's fixed line: a return of -987.0 or more), and the steps that depart (none with intervals this wide).
    level = (1 + 1200 / 1240) / 2
    (every,) = [line for line in table if line.startswith("| DAU | ") and ", 2/2 [" in line]
    assert every.startswith(f"| DAU | {1 / level:.2f} [") and f"| {1200 / 1240 / level:.2f} [" in every
    assert any(line.startswith("**Every step**") and "-987.0 or more" in line for line in table)
    # Wall time: DAU 2 x 1 min at dt 0.01, 11 and 13 min at 0.001; DDPG 4 runs of 1 min.
    assert table[-1] == "Wall time (minutes): DAU 26 in all, per run 1.0 at dt 0.01, 12.0 at dt 0.001; " \
                        "DDPG-unscaled 4 in all, per run 1.0 at dt 0.01, 1.0 at dt 0.001"  # fmt: skip
    assert tables.invariance_lines(runs)[0].startswith(f"invariance Pendulum-v1 DAU fine/coarse {1200 / 1240:.2f} [")
    out = tmp_path / "figures" / "curves.png"
    plot.plot(runs, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_an_environment_without_a_line_for_learns_is_left_out_in_one_line_and_the_others_reported(tmp_path):
    """Acrobot-v1 has no line for a run that learns (analysis/scores.py's LEARNS): invariance.py and the tables report
    Pendulum's runs read with its, and one line says what Acrobot lacks and where to add it. Its runs stopped every
    analysis ("Acrobot-v1 has no line ..."; issue 86)."""
    import subprocess
    import sys

    from helpers import ROOT

    from analysis import scores, tables

    for seed in (1, 2):
        for dt in (0.01, 0.001):
            write_run(tmp_path, "dau_continuous.py", dt, seed, [-1400, -600, -200, -160 - seed, -140 - seed])
            acrobot = write_run(tmp_path / "acrobot", "dau_discrete.py", dt, seed, [-500, -300, -200, -100, -90],
                                env_id="Acrobot-v1")  # fmt: skip
            acrobot.rename(tmp_path / acrobot.name.replace("Pendulum-v1", "Acrobot-v1"))
    command = [sys.executable, "-m", "analysis.invariance", "--runs", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("invariance Pendulum-v1 DAU fine/coarse") and "Acrobot" not in result.stdout
    assert result.stderr.strip() == f"Acrobot-v1 left out: {scores.LACKS_LINE}"
    assert "analysis/scores.py's LEARNS" in result.stderr
    runs = scores.load_runs(tmp_path)
    assert set(runs) == {"Pendulum-v1"} and "Pendulum-v1" in tables.robustness_table(runs)
    assert set(scores.load_runs(tmp_path, need_lines=False)) == {"Pendulum-v1", "Acrobot-v1"}


def test_the_probability_of_improvement_counts_pairs_of_runs_and_ties_as_half():
    """Agarwal et al.'s P(X > Y): DAU runs 1, 2, 3 against baseline runs 2, 2, 0: 1 beats one of three, 2 ties
    two and beats one, 3 beats all: (1 + 2 + 3) / 9. Its interval: DAU's and the baseline's runs resampled
    apart; all DAU runs above all baseline runs leave no doubt."""
    from analysis import tables

    assert robustness.probability_of_improvement([1.0, 2.0, 3.0], [2.0, 2.0, 0.0]) == pytest.approx(6 / 9)
    low, high = robustness.interval(([1.0, 2.0, 3.0], [2.0, 2.0, 0.0]), robustness.probability_of_improvement)
    assert 0 <= low < 6 / 9 < high <= 1
    assert robustness.interval(([5.0, 6.0], [1.0, 2.0]), robustness.probability_of_improvement) == (1.0, 1.0)
    assert (
        robustness.interval(([5.0], [1.0, 2.0]), robustness.probability_of_improvement) is None
    )  # one run: no interval
    # The tables resample it in batches (vectorized): the same interval as resample by resample.
    pair = ([1.0, 2.0, 3.0, 0.5], [2.0, 2.0, 0.0])
    batched = robustness.interval(pair, robustness.probability_of_improvement, vectorized=True)
    assert batched == robustness.interval(pair, robustness.probability_of_improvement)
    assert tables.improvement_cell(*pair) == f"{7 / 12:.2f} [{batched[0]:.2f}, {batched[1]:.2f}]"


def test_seeds_curves_are_averaged_at_the_evaluations_they_all_made():
    """A run that abandoned an evaluation after a SIGTERM (its row missing at 300 s) is averaged with the others at
    the same physical times, not row by row, in either order; the time it lacks is left out. So is a last periodic
    evaluation that another run lacks just before a final one closer than the interval (a budget of 700 s)."""
    from analysis.plot import mean_curve
    from analysis.scores import Curve

    def curve(times, returns):
        return Curve(np.array(times, dtype=float), np.array(returns, dtype=float), 1.0, max(times))

    whole = curve([0, 150, 300, 450, 600], [0, 1, 2, 3, 4])
    gap = curve([0, 150, 450, 600], [10, 11, 13, 14])
    for curves in ([whole, gap], [gap, whole]):
        times, mean, low, high = mean_curve(curves)
        np.testing.assert_allclose(times, [0, 150, 450, 600])
        np.testing.assert_allclose(mean, [5, 6, 8, 9])
        assert np.all(low <= mean) and np.all(mean <= high)
    whole, gap = curve([0, 300, 600, 700], [0, 1, 2, 3]), curve([0, 300, 700], [10, 11, 13])
    for curves in ([whole, gap], [gap, whole]):
        times, mean, *_ = mean_curve(curves)
        np.testing.assert_allclose(times, [0, 300, 700])
        np.testing.assert_allclose(mean, [5, 6, 8])
    np.testing.assert_allclose(mean_curve([gap])[1], gap.returns)
    with pytest.raises(ValueError, match="no evaluation time common to the 2 curves"):
        mean_curve([curve([0], [1]), curve([600], [2])])


def test_the_robustness_ratio_when_a_dt_or_every_dt_ends_below_untrained(tmp_path):
    from analysis import scores, tables

    # Untrained -100. DAU ends at 200 and -150 (below untrained); DDPG at -120 and -200 (never above it).
    write_run(tmp_path, "dau_continuous.py", 0.01, 1, [-100, 200, 200])
    write_run(tmp_path, "dau_continuous.py", 0.001, 1, [-100, -150, -150])
    write_run(tmp_path, "ddpg_baseline.py", 0.01, 1, [-100, -120, -120])
    write_run(tmp_path, "ddpg_baseline.py", 0.001, 1, [-100, -200, -200])
    table = tables.robustness_table(scores.load_runs(tmp_path)).splitlines()
    assert table[4].endswith("| 0.00 |")  # the worst dt learned nothing: ratio 0
    assert f"| {(-150 + 100) / 300:.2f} |" in table[4]  # fine / coarse below 0: the fine dt is below untrained
    assert "| — | " in table[5] and table[5].endswith("| — |")  # no dt learned: neither ratio


def test_the_phase_plane_shows_the_checkpoints_networks(tmp_path):
    import dau_continuous
    from analysis import phase_plane

    torch = pytest.importorskip("torch")
    run_dir = write_run(tmp_path, "dau_continuous.py", 0.01, 1, [-1400, -200])
    normalizer = dau_continuous.Normalizer(3)
    value, actor = dau_continuous.Value(3, 16, normalizer), dau_continuous.Actor(3, 1, 16, normalizer)
    (run_dir / "checkpoints").mkdir()
    checkpoint = {"args": {"hidden_size": 16}, "normalizer": normalizer.state_dict(), "value": value.state_dict()}
    torch.save({**checkpoint, "actor": actor.state_dict()}, run_dir / "checkpoints" / "300.0s.pt")

    found = phase_plane.find_checkpoints(tmp_path, "Pendulum-v1", seed=1)
    assert list(found) == ["DAU"] and list(found["DAU"][0.01]) == [300.0]
    image = phase_plane.evaluate_checkpoint(run_dir / "checkpoints" / "300.0s.pt", "value")
    assert image.shape == (101, 101)
    # Row = angular velocity (-8 at the bottom), column = angle (-pi at the left); the centre is upright, at rest.
    with torch.no_grad():
        assert image[50, 50] == pytest.approx(value(torch.tensor([[1.0, 0.0, 0.0]])).item(), abs=1e-5)
        assert image[0, 0] == pytest.approx(value(torch.tensor([[-1.0, 0.0, -8.0]])).item(), abs=1e-5)
        assert image[50, 75] == pytest.approx(value(torch.tensor([[0.0, 1.0, 0.0]])).item(), abs=1e-5)  # angle pi/2
        assert image[75, 50] == pytest.approx(value(torch.tensor([[1.0, 0.0, 4.0]])).item(), abs=1e-5)  # velocity 4
    policy = phase_plane.evaluate_checkpoint(run_dir / "checkpoints" / "300.0s.pt", "policy")
    assert np.abs(policy).max() <= 1 and policy.std() > 0


def test_the_diagnostics_figure(tmp_path):
    """analysis/diagnostics.py reads each run's diagnostics.csv (td_rate: sqrt(losses/td) / dt, per run) and draws
    the columns asked for; runs without one, unknown columns and empty folders get a clear error."""
    from analysis import diagnostics

    for dt, seed in ((0.01, 1), (0.01, 2), (0.001, 1)):
        run_dir = write_run(tmp_path / "runs", "dau_continuous.py", dt, seed, [-1400, -200])
        td_loss = (2.0 * dt) ** 2  # a TD error of 2 per second at every dt
        rows = ["physical_time,losses/td,values/v"] + [f"{t},{td_loss},{-seed * t}" for t in (15.0, 30.0, 45.0)]
        (run_dir / "diagnostics.csv").write_text("\n".join(rows) + "\n")
    write_run(tmp_path / "runs", "dau_continuous.py", 0.002, 1, [-1400, -200])  # from before diagnostics.csv
    variant = write_run(tmp_path / "runs", "dau_continuous.py", 0.01, 1, [-1400, -200], start_time=2, round_seconds=0.1)
    (variant / "diagnostics.csv").write_text("physical_time,losses/td,values/v\n15.0,1e-4,7.0\n30.0,1e-4,8.0\n")
    by_dt = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU")
    assert sorted(by_dt) == [0.001, 0.01] and len(by_dt[0.01]) == 2
    assert all(columns["td_rate"] == pytest.approx([2.0] * 3) for seeds in by_dt.values() for _, columns in seeds)
    assert sorted(columns["values/v"][-1] for _, columns in by_dt[0.01]) == [-90.0, -45.0]
    out = tmp_path / "figure.png"
    options = diagnostics.Options(runs=(tmp_path / "runs",), env_id="Pendulum-v1", columns=("values/v", "td_rate"),
                                  out=out)  # fmt: skip
    diagnostics.main(options)
    assert out.read_bytes().startswith(b"\x89PNG")
    (seed,) = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU+round_seconds=0.1")[0.01]
    assert list(seed[1]["values/v"]) == [7.0, 8.0]  # the variant's run, apart from the paper's of the same seed
    out.unlink()
    diagnostics.main(dataclasses.replace(options, algorithms=("DAU", "DAU+round_seconds=0.1")))
    assert out.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(SystemExit, match="no column values/q in every diagnostics.csv"):
        diagnostics.main(dataclasses.replace(options, columns=("values/q",)))
    with pytest.raises(SystemExit, match=r"no finished DDPG-unscaled runs of Pendulum-v1"):
        diagnostics.main(dataclasses.replace(options, algorithms=("DAU", "DDPG-unscaled")))


def test_the_diagnostics_summary_table(tmp_path):
    """--table: per dt, the mean over seeds (range) of each run's mean over its last --window seconds, and V over
    its balance level (r + abs(A)) dt / (dt ln(1 / gamma) + terminal share)."""
    from analysis import diagnostics

    header = "physical_time,losses/td,values/v,values/abs_advantage,exploration/changed_action,batch/terminal_share"
    for seed, level in ((1, 100.0), (2, 300.0)):  # the first row is outside the last 20 s
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, [0, 0], gamma=0.8)
        rows = [
            f"10,0,{level / 10},1,0.5,0.5",
            f"30,0,{level},{level / 2},0.01,0.001",
            f"40,0,{level},{level / 2},0.03,0.001",
        ]
        (run_dir / "diagnostics.csv").write_text("\n".join([header, *rows]) + "\n")
    table = diagnostics.summary_table(diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU"), 20, 1.0)
    ratios = [level / ((1 + level / 2) * 0.01 / (0.01 * math.log(1.25) + 0.001)) for level in (100.0, 300.0)]
    assert table.splitlines()[2] == (
        f"| 0.01 | 2 | 200.0 (100.0-300.0) | 100.0 (50.0-150.0) | 0.0200 (0.0200-0.0200) | 0.0010 (0.0010-0.0010) | "
        f"{np.mean(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |"
    )
    assert "balance" not in diagnostics.summary_table(
        diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU"), 20
    )
    continuous = write_run(tmp_path / "continuous", "dau_continuous.py", 0.01, 1, [0, 0])  # no changed-action share
    (continuous / "diagnostics.csv").write_text("physical_time,losses/td,values/v,values/abs_advantage,"
                                                "batch/terminal_share\n30,0,-50,2,0\n")  # fmt: skip
    table = diagnostics.summary_table(diagnostics.load_diagnostics(tmp_path / "continuous", "Pendulum-v1", "DAU"), 20)
    row = "| 0.01 | 1 | -50.0 (-50.0--50.0) | 2.0 (2.0-2.0) | 0.0000 (0.0000-0.0000) |"
    assert "changed" not in table and table.splitlines()[2] == row


def test_split_sets_the_runs_below_a_return_apart_from_the_others(tmp_path):
    """--split RETURN: each table for the runs whose second-half mean evaluation is below RETURN, then the others."""
    from analysis import diagnostics

    for seed in (1, 2, 3):  # second-half means (evaluations from 20 s of 40) 100, 200, 300
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, [0, 0, 100 * seed, 100 * seed],
                            eval_every=15, total_time=40.0)  # fmt: skip
        rows = [f"{t},{seed},{seed},{seed},0.5" for t in (10, 20, 30, 40)]
        header = "physical_time,values/v,optimizer/grad_rms_value,optimizer/grad_rms_advantage,batch/terminal_td_share"
        (run_dir / "diagnostics.csv").write_text("\n".join([header + ",losses/td", *(f"{row},0.0" for row in rows)]))
    table_path = tmp_path / "split.md"
    options = diagnostics.Options(runs=(tmp_path / "runs",), env_id="Pendulum-v1", columns=("values/v",),
                                  probe=(0, 40), split=150, table=table_path, out=tmp_path / "split.png")  # fmt: skip
    diagnostics.main(options)
    below, rest = table_path.read_text().split("DAU, " + str(tmp_path / "runs"))[1:]
    # The probe's column "eval": each run's mean evaluation over 0-40 s (at 0, 15 and 30 s), a third of 100 seed.
    assert below.startswith(", second-half mean below 150:") and "| 0.01 | 1 | 33.3 (33.3-33.3) |" in below
    assert rest.startswith(", second-half mean 150 or more:") and "| 0.01 | 2 | 83.3 (66.7-100.0) |" in rest


def test_split_refuses_a_run_it_cannot_score_naming_it(tmp_path):
    """--split RETURN has no side for a run without a second-half mean evaluation (no evaluation in that half, or a
    NaN one): it is refused, naming each such run and the flags that leave it out, before anything is written
    (issue 73: it was left out of both tables without a word)."""
    from analysis import diagnostics

    header = "physical_time,values/v,optimizer/grad_rms_value,optimizer/grad_rms_advantage,batch/terminal_td_share"
    # Evaluations at 0, 15, 30 and 45 s of 40: seed 3's end at 15 s, seed 4's second half has a NaN.
    for seed, returns in ((1, [0, 0, 100, 100]), (2, [0, 0, 300, 300]), (3, [0, 0]), (4, [0, 0, 100, "nan"])):
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, returns, eval_every=15, total_time=40.0)
        rows = [f"{t},{seed},{seed},{seed},0.5,0.0" for t in (10, 20, 30, 40)]
        (run_dir / "diagnostics.csv").write_text("\n".join([header + ",losses/td", *rows]))
    table_path, out = tmp_path / "split.md", tmp_path / "split.png"
    options = diagnostics.Options(runs=(tmp_path / "runs",), env_id="Pendulum-v1", columns=("values/v",),
                                  probe=(0, 40), split=150, table=table_path, out=out)  # fmt: skip
    with pytest.raises(SystemExit) as refused:
        diagnostics.main(options)
    message, runs = str(refused.value), tmp_path / "runs" / "Pendulum-v1__dau_discrete__dt0.01"
    assert message.startswith("error: --split: 2 runs have no second-half mean evaluation to split by: "), message
    assert f"{runs}__3__1 (no evaluation from 20 s on, the second half of its 40 s)" in message, message
    assert f"{runs}__4__1 (a NaN evaluation from 20 s on, the second half of its 40 s)" in message, message
    assert "__1__1" not in message and "__2__1" not in message
    assert "--seeds" in message and "without --split" in message
    assert not table_path.exists() and not out.exists()
    diagnostics.main(dataclasses.replace(options, split=None))  # without --split, all four runs in one table
    assert "| 0.01 | 4 |" in table_path.read_text()
    diagnostics.main(dataclasses.replace(options, seeds=(1, 2)))  # without the two, split as before
    below, rest = table_path.read_text().split("DAU, " + str(tmp_path / "runs"))[1:]
    assert "| 0.01 | 1 |" in below and "| 0.01 | 1 |" in rest


def test_the_diagnostics_probe_table(tmp_path):
    """--probe FROM TO: per dt, each run's mean evaluation from FROM to TO, V's least-squares climb per second and V
    at TO, the RMS TD error per second, RMSprop's denominators and the terminal share of td^2, over the rows after
    FROM up to TO (a longer run counts up to TO); --seeds keeps those seeds; an algorithm may be in either folder."""
    from analysis import diagnostics

    header = ("physical_time,losses/td,values/v,optimizer/grad_rms_value,optimizer/grad_rms_advantage,"
              "batch/terminal_td_share")  # fmt: skip
    for seed in (1, 2, 3):
        run_dir = write_run(tmp_path / "runs", "dau_discrete.py", 0.01, seed, [0, 10 * seed, 20, 500], eval_every=15)
        rows = [
            f"{t},{(2 * 0.01) ** 2},{seed * t + (t == 10) * 99},{seed},{3 * seed},0.5" for t in (10, 20, 30, 40, 50)
        ]
        (run_dir / "diagnostics.csv").write_text("\n".join([header, *rows]) + "\n")
    by_dt = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU", seeds=(1, 2))
    assert len(by_dt[0.01]) == 2
    table = diagnostics.probe_table(by_dt, 15, 40)
    # Evaluations at 15 and 30 s (10 seed and 20), rows at 20, 30 and 40 s (V = seed t: climbs seed per second).
    assert table.splitlines()[2] == (
        "| 0.01 | 2 | 17.5 (15.0-20.0) | 1.5000 (1.0000-2.0000) | 60.00 (40.00-80.00) | 2.0 (2.0-2.0) | "
        "1.5 (1-2) | 4.5 (3-6) | 0.50 (0.50-0.50) |"
    )
    # abs(A) and the changed-action share where every run logs them, here seed 1's and 2's: 0.5 s and 2 s.
    for seed in (1, 2):
        (run_dir,) = (tmp_path / "runs").glob(f"*__{seed}__*")
        lines = (run_dir / "diagnostics.csv").read_text().splitlines()
        extended = [lines[0] + ",values/abs_advantage,exploration/changed_action"]
        extended += [f"{line},{0.5 * seed},{0.01 * seed}" for line in lines[1:]]
        (run_dir / "diagnostics.csv").write_text("\n".join(extended) + "\n")
    by_dt = diagnostics.load_diagnostics(tmp_path / "runs", "Pendulum-v1", "DAU", seeds=(1, 2))
    extended = diagnostics.probe_table(by_dt, 15, 40).splitlines()
    assert extended[0].endswith("| terminal td^2 share | abs(A) | changed |")
    assert extended[2] == table.splitlines()[2] + " 0.75 (0.50-1.00) | 0.0150 (0.0100-0.0200) |"
    other = tmp_path / "other"
    write_run(other, "dau_discrete.py", 0.01, 1, [0, 0], round_seconds=0.1)
    (next(other.iterdir()) / "diagnostics.csv").write_text("\n".join([header, *rows]) + "\n")
    table_path = tmp_path / "probe.md"
    options = diagnostics.Options(runs=(tmp_path / "runs", other), env_id="Pendulum-v1", columns=("values/v",),
                                  algorithms=("DAU", "DAU+round_seconds=0.1"), probe=(15, 40), table=table_path,
                                  out=tmp_path / "probe.png")  # fmt: skip
    with warnings.catch_warnings():  # the other run has no evaluation from 15 to 40 s: its cell says so, no warning
        warnings.simplefilter("error")
        diagnostics.main(options)
    assert table_path.read_text().count("| 0.01 |") == 2
    assert table_path.read_text().splitlines()[-1].startswith("| 0.01 | 1 | — |")
    with pytest.raises(SystemExit, match=r"no finished DAU\+tau=0.5 runs of Pendulum-v1 .* in .*runs or .*other"):
        diagnostics.main(dataclasses.replace(options, algorithms=("DAU", "DAU+tau=0.5")))


def test_compare_sets_variants_beside_the_reference_and_refuses_what_it_cannot_compare(tmp_path):
    """analysis/compare.py: a variant's row and P(variant > reference) per dt, "—" where the variant has no runs; a
    variant at a dt the reference lacks, or two folders under one label, are refused."""
    from analysis import compare

    for seed, shift in ((1, 0.0), (2, 20.0)):
        for dt in (0.01, 0.001):
            write_run(tmp_path / "paper", "dau_discrete.py", dt, seed, [-1400, -300 + shift, -200 + shift])
        write_run(tmp_path / "variant", "dau_discrete.py", 0.01, seed, [-1400, -100 + shift, -100 + shift])
    options = compare.Options(variants=(tmp_path / "variant",), labels=("v",), reference=tmp_path / "paper",
                              env_id="Pendulum-v1", total_time=600.0)  # fmt: skip
    rows = compare.comparison_table(options).splitlines()
    # Scores: the evaluations over the second half of 600 s, here the last one alone.
    assert rows[2].startswith("| paper's DAU (n=2,2) | -190.0 [-200.0, -180.0] | -190.0 [-200.0, -180.0] | 1.00 [")
    assert rows[3] == "| v (n=2,0) | -90.0 [-100.0, -80.0] | — | — | — | — |"  # no ratios over part of the dt
    assert rows[4] == "| P(v > paper's DAU) | 1.00 [1.00, 1.00] | — | | | |"
    # --dts: the folders at those dt alone, on the reference table's scale: the variant's verdict over dt 0.01 only
    only = compare.comparison_table(dataclasses.replace(options, dts=(0.01,))).splitlines()
    assert only[0].count("| dt ") == 1 and only[2].startswith("| paper's DAU (n=2) | -190.0 [-200.0, -180.0] |")
    assert "dt 0.01 +" in only[-1] and "no verdict" not in only[-1] and "no verdict" in rows[-1]
    write_run(tmp_path / "variant", "dau_discrete.py", 0.002, 1, [-1400, -100, -100])
    with pytest.raises(SystemExit, match="at the reference's dt"):
        compare.comparison_table(options)
    with pytest.raises(SystemExit, match="each folder needs its own label"):
        compare.comparison_table(dataclasses.replace(options, labels=("paper's DAU",)))


def test_a_variant_is_more_robust_only_where_it_is_no_worse_at_every_dt_and_better_at_some():
    """compare.step_verdict, the rule of issue 64: worse at one dt outweighs better at another; better at one and
    unresolved elsewhere is more robust; nothing resolved is undecided; missing a dt gives no verdict."""
    from analysis import compare

    reference = {0.01: [0.90, 1.00, 0.95, 0.92], 0.001: [0.50, 0.60, 0.55, 0.52]}
    worse_and_better = {0.01: [0.20, 0.30, 0.25, 0.22], 0.001: [0.90, 1.00, 0.95, 0.92]}
    verdict = compare.step_verdict(worse_and_better, reference)
    assert verdict.startswith("dt 0.01 -0.70 [") and verdict.endswith("worse at dt 0.01)")
    assert "not more robust" in verdict and "dt 0.001 +0.40 [" in verdict
    better_at_one = {0.01: reference[0.01], 0.001: worse_and_better[0.001]}
    verdict = compare.step_verdict(better_at_one, reference)
    assert verdict.startswith("dt 0.01 +0.00 [") and "] unresolved; dt 0.001 +0.40 [" in verdict
    assert verdict.endswith("] better: more robust (no worse at any dt, better at dt 0.001)")
    assert compare.step_verdict(reference, reference).endswith(": undecided (no dt resolved)")
    assert compare.step_verdict({0.01: reference[0.01]}, reference) == "not at every dt of the reference: no verdict"


def test_one_algorithms_table_and_page(tmp_path):
    """--algorithms DDPG keeps DDPG's rows and the probabilities that involve it, with the numbers of the whole
    table; --page writes the table between the page's markers and leaves the rest of the page as it was."""
    from analysis import plot, scores, tables

    for seed, shift in ((1, 0.0), (2, 20.0)):
        write_run(tmp_path / "runs", "dau_continuous.py", 0.01, seed, [-1400, -600, -160 + shift])
        write_run(tmp_path / "runs", "ddpg_baseline.py", 0.01, seed, [-1400, -500, -300 + shift], scaled=False)
    page = tmp_path / "page.md"
    markers = tables.page_markers(tmp_path / "runs")  # this folder's table; another folder's stays as it is
    other = tables.page_markers(tmp_path / "other_runs")
    page.write_text(
        f"# A page\n\n{markers[0]}\nold table\n{markers[1]}\n\n{other[0]}\nother table\n{other[1]}\n\nAfter.\n"
    )
    options = plot.Options(runs=tmp_path / "runs", out=tmp_path / "ddpg.png", algorithms=("DDPG",), page=page)
    plot.main(options)
    full = tables.robustness_table(scores.load_runs(tmp_path / "runs")).splitlines()
    table = tables.robustness_table(scores.load_runs(tmp_path / "runs"), selected=("DDPG",)).splitlines()
    assert any(line.startswith("| DAU |") for line in full) and not any(line.startswith("| DAU |") for line in table)
    assert [line for line in table if line.startswith("|")] == [
        line for line in full if line.startswith(("| algorithm", "|---", "| DDPG", "| P(DAU > DDPG"))
    ]
    text = page.read_text()
    assert text.startswith("# A page\n\n") and text.endswith(
        f"{markers[1]}\n\n{other[0]}\nother table\n{other[1]}\n\nAfter.\n"
    )
    assert "\n".join(table) in text and "old table" not in text
    assert (tmp_path / "ddpg.png").read_bytes().startswith(b"\x89PNG")
    page.write_text("no markers\n")
    with pytest.raises(SystemExit, match="must be a file with one line"):
        plot.main(options)


def test_the_spread_of_one_command_over_every_run_on_file(tmp_path, monkeypatch):
    """spread.py gathers one (algorithm, env, dt) from several folders (the same seed in two folders is two runs, a
    folder named twice counts once), leaves out other dts, algorithms and unfinished runs, and gives each run's last,
    final and best evaluation, the mean with its interval and how many runs end above each threshold; --page writes
    it between its markers. A missing folder, or runs of another budget, stop it with what is wrong."""
    from analysis import spread

    write_run(tmp_path / "grid", "dau_continuous.py", 0.01, 1, [-1400, -200, -100, -300])
    write_run(tmp_path / "grid", "dau_continuous.py", 0.01, 2, [-1400, -900, -800, -700])
    write_run(tmp_path / "grid", "dau_continuous.py", 0.001, 1, [-1400, 0, 0, 0])  # another dt
    write_run(tmp_path / "grid", "ddpg_baseline.py", 0.01, 1, [-1400, 0, 0, 0])  # another algorithm
    unfinished = write_run(tmp_path / "grid", "dau_continuous.py", 0.01, 3, [-1400, 0, 0, 0])
    (unfinished / "run.json").write_text(json.dumps({**json.loads((unfinished / "run.json").read_text()),
                                                     "completed": False}))  # fmt: skip
    card = write_run(tmp_path / "card", "dau_continuous.py", 0.01, 1, [-1400, -300, -150, -150], wall_time=120.0)
    (card / "run.json").write_text(json.dumps({**json.loads((card / "run.json").read_text()),
                                               "machine": {"torch_threads": 2}}))  # fmt: skip
    page = tmp_path / "page.md"
    page.write_text(f"# Headline\n\n{spread.PAGE_MARKERS[0]}\nold spread\n{spread.PAGE_MARKERS[1]}\n\nAfter.\n")
    monkeypatch.chdir(tmp_path)
    options = spread.Options(runs=(Path("grid"), Path("card"), tmp_path / "grid"), env_id="Pendulum-v1", dt=0.01,
                             last=2, thresholds=(-500.0, -200.0), out=tmp_path / "spread.png", page=page)  # fmt: skip
    spread.main(options)
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ")][1:]
    assert rows == ["| grid | 1 | — | 1.0 | -300 | -200 | -100 |", "| grid | 2 | — | 1.0 | -700 | -750 | -700 |",
                    "| card | 1 | 2 | 2.0 | -150 | -150 | -150 |"]  # fmt: skip
    low, high = robustness.interval((np.array([-200.0, -750.0, -150.0]),), np.mean)
    assert (f"Final return over 3 runs: mean -367 [{low:.0f}, {high:.0f}], median -200, from -750 to -150. "
            "Runs that end above -500: 2 of 3; -200: 1 of 3.") in page.read_text()  # fmt: skip
    assert page.read_text().startswith("# Headline\n\n") and page.read_text().endswith("\n\nAfter.\n")
    assert "old spread" not in page.read_text() and (tmp_path / "spread.png").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(SystemExit, match="no finished DAU runs of Pendulum-v1 at dt 0.002"):
        spread.main(dataclasses.replace(options, dt=0.002))
    with pytest.raises(SystemExit, match="--runs elsewhere is not a folder"):
        spread.main(dataclasses.replace(options, runs=(Path("grid"), Path("elsewhere"))))
    write_run(tmp_path / "longer", "dau_continuous.py", 0.01, 1, [-1400, -150], total_time=1200.0)
    with pytest.raises(SystemExit, match=r"differ in \(total_time, eval_every\)"):
        spread.main(dataclasses.replace(options, runs=(Path("grid"), Path("longer"))))
    page.write_text("no markers\n")
    with pytest.raises(SystemExit, match="must be a file with one line"):
        spread.main(options)


def test_the_time_left_to_an_episodes_end_on_a_hand_made_memory():
    """analysis/failure_boundary.py: two envs, rows in the order they were made (step by step, env 0 then env 1).
    Env 0 fails at its 3rd step and runs on; env 1 is truncated at its 2nd step (its next row starts elsewhere) and
    fails at its 4th. The rows after an env's last end have no known end."""
    from analysis import failure_boundary

    dt, steps = 0.5, 5
    obs = np.zeros((steps * 2, 1))
    next_obs = np.zeros((steps * 2, 1))
    for step in range(steps):
        for env in range(2):
            obs[2 * step + env] = 10 * env + step  # each env's next row starts from the last row's next_obs
            next_obs[2 * step + env] = 10 * env + step + 1
    next_obs[2 * 1 + 1] = 99  # env 1's 2nd step: truncated (its next row starts from 12, not 99)
    terminated = np.zeros(steps * 2)
    terminated[2 * 2 + 0] = terminated[2 * 3 + 1] = 1
    seconds, failure, known = failure_boundary.time_left(obs, terminated, next_obs, num_envs=2, dt=dt)
    assert seconds[0::2][:3].tolist() == [1.5, 1.0, 0.5] and failure[0::2][:3].all() and known[0::2][:3].all()
    assert not known[0::2][3:].any()  # env 0 after its failure: no end in the memory
    assert seconds[1::2][:4].tolist() == [1.0, 0.5, 1.0, 0.5] and known[1::2][:4].all() and not known[1::2][4]
    assert failure[1::2][:4].tolist() == [False, False, True, True]
    seconds, failure = np.array([0.01, 0.05, 0.06, 0.5, 1.5, 2.5, 0.3]), np.array([1, 1, 1, 1, 1, 1, 0], bool)
    groups = failure_boundary.group_of(seconds, failure)
    assert groups.tolist() == [0, 1, 2, 3, 5, 6, 6]  # (0, 0.01], (0.01, 0.05], ..., (1, 2], then the rest twice


def test_the_failure_boundary_table_and_figure_from_a_runs_checkpoint(tmp_path):
    from analysis import failure_boundary

    run_script("dau_discrete.py", "--env-id", "CartPole-v1", "--dt", "0.01", "--num-envs", "4", "--num-eval-envs", "2",
               "--updates-per-round", "2", "--batch-size", "16", "--total-time", "8", "--eval-every", "8",
               "--checkpoint-every", "8", cwd=tmp_path)  # fmt: skip
    (run_dir,) = (tmp_path / "runs").glob("*__*")
    # Its TD errors are Alg. 1's, as the script's update computes them; A's gradient comes from the rows whose
    # action is not the greedy one only.
    args, value, advantage, fields = failure_boundary.load_run(run_dir)
    _, tds, exploring = failure_boundary.row_numbers(args, value, advantage, fields)
    batch = [torch.from_numpy(field) for field in fields]
    batch = [batch[0], batch[1].long(), batch[2][:, 0], batch[3][:, 0], batch[4]]
    optimizer = torch.optim.SGD([*value.parameters(), *advantage.parameters()], lr=0.0)
    stats = dau_discrete.update(batch, value, advantage, optimizer, args["dt"], args["gamma"])
    assert stats[0].item() == pytest.approx(float(np.mean(tds.astype(np.float64) ** 2)), rel=1e-4)
    greedy = [field[~exploring] for field in batch]
    dau_discrete.update(greedy, value, advantage, optimizer, args["dt"], args["gamma"])
    assert all(parameter.grad.abs().max() == 0 for parameter in advantage.net.parameters())
    assert 0 < exploring.mean() < 0.5
    result = failure_boundary.summary(run_dir)
    # The same numbers from the rows walked here, env by env: each row's steps left to its episode's last step (a
    # termination, or a truncation: the env's next row does not start from this row's s'), the rows after an env's
    # last episode end left out. Fails on a group edge off by a step, a share over the wrong rows (A's over all rows,
    # not only those not greedy) and percentiles of td instead of |td / dt|.
    obs, _, _, terminated, next_obs = fields
    num_envs, steps_total = 4, len(obs) // 4
    steps_left, failed = np.full(len(obs), -1), np.zeros(len(obs), dtype=bool)
    for env in range(num_envs):
        episode = []
        for step in range(steps_total):
            row = step * num_envs + env
            episode.append(row)
            truncated = step + 1 < steps_total and not np.array_equal(next_obs[row], obs[row + num_envs])
            if terminated[row, 0] or truncated:
                for left, member in enumerate(reversed(episode), start=1):
                    steps_left[member], failed[member] = left, bool(terminated[row, 0])
                episode = []
    known = steps_left > 0
    rates = np.abs(tds[: len(obs)]) / 0.01
    not_greedy_rates = rates * exploring[: len(obs)]  # A's gradient: the rows whose action is not the greedy one
    assert result["dt"] == 0.01 and result["rows"] == known.sum()
    edges = [0, 1, 5, 20, 50, 100, 200]  # the groups' edges in steps at dt 0.01: 0, 0.01, 0.05, ..., 2 s
    groups = {f"{low / 100:g}-{high / 100:g} s": known & failed & (steps_left > low) & (steps_left <= high)
              for low, high in zip(edges[:-1], edges[1:], strict=True)}  # fmt: skip
    groups["rest"] = known & ~np.any(list(groups.values()), axis=0)
    assert sum(members.any() for members in groups.values()) >= 4  # rows in several groups, "rest" among them
    for name, members in groups.items():
        group = result["groups"][name]
        assert group["rows"] == members.sum(), name
        assert group["value_share"] == pytest.approx(rates[members].sum() / rates[known].sum(), abs=1e-6), name
        assert group["advantage_share"] == pytest.approx(
            not_greedy_rates[members].sum() / not_greedy_rates[known].sum(), abs=1e-6
        ), name
    assert result["td_rate_percentiles"] == pytest.approx(np.percentile(rates[known], [50, 90, 99]), rel=1e-5)
    text = failure_boundary.table([result])
    assert "| 0.01 | 1 | 0.2-0.5 s |" in text and "| rest |" in text
    failure_boundary.draw([run_dir], tmp_path / "boundary.png")
    assert (tmp_path / "boundary.png").stat().st_size > 10_000


def test_compare_sets_a_baselines_probe_beside_the_baseline_and_leaves_the_other_methods_out(tmp_path):
    """compare.py with --reference-algorithm DDPG-unscaled (issue 84's probes): the variants' runs are DDPG's, the
    reference folder's DAU runs beside them are left out, and a folder of DAU runs alone has none to compare."""
    from analysis import compare

    for seed, shift in ((1, 0.0), (2, 20.0)):
        write_run(tmp_path / "kept", "ddpg_baseline.py", 0.01, seed, [-1400, -700 + shift, -600 + shift], scaled=False)
        write_run(tmp_path / "kept", "dau_continuous.py", 0.01, seed, [-1400, -200 + shift, -150 + shift])
        write_run(tmp_path / "probe", "ddpg_baseline.py", 0.01, seed, [-1400, -300 + shift, -300 + shift],
                  scaled=False, tau=0.9)  # fmt: skip
    options = compare.Options(variants=(tmp_path / "probe",), labels=("tau 0.9",), reference=tmp_path / "kept",
                              reference_algorithm="DDPG-unscaled", reference_label="DDPG", env_id="Pendulum-v1",
                              total_time=600.0)  # fmt: skip
    rows = compare.comparison_table(options).splitlines()
    assert rows[2].startswith("| DDPG (n=2) | -590.0 [-600.0, -580.0] |")  # not DAU's -140
    assert rows[3].startswith("| tau 0.9 (n=2) | -290.0 [-300.0, -280.0] |")
    unnamed = compare.comparison_table(dataclasses.replace(options, reference_label="")).splitlines()
    assert unnamed[2].startswith("| DDPG-unscaled (n=2) |") and unnamed[4].startswith("| P(tau 0.9 > DDPG-unscaled) |")
    with pytest.raises(SystemExit, match="each folder needs DDPG runs"):
        compare.comparison_table(dataclasses.replace(options, variants=(tmp_path / "kept",), labels=("DAU runs",),
                                                     reference_algorithm="DDPG-scaled"))  # fmt: skip
