"""dau_discrete_beyond_paper.py: dau_discrete.py plus options the paper does not use. With its defaults it is the
paper's script, number for number; each option does what its help says (--value-update: test_discrete.py's
paper's-deltas test; --exploration ou-scaled's resume: test_resume.py)."""

import pytest
import torch
from helpers import TINY, read_evals, run_script

import dau_discrete_beyond_paper as beyond

SHORT = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "4", "--checkpoint-every", "100"]


def logged(cwd):
    """evals.csv without its wall-time column, diagnostics.csv whole, and the run's checkpoint."""
    (run_dir,) = (cwd / "runs").glob("*__*")
    evals = [{name: value for name, value in row.items() if name != "wall_time"} for row in read_evals(cwd)]
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    return evals, (run_dir / "diagnostics.csv").read_text(), checkpoint


def test_with_its_defaults_the_variant_is_the_papers_script(tmp_path):
    """The same short run of dau_discrete.py and of the variant with its defaults: the same evals.csv (wall times
    aside) and diagnostics.csv, and the variant's checkpoint holds the paper's script's state and no more."""
    logs = {}
    for script in ("dau_discrete.py", "dau_discrete_beyond_paper.py"):
        (tmp_path / script).mkdir()
        run_script(script, *SHORT, cwd=tmp_path / script)
        logs[script] = logged(tmp_path / script)
    (paper_evals, paper_diagnostics, paper), (evals, diagnostics, variant) = logs.values()
    assert len(paper_evals) == 5 and len(paper_diagnostics.splitlines()) > 5
    assert evals == paper_evals and diagnostics == paper_diagnostics
    assert variant["state"].keys() == paper["state"].keys()
    torch.testing.assert_close(variant["state"]["advantage"], paper["state"]["advantage"], rtol=0, atol=0)


def test_scaled_ou_exploration_does_not_fade_as_the_advantages_grow():
    """--exploration ou-scaled: the same actions whatever the advantages' scale (here 1 and 64), where the paper's OU
    noise (std 0.39 per action) changes fewer and fewer greedy actions; and the same as the paper's when the spread of
    the advantages over actions is 1 (advantages -1 and +1)."""
    advantages = torch.randn(2000, 2) + torch.tensor([1.0, -1.0])
    actions = {}
    for exploration in ("ou", "ou-scaled"):
        for scale in (1, 64):
            torch.manual_seed(0)
            noise, spread = beyond.OUNoise((2000, 2), 7.5, 1.5, 0.01, "cpu"), beyond.RunningSpread(7.5, 0.01, "cpu")
            actions[exploration, scale] = torch.stack(
                [beyond.explore(scale * advantages, noise, exploration, 0.0, spread.update(scale * advantages))
                 for _ in range(50)]
            )  # fmt: skip
    greedy = advantages.argmax(-1)
    changed = {key: (taken != greedy).float().mean().item() for key, taken in actions.items()}
    assert torch.equal(actions["ou-scaled", 1], actions["ou-scaled", 64])
    assert changed["ou", 64] < changed["ou", 1] / 10 and changed["ou-scaled", 64] > changed["ou", 1] > 0.02
    torch.manual_seed(0)
    unit = torch.tensor([[1.0, -1.0]]).repeat(2000, 1)
    noise, spread = beyond.OUNoise((2000, 2), 7.5, 1.5, 0.01, "cpu"), beyond.RunningSpread(7.5, 0.01, "cpu")
    scaled = beyond.explore(unit, noise, "ou-scaled", 0.0, spread.update(unit))
    torch.manual_seed(0)
    assert torch.equal(scaled, beyond.explore(unit, beyond.OUNoise((2000, 2), 7.5, 1.5, 0.01, "cpu"), "ou", 0.0))


def test_the_advantages_running_spread_has_a_physical_time_limit():
    """The spread weights the past e^(-kappa t) in physical seconds: after the advantages' spread jumps from 1 to 3,
    it reads the same 0.1 s later at dt 0.01 and 0.001."""
    readings = {}
    for dt in (0.01, 0.001):
        spread = beyond.RunningSpread(7.5, dt, "cpu")
        for _ in range(round(1 / dt)):
            spread.update(torch.tensor([[1.0, -1.0]]))
        for _ in range(round(0.1 / dt)):
            reading = spread.update(torch.tensor([[3.0, -3.0]])).item()
        readings[dt] = reading
    assert 1.5 < readings[0.01] < 2.9
    assert readings[0.001] == pytest.approx(readings[0.01], rel=0.03)


def test_value_learning_rate_sets_alpha_v_apart_from_alpha_a(tmp_path):
    """--value-learning-rate: Alg. 1's alpha_V apart from alpha_A, each times dt; alpha_V = alpha gives the run the
    default gives (one step size for both, as the paper sets them); 0 is refused before any work."""
    logs = {}
    for name, extra in (
        ("default", []),
        ("equal", ["--value-learning-rate", "0.1"]),
        ("apart", ["--value-learning-rate", "0.02"]),
    ):
        (tmp_path / name).mkdir()
        run_script("dau_discrete_beyond_paper.py", *SHORT, *extra, cwd=tmp_path / name)
        logs[name] = logged(tmp_path / name)
        groups = logs[name][2]["state"]["optimizer"]["param_groups"]
        if name == "apart":
            value_parameters = len(list(beyond.Value(4, 256, beyond.Normalizer(4)).net.parameters()))
            assert [len(group["params"]) for group in groups] == [value_parameters, value_parameters]
            assert [group["lr"] for group in groups] == pytest.approx([0.02 * 0.01, 0.1 * 0.01])
    assert logs["default"][:2] == logs["equal"][:2]
    assert logs["apart"][1] != logs["default"][1]
    result = run_script(
        "dau_discrete_beyond_paper.py", *SHORT, "--value-learning-rate", "0", cwd=tmp_path, check=False, timeout=120
    )
    assert result.returncode != 0 and "--value-learning-rate must be positive" in result.stderr
    assert not (tmp_path / "runs").exists()
