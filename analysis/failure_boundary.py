"""What discrete DAU's advantage learns where an episode ends (issue 56, part 1), from a run's last checkpoint.

    python -m analysis.failure_boundary --runs runs/CartPole-v1__dau_discrete__dt0.01__1__* --out table.md
    python -m analysis.failure_boundary --runs runs/*dt0.01__1__* runs/*dt0.0005__1__* --figure boundary.png

Reads checkpoint.pt (--checkpoint-every; the one a run writes at its end): the final networks and the replay memory,
which holds every transition of a run whose --buffer-time exceeds its --total-time, in the order the envs made them.
Each row gets the physical time left in its episode (from the row's step to the episode's last step: a termination,
or a time-limit truncation, where the next row of its env does not start from the row's next observation); rows
after their env's last episode end are left out (their end is not in the memory). For the rows whose episode ended
in a termination, grouped by the time left to it, and for the rest (more than 2 s before one, or in an episode that
was truncated), the table gives:

- |A| of the non-greedy action, |Abar(s, 0) - Abar(s, 1)| with two actions: the advantage's scale at that state;
- |td / dt|, the TD rate (value per second) by which each row's update multiplies V's and A's gradients (Alg. 1),
  with the final networks: td = V(s) + dt A(s, a) - (r dt + (1 - d) gamma^dt V(s'));
- each group's share of the summed |td / dt| over all rows: V's gradient, which every row moves;
- each group's share of the summed |td / dt| over the rows whose action is not the final network's greedy one: A's
  gradient. A(s, a) = Abar(s, a) - max Abar(s, .) has no gradient where the action taken is the greedy one (the two
  terms are one output), so A learns only from the other rows, and the share of those rows in the group;
- and per dt, the 50th, 90th and 99th percentiles of |td / dt| over all rows.

The figure: for the first run of each dt, the greedy action and log10 |A| over the pole's angle and angular velocity
(cart at rest at 0), with the states from which the episode failed within 2 s.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import torch
import tyro

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import dau_discrete  # noqa: E402  (the script defines the networks: run from the repository root)
from analysis.plot import save_figure  # noqa: E402
from harness.checkpoint import CHECKPOINT, load_checkpoint  # noqa: E402

# Physical seconds before a termination: the groups (0, 0.01], (0.01, 0.05], ..., (1, 2]; "rest" is all else. The
# first is the last step at dt 0.01 and the last 20 at dt 0.0005: where one action moves the angle by O(dt^2) only.
EDGES = (0.0, 0.01, 0.05, 0.2, 0.5, 1.0, 2.0)
PERCENTILES = (50, 90, 99)  # of |td / dt| over all rows: the scale a clip in value units per second would cut at
REST = "rest"


@dataclass
class Options:
    runs: tuple[Path, ...]
    """run folders of dau_discrete.py, each with the checkpoint.pt of its end (--checkpoint-every)"""
    out: Path | None = None
    """write the table (markdown) here; None: print it"""
    figure: Path | None = None
    """draw the state-space picture (PNG) of the first run of each dt"""


def time_left(obs, terminated, next_obs, num_envs, dt):
    """For replay rows in the order the envs made them (row k * num_envs + e: env e's k-th step), the physical seconds
    from each row's step to the end of its episode (its last step included: dt for that step), whether that end is a
    termination, and whether the end is in the memory (False for rows after their env's last end). An episode ends
    at a termination, or at a truncation: where the next row of the env does not start from the row's next_obs."""
    rows = len(terminated) // num_envs * num_envs  # whole steps of all envs
    shape = (rows // num_envs, num_envs)
    done = terminated[:rows].reshape(shape).astype(bool)
    following = obs[num_envs:rows].reshape(shape[0] - 1, num_envs, -1)
    truncated = np.zeros(shape, bool)
    truncated[:-1] = np.any(next_obs[: rows - num_envs].reshape(shape[0] - 1, num_envs, -1) != following, axis=-1)
    truncated &= ~done
    ends = done | truncated
    seconds, failure, known = np.zeros(shape), np.zeros(shape, bool), np.zeros(shape, bool)
    steps_left = np.zeros(num_envs)
    ending_in_failure, seen_end = np.zeros(num_envs, bool), np.zeros(num_envs, bool)
    for step in range(shape[0] - 1, -1, -1):  # backwards: each row counts the steps to the next end of its env
        ending_in_failure = np.where(ends[step], done[step], ending_in_failure)
        seen_end |= ends[step]
        steps_left = np.where(ends[step], 1, steps_left + 1)
        seconds[step], failure[step], known[step] = steps_left * dt, ending_in_failure, seen_end
    return seconds.reshape(-1), failure.reshape(-1), known.reshape(-1)


def group_of(seconds, failure):
    """Each row's group: the index of its (EDGES[i], EDGES[i + 1]] before a termination, or len(EDGES) - 1 (REST)."""
    group = np.searchsorted(np.array(EDGES), seconds, side="left") - 1
    return np.where(failure & (seconds <= EDGES[-1]), np.clip(group, 0, len(EDGES) - 2), len(EDGES) - 1)


def load_run(run_dir):
    """The final networks and the replay memory of a dau_discrete.py run, from its checkpoint (data only: the
    harness's load_checkpoint, whose ValueError names what is wrong)."""
    checkpoint = load_checkpoint(str(run_dir), "dau_discrete.py").saved
    args, state = checkpoint["args"], checkpoint["state"]
    obs_dim = state["replay"]["fields"][0].shape[1]
    num_actions = state["advantage"]["net.6.bias"].shape[0]  # the last Linear of mlp()
    normalizer = dau_discrete.Normalizer(obs_dim)
    value = dau_discrete.Value(obs_dim, args["hidden_size"], normalizer)
    advantage = dau_discrete.Advantage(obs_dim, num_actions, args["hidden_size"], normalizer)
    for name, module in (("normalizer", normalizer), ("value", value), ("advantage", advantage)):
        module.load_state_dict(state[name])
    replay = state["replay"]
    if replay["size"] == replay["capacity"] and replay["position"] != 0:
        raise ValueError(f"{run_dir}: its replay memory wrapped around: the rows' order is not the envs'")
    fields = [field[: replay["size"]].numpy() for field in replay["fields"]]
    return args, value, advantage, fields


def row_numbers(args, value, advantage, fields, chunk=1 << 16):
    """Per row, with the final networks: |A| of the non-greedy action, the TD error of Alg. 1 (td, in value units),
    and whether the action taken is not the greedy one (the rows A's gradient comes from)."""
    obs, action, reward, terminated, next_obs = fields
    dt, gamma = args["dt"], args["gamma"]
    gaps, tds, exploring = [], [], []
    with torch.no_grad():
        for start in range(0, len(obs), chunk):
            part = slice(start, start + chunk)
            state, following = torch.from_numpy(obs[part]), torch.from_numpy(next_obs[part])
            taken_action = torch.from_numpy(action[part]).long()
            advantages = advantage(state)
            best = advantages.max(1).values
            taken = advantages.gather(1, taken_action).squeeze(1) - best  # Abar(s, a) - max Abar(s, .)
            gaps.append((best - advantages.min(1).values).numpy())
            alive = 1 - torch.from_numpy(terminated[part, 0])
            target = torch.from_numpy(reward[part, 0]) * dt + alive * gamma**dt * value(following)
            tds.append((value(state) + dt * taken - target).numpy())
            exploring.append((taken_action.squeeze(1) != advantages.argmax(1)).numpy())
    return np.concatenate(gaps), np.concatenate(tds), np.concatenate(exploring)


def group_names():
    return [f"{low:g}-{high:g} s" for low, high in zip(EDGES[:-1], EDGES[1:], strict=True)] + [REST]


def summary(run_dir):
    """{"env_id", "dt", "seed", "rows", and per group: rows, median |A|, median |td / dt|, V's and A's shares of the
    summed |td / dt|, the share of rows not greedy; the shares within 1 s of a failure; |td / dt|'s percentiles}."""
    args, value, advantage, fields = load_run(run_dir)
    seconds, failure, known = time_left(fields[0], fields[3][:, 0], fields[4], args["num_envs"], args["dt"])
    count = len(seconds)
    gaps, tds, exploring = row_numbers(args, value, advantage, [field[:count] for field in fields])
    groups = group_of(seconds, failure)[known]
    gaps, rates, exploring = gaps[known], np.abs(tds[known]) / args["dt"], exploring[known]
    advantage_rates = rates * exploring  # A's gradient: the rows whose action is not the greedy one
    result = {"env_id": args["env_id"], "dt": args["dt"], "seed": args["seed"], "rows": int(known.sum()), "groups": {}}
    for index, name in enumerate(group_names()):
        members = groups == index
        result["groups"][name] = {
            "rows": int(members.sum()),
            "abs_advantage": float(np.median(gaps[members])) if members.any() else float("nan"),
            "td_rate": float(np.median(rates[members])) if members.any() else float("nan"),
            "value_share": float(rates[members].sum() / rates.sum()),
            "advantage_share": float(advantage_rates[members].sum() / advantage_rates.sum()),
            "exploring": float(exploring[members].mean()) if members.any() else float("nan"),
        }
    within_one_second = groups < EDGES.index(1.0)
    result["value_share_within_1s"] = float(rates[within_one_second].sum() / rates.sum())
    result["advantage_share_within_1s"] = float(advantage_rates[within_one_second].sum() / advantage_rates.sum())
    result["rows_within_1s"] = float(within_one_second.mean())
    result["td_rate_percentiles"] = [float(value) for value in np.percentile(rates, PERCENTILES)]
    return result


def table(summaries):
    """Markdown: one row per group and dt, medians over the runs of that dt (each run's own median first)."""
    by_dt = {}
    for result in summaries:
        by_dt.setdefault(result["dt"], []).append(result)
    td = "\\|td / dt\\|"
    lines = [f"| dt | seeds | time to the failure | rows | median \\|A\\| | median {td} | V's gradient (share of sum "
             f"{td}) | rows not greedy | A's gradient (share of sum {td} where not greedy) |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dt in sorted(by_dt, reverse=True):
        runs = by_dt[dt]
        seeds = ",".join(str(run["seed"]) for run in sorted(runs, key=lambda run: run["seed"]))
        for name in group_names():
            cell = {key: np.median([run["groups"][name][key] for run in runs])
                    for key in ("abs_advantage", "td_rate", "value_share", "exploring", "advantage_share")}  # fmt: skip
            rows = np.median([run["groups"][name]["rows"] / run["rows"] for run in runs])
            lines.append(f"| {dt:g} | {seeds} | {name} | {rows:.2%} | {cell['abs_advantage']:.3g} | "
                         f"{cell['td_rate']:.3g} | {cell['value_share']:.1%} | {cell['exploring']:.2%} | "
                         f"{cell['advantage_share']:.1%} |")  # fmt: skip
    percentiles = " / ".join(f"{percentile}th" for percentile in PERCENTILES)
    lines += ["", f"| dt | seeds | rows within 1 s of a failure | their share of V's gradient | of A's | {td}, "
              f"{percentiles} percentile of all rows |", "|---|---|---|---|---|---|"]  # fmt: skip
    for dt in sorted(by_dt, reverse=True):
        runs = by_dt[dt]
        seeds = ",".join(str(run["seed"]) for run in sorted(runs, key=lambda run: run["seed"]))
        shares = [np.median([run[key] for run in runs])
                  for key in ("rows_within_1s", "value_share_within_1s", "advantage_share_within_1s")]  # fmt: skip
        levels = " / ".join(f"{value:.3g}" for value in np.median([run["td_rate_percentiles"] for run in runs], axis=0))
        lines.append(f"| {dt:g} | {seeds} | {shares[0]:.2%} | {shares[1]:.1%} | {shares[2]:.1%} | {levels} |")
    return "\n".join(lines)


def state_space(advantage, resolution=121, angle_limit=0.21, velocity_limit=2.5):
    """The greedy action and |A| of the non-greedy action over (pole angle, angular velocity), cart at rest at 0."""
    angle, velocity = np.meshgrid(np.linspace(-angle_limit, angle_limit, resolution),
                                  np.linspace(-velocity_limit, velocity_limit, resolution))  # fmt: skip
    obs = np.stack([np.zeros_like(angle), np.zeros_like(angle), angle, velocity], -1).reshape(-1, 4)
    with torch.no_grad():
        advantages = advantage(torch.as_tensor(obs, dtype=torch.float32))
    greedy = advantages.argmax(1).reshape(angle.shape).numpy()
    gap = (advantages.max(1).values - advantages.min(1).values).reshape(angle.shape).numpy()
    return angle, velocity, greedy, gap


def draw(run_dirs, path, points=4000):
    """The figure: a row per run (one per dt), the greedy action and log10 |A|, with the states of the replay memory
    from which the episode failed within 2 s."""
    figure, axes = plt.subplots(len(run_dirs), 2, figsize=(10, 4.2 * len(run_dirs)), squeeze=False)
    rng = np.random.default_rng(0)
    for row, run_dir in zip(axes, run_dirs, strict=True):
        args, _, advantage, fields = load_run(run_dir)
        seconds, failure, known = time_left(fields[0], fields[3][:, 0], fields[4], args["num_envs"], args["dt"])
        before = np.flatnonzero(known & failure & (seconds <= 2.0))
        shown = fields[0][rng.choice(before, min(points, len(before)), replace=False)] if len(before) else None
        angle, velocity, greedy, gap = state_space(advantage)
        extent = (angle.min(), angle.max(), velocity.min(), velocity.max())
        row[0].imshow(greedy, origin="lower", extent=extent, aspect="auto", cmap="coolwarm", vmin=0, vmax=1)
        image = row[1].imshow(np.log10(gap + 1e-6), origin="lower", extent=extent, aspect="auto", cmap="viridis")
        figure.colorbar(image, ax=row[1], label="log10 |A| of the non-greedy action")
        for axis, title in zip(row, ("greedy action (blue: push left, red: push right)", "log10 |A|"), strict=True):
            if shown is not None:
                axis.scatter(shown[:, 2], shown[:, 3], s=1, c="k", alpha=0.3, label="failed within 2 s")
            axis.set(xlim=extent[:2], ylim=extent[2:], xlabel="pole angle (rad)", ylabel="angular velocity (rad/s)",
                     title=f"dt {args['dt']:g}, seed {args['seed']}: {title}")  # fmt: skip
        row[0].legend(loc="upper right", markerscale=8)
    save_figure(figure, path)


def main(options):
    missing = [str(run) for run in options.runs if not (run / CHECKPOINT).is_file()]
    if missing:
        sys.exit(f"error: no {CHECKPOINT} in {', '.join(missing)}: run with --checkpoint-every")
    try:
        summaries = [summary(run) for run in options.runs]
    except ValueError as error:
        sys.exit(f"error: {error}")
    other = sorted({result["env_id"] for result in summaries} - {"CartPole-v1"})
    if options.figure and other:  # the figure's axes are CartPole's pole angle and angular velocity
        sys.exit(f"error: --figure draws CartPole-v1's state space; these runs are of {', '.join(other)}")
    text = table(summaries)
    if options.out:
        options.out.write_text(text + "\n")
    else:
        print(text)
    if options.figure:
        first = {}
        for run, result in zip(options.runs, summaries, strict=True):
            first.setdefault(result["dt"], run)
        draw([first[dt] for dt in sorted(first, reverse=True)], options.figure)


if __name__ == "__main__":
    main(tyro.cli(Options))
