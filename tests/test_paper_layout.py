"""analysis/paper_layout.py draws kept runs in the paper's five panels, each to our budget, the paper's axis said."""

from helpers import ROOT

from analysis import paper_layout

RESULTS = ROOT / "docs" / "results"


def test_the_layout_draws_five_panels_from_kept_runs(tmp_path):
    results, cartpole = tmp_path / "results", tmp_path / "cartpole"
    results.mkdir()
    cartpole.mkdir()
    for run in (
        "Pendulum-v1__dau_continuous__dt0.01__1__1795425052",
        "Pendulum-v1__ddpg_baseline__dt0.01__1__1795425061",  # the unscaled actor's old rate (issue 84): not drawn
        "HalfCheetah-v4__ddpg_baseline__dt0.05__1__1795437861",  # the old rate, drawn: no DDPG-unscaled grid
    ):
        (results / run).symlink_to(RESULTS / run)
    new_default = "pendulum_ddpg_probes/policy_lr_01/Pendulum-v1__ddpg_baseline__dt0.01__1__1796165781_2"
    (results / "new_default").symlink_to(RESULTS / new_default)
    run = "CartPole-v1__dau_discrete__dt0.01__1__1795573002"
    (cartpole / run).symlink_to(RESULTS / "cartpole_12600" / run)
    panels, left_out = paper_layout.kept_runs(results, cartpole)
    assert [panel.env_id for panel, _ in panels] == [panel.env_id for panel in paper_layout.PANELS]
    runs = dict((panel.env_id, runs) for panel, runs in panels)
    assert set(runs["Pendulum-v1"]) == {"DAU", "DDPG-unscaled"} and set(runs["CartPole-v1"]) == {"DAU"}
    assert set(runs["HalfCheetah-v4"]) == {"DDPG-unscaled+policy_learning_rate=0.03"}
    assert not runs["Ant-v4"] and left_out["Pendulum-v1"] == ["DDPG-unscaled+policy_learning_rate=0.02"]
    figure = paper_layout.layout(panels)
    drawn = [ax for ax in figure.axes if ax.get_title()]
    assert [ax.get_title() for ax in drawn] == ["Pendulum", "Bipedal Walker", "Cartpole", "Ant", "Cheetah"]
    pendulum, _, cart, ant, _ = drawn
    assert len(pendulum.lines) == 2 and len(cart.lines) == 1 and not ant.lines
    # each panel ends at our budget (Pendulum 1800 s, CartPole 12600 s) and says the paper's axis
    assert pendulum.get_xlim()[1] == 0.5 and cart.get_xlim()[1] == 3.5
    notes = [text.get_text() for ax in drawn for text in ax.texts]
    assert notes[0] == "ours 0.5 h, 1 seed; paper's axis 1.7 h \u2192"
    assert notes[2] == "ours 3.5 h, 1 seed; paper's axis the same, 3.5 h"
    assert notes[3] == "no kept runs; paper's axis 140 h"
    assert notes[4] == "ours 8.3 h, 1 seed; paper's axis 140 h \u2192\nDDPG's old actor rate, 0.03 dt0"
    # the colour bars, the baseline's above DAU's
    bars = [ax for ax in figure.axes if ax.images]
    assert [ax.get_ylabel() for ax in bars] == ["DDPG / DQN", "DAU"]
    out = tmp_path / "layout.png"
    figure.savefig(out, dpi=40)
    assert out.stat().st_size > 0
