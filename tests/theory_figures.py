"""Draw the figures of docs/theory.md from the linear-quadratic test bed (about 2 minutes on 2 cores).

    python tests/theory_figures.py          # writes docs/figures/theory_*.png

1. The action gap max |Q_dt - V_dt| against dt (log-log, slope 1: Theorem 2) next to the rescaled
   advantage (Q_dt - V_dt) / dt converging onto the continuous-time A (Theorem 3).
2. The advantage that the script's DAU update learns (test_theory.learn_frozen_policy) against the
   exact A_dt, at dt 0.05, 0.01 and 0.002.
"""

import sys
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/ is no installed package: `from tests import ...` needs the root
from tests import lq_env as lq  # noqa: E402
from tests.test_theory import FROZEN_POLICY_GAMMA, GAIN, learn_frozen_policy, relative_rms_error  # noqa: E402

OUT = ROOT / "docs" / "figures"


def action_gap_figure():
    states, actions = np.meshgrid(np.linspace(-1, 1, 21), np.linspace(-3, 3, 21))
    dts = np.logspace(-4, -1, 13)
    gaps, rescaled, errors = [], [], []
    exact = lq.advantage(states, actions, GAIN)
    for dt in dts:
        gap = lq.discrete_q(states, actions, GAIN, dt) + lq.discrete_value_coefficient(GAIN, dt) * states**2
        gaps.append(np.abs(gap).max())
        rescaled.append(np.abs(gap / dt).max())
        errors.append(np.abs(gap / dt - exact).max())
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.loglog(dts, gaps, "o-", label="action gap  max |Q_dt - V_dt|: O(dt)")
    left.loglog(dts, rescaled, "^-", label="rescaled  max |(Q_dt - V_dt) / dt|: stays O(1)")
    left.loglog(dts, errors, "s-", label="max |(Q_dt - V_dt) / dt - A|: O(dt)")
    left.loglog(dts, gaps[-1] * dts / dts[-1], "k:", label="slope 1")
    left.set_xlabel("dt (s)")
    left.set_title("Q_dt collapses onto V_dt at rate dt (Theorem 2)", fontsize=10)
    left.legend(fontsize=8)
    left.grid(alpha=0.3, which="both")
    state, action_line = 0.5, np.linspace(-3, 3, 121)
    colors = plt.cm.viridis(np.linspace(0, 0.9, 4))
    for dt, color in zip((0.2, 0.1, 0.05, 0.01), colors, strict=True):
        gap = lq.discrete_q(state, action_line, GAIN, dt) + lq.discrete_value_coefficient(GAIN, dt) * state**2
        right.plot(action_line, gap / dt, color=color, label=f"(Q_dt - V_dt) / dt, dt {dt:g}")
    right.plot(action_line, lq.advantage(state, action_line, GAIN), "k--", label="A (continuous time)")
    right.axvline(-GAIN * state, color="gray", lw=0.8)
    right.set_xlabel(f"action a (state s = {state}; the policy's action -k s = {-GAIN * state:g} in gray)")
    right.set_title("...while the rescaled advantage converges to A (Theorem 3)", fontsize=10)
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(OUT / "theory_action_gap.png", dpi=110)


def learned_advantage_figure():
    gamma, dts = FROZEN_POLICY_GAMMA, (0.05, 0.01, 0.002)
    figure, axes = plt.subplots(1, len(dts), figsize=(12, 3.8), sharey=True)
    for ax, dt in zip(axes, dts, strict=True):
        states, actions, learned, _ = learn_frozen_policy(dt, gamma)
        p_dt = lq.discrete_value_coefficient(GAIN, dt, gamma=gamma)
        exact = (lq.discrete_q(states, actions, GAIN, dt, gamma=gamma) + p_dt * states**2) / dt
        error = relative_rms_error(learned, exact)
        states, actions = states.reshape(21, 21), actions.reshape(21, 21)
        learned, exact = learned.reshape(21, 21), exact.reshape(21, 21)
        colors = plt.cm.coolwarm(np.linspace(0, 1, 5))
        for row, color in zip((0, 5, 10, 15, 20), colors, strict=True):
            ax.plot(actions[row], exact[row], "--", color=color)
            ax.plot(actions[row], learned[row], color=color, label=f"s = {float(np.round(states[row, 0], 6)) + 0.0:g}")
        ax.set_title(f"dt {dt:g}: relative RMS error {error:.0%}", fontsize=10)
        ax.set_xlabel("action a")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("A(s, a): learned (solid), exact A_dt (dashed)")
    axes[0].legend(fontsize=8)
    figure.suptitle(f"DAU's update, policy frozen at a = -{GAIN:g} s, the same physical learning time at every dt")
    figure.tight_layout()
    figure.savefig(OUT / "theory_learned_advantage.png", dpi=110)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    action_gap_figure()
    learned_advantage_figure()
    print(f"figures: {OUT}/theory_action_gap.png, {OUT}/theory_learned_advantage.png")
