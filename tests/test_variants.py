"""The research variants, a paper's script plus options the paper does not use: dau_discrete_research.py (whose
options all combine), dau_discrete.py's; and dau_continuous_horizon.py, dau_continuous.py's. With their options off
each is the paper's script, number for number; each option does what its help says (--value-update:
test_discrete.py's paper's-deltas test; every option's resume: test_resume.py)."""

import copy
import json
from types import SimpleNamespace

import gymnasium as gym
import pytest
import torch
from helpers import (
    TINY,
    discrete_td,
    fixed_batch,
    flat,
    per_sample_gradient,
    profiled_script,
    read_evals,
    run_script,
)

import dau_continuous as continuous_paper
import dau_continuous_horizon as continuous_horizon
import dau_discrete as paper
import dau_discrete_research as research
import harness.args
import harness.clock

SHORT = ["--env-id", "CartPole-v1", "--dt", "0.01", *TINY, "--total-time", "4", "--checkpoint-every", "100"]


def logged(cwd):
    """evals.csv without its wall-time column, diagnostics.csv whole, and the run's checkpoint."""
    (run_dir,) = (cwd / "runs").glob("*__*")
    evals = [{name: value for name, value in row.items() if name != "wall_time"} for row in read_evals(cwd)]
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    return evals, (run_dir / "diagnostics.csv").read_text(), checkpoint


def short_run(folder, script, *extra, env_id="CartPole-v1"):
    folder.mkdir()
    run_script(script, "--env-id", env_id, *SHORT[2:], *extra, cwd=folder)
    return logged(folder)


@pytest.fixture(scope="module")
def papers_folder(tmp_path_factory):
    """The folder of dau_discrete.py's short run (its checkpoints/0.0s.pt: the networks at the start)."""
    folder = tmp_path_factory.mktemp("paper") / "run"
    short_run(folder, "dau_discrete.py")
    return folder


@pytest.fixture(scope="module")
def papers_run(papers_folder):
    """dau_discrete.py's short run: what the variants with their options off must log."""
    return logged(papers_folder)


@pytest.mark.parametrize(
    "script,extra",
    [
        ("dau_discrete_research.py", []),
        ("dau_discrete_research.py", ["--learning-rate-reference-dt", "0.01"]),  # the sqrt(dt) rule at dt = DT0
        ("dau_discrete_research.py", ["--value-horizon", "0.01"]),  # V's target over one step: n = 1
        ("dau_discrete_research.py", ["--buffer-transitions", "1000"]),  # a ring larger than the run's 400 rows
        ("dau_discrete_research.py", ["--first-round-steps", "10"]),  # the first round as long as the others
    ],
    ids=["research", "reference-dt-is-dt", "horizon-one-step", "ring-holds-the-run", "first-round-of-10"],
)
def test_with_its_defaults_the_variant_is_the_papers_script(script, extra, papers_run, tmp_path):
    """The same short run of dau_discrete.py and of the variant with its defaults: the same evals.csv (wall times
    aside) and diagnostics.csv, and the variant's checkpoint holds the paper's script's state and no more. The
    sqrt(dt) rule with its reference step at the run's dt, V's target over a horizon of one step (its replay
    memory's rows followed env by env, its batches carrying the rows ahead), a fixed ring of transitions that holds
    every transition the run collects, and a first round as long as the others (its updates from inside the step
    loop), are Alg. 1 bit for bit."""
    paper_evals, paper_diagnostics, paper = papers_run
    evals, diagnostics, variant = short_run(tmp_path / "variant", script, *extra)
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
            noise, spread = research.OUNoise((2000, 2), 7.5, 1.5, 0.01, "cpu"), research.RunningSpread(7.5, 0.01, "cpu")
            actions[exploration, scale] = torch.stack(
                [research.explore(scale * advantages, noise, exploration, 0.0, spread.update(scale * advantages))
                 for _ in range(50)]
            )  # fmt: skip
    greedy = advantages.argmax(-1)
    changed = {key: (taken != greedy).float().mean().item() for key, taken in actions.items()}
    assert torch.equal(actions["ou-scaled", 1], actions["ou-scaled", 64])
    assert changed["ou", 64] < changed["ou", 1] / 10 and changed["ou-scaled", 64] > changed["ou", 1] > 0.02
    torch.manual_seed(0)
    unit = torch.tensor([[1.0, -1.0]]).repeat(2000, 1)
    noise, spread = research.OUNoise((2000, 2), 7.5, 1.5, 0.01, "cpu"), research.RunningSpread(7.5, 0.01, "cpu")
    scaled = research.explore(unit, noise, "ou-scaled", 0.0, spread.update(unit))
    torch.manual_seed(0)
    assert torch.equal(scaled, research.explore(unit, research.OUNoise((2000, 2), 7.5, 1.5, 0.01, "cpu"), "ou", 0.0))


def test_the_advantages_running_spread_has_a_physical_time_limit():
    """The spread weights the past e^(-kappa t) in physical seconds: after the advantages' spread jumps from 1 to 3,
    it reads the same 0.1 s later at dt 0.01 and 0.001."""
    readings = {}
    for dt in (0.01, 0.001):
        spread = research.RunningSpread(7.5, dt, "cpu")
        for _ in range(round(1 / dt)):
            spread.update(torch.tensor([[1.0, -1.0]]))
        for _ in range(round(0.1 / dt)):
            reading = spread.update(torch.tensor([[3.0, -3.0]])).item()
        readings[dt] = reading
    assert 1.5 < readings[0.01] < 2.9
    assert readings[0.001] == pytest.approx(readings[0.01], rel=0.03)


@pytest.mark.slow
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
        run_script("dau_discrete_research.py", *SHORT, *extra, cwd=tmp_path / name)
        logs[name] = logged(tmp_path / name)
        groups = logs[name][2]["state"]["optimizer"]["param_groups"]
        if name == "apart":
            value_parameters = len(list(research.Value(4, 256, research.Normalizer(4)).net.parameters()))
            assert [len(group["params"]) for group in groups] == [value_parameters, value_parameters]
            assert [group["lr"] for group in groups] == pytest.approx([0.02 * 0.01, 0.1 * 0.01])
    assert logs["default"][:2] == logs["equal"][:2]
    assert logs["apart"][1] != logs["default"][1]
    result = run_script(
        "dau_discrete_research.py", *SHORT, "--value-learning-rate", "0", cwd=tmp_path, check=False, timeout=120
    )
    assert result.returncode != 0 and "--value-learning-rate must be positive" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_the_sqrt_dt_rule_sets_the_learning_rates_from_the_reference_step(papers_run, tmp_path):
    """--learning-rate-reference-dt DT0: alpha * sqrt(dt * DT0) (at dt 0.01 and DT0 0.04, twice alpha * dt), another
    run than the paper's; a reference step of 0 is refused before any work."""
    evals, diagnostics, variant = short_run(tmp_path / "variant", "dau_discrete_research.py",
                                            "--learning-rate-reference-dt", "0.04")  # fmt: skip
    assert [group["lr"] for group in variant["state"]["optimizer"]["param_groups"]] == pytest.approx([0.1 * 0.02])
    assert diagnostics != papers_run[1]
    for flag, value, message in (
        ("--learning-rate-reference-dt", "0", "--learning-rate-reference-dt must be positive"),
        ("--terminal-rows", "-1", "--terminal-rows and --weight-decay must be >= 0"),
    ):
        result = run_script("dau_discrete_research.py", *SHORT, flag, value, cwd=tmp_path, check=False, timeout=120)
        assert result.returncode != 0 and message in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_fixed_ring_holds_n_transitions_and_differs_from_the_physical_memory_only_where_it_wraps(
    papers_run, tmp_path
):
    """--buffer-transitions N: a ring of N transitions, which wraps once the run collects more (here 80 of 400: another
    run than the paper's), and is the paper's script's run with --buffer-time of as many rows (0.8 s: 80), wraps
    included. On CartPole at 1800 s the appendix's 1000000 and the scripts' 10000 s hold the same rows at dt 0.002 and
    coarser (all of the run's: the same run, as the test above shows for a ring larger than the run), and the ring
    holds less at dt 0.001 and 0.0005 (1000 and 500 s); at 12600 s the two differ below dt 0.01, and at dt 0.01 both
    hold 1000000 rows, which wrap: the same run. A ring smaller than a batch is refused before any work."""
    evals, diagnostics, variant = short_run(tmp_path / "ring", "dau_discrete_research.py", "--buffer-transitions", "80")
    assert variant["state"]["replay"]["capacity"] == 80 and papers_run[2]["state"]["replay"]["capacity"] == 400
    assert diagnostics != papers_run[1]
    physical_evals, physical_diagnostics, physical = short_run(tmp_path / "physical", "dau_discrete.py",
                                                               "--buffer-time", "0.8")  # fmt: skip
    assert physical["state"]["replay"]["capacity"] == 80
    assert (physical_evals, physical_diagnostics) == (evals, diagnostics)
    for total_time, same_rows in ((1800, (0.01, 0.005, 0.002)), (12600, (0.01,))):
        for dt in (0.01, 0.005, 0.002, 0.001, 0.0005):
            cartpole = SimpleNamespace(total_time=total_time, num_envs=256, steps_per_round=10, buffer_time=10_000)
            ring = min(1_000_000, harness.args.collected_rows(cartpole, dt))
            assert (ring == harness.args.buffer_rows(cartpole, dt)) == (dt in same_rows), (total_time, dt)
    result = run_script("dau_discrete_research.py", *SHORT, "--buffer-transitions", "8", cwd=tmp_path, check=False)
    assert result.returncode != 0 and "--buffer-transitions must hold a batch" in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


# The authors' code's other differences (issue 76 §5; docs/research/authors_code.md, "What differs from ours").
AUTHORS = ["--squared-loss", "--truncation-as-termination", "--first-round-steps", "19", "--zero-last-bias"]


def test_the_squared_loss_steps_down_the_authors_loss(float64):
    """--squared-loss: one SGD step (lr 1) is minus the gradient, by autograd, of the authors' loss
    mean((V(s) + dt A(s, a) - Q~)^2), Q~ = r dt + (1 - d) gamma^dt V(s') detached (their
    code/critics/off_policy/advantage.py:79-94): 2 td dV on V and 2 td dt dA on A, Alg. 1's steps times 2 dt and
    2 dt^2. The TD statistics update() returns are Alg. 1's, bit for bit (the same TD errors)."""
    dt, gamma = 0.01, 0.8
    torch.manual_seed(0)
    normalizer = research.Normalizer(4)
    value, advantage = research.Value(4, 16, normalizer), research.Advantage(4, 3, 16, normalizer)
    batch = fixed_batch(obs_dim=4, num_actions=3, n=12)  # every third transition terminated
    obs, action, reward, terminated, next_obs = batch
    advantages = advantage(obs)
    q = value(obs) + dt * (advantages.gather(1, action).squeeze(1) - advantages.max(1).values)
    expected_q = (reward * dt + gamma**dt * (1 - terminated) * value(next_obs)).detach()
    authors = per_sample_gradient(((q - expected_q) ** 2).mean(), [*value.parameters(), *advantage.parameters()])
    steps, stats = {}, {}
    for name, options in (("squared", research.Args(squared_loss=True)), ("paper", research.Args())):
        networks = copy.deepcopy(value), copy.deepcopy(advantage)
        optimizer = torch.optim.SGD([*networks[0].parameters(), *networks[1].parameters()], lr=1.0)
        stats[name] = research.update(batch, *networks, optimizer, dt, gamma, options)
        steps[name] = flat(value) - flat(networks[0]), flat(advantage) - flat(networks[1])
    value_size = len(flat(value))
    torch.testing.assert_close(torch.cat(steps["squared"]), authors, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(steps["squared"][0], 2 * dt * steps["paper"][0], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(steps["squared"][1], 2 * dt**2 * steps["paper"][1], rtol=1e-9, atol=1e-12)
    assert authors[:value_size].abs().max() > 0 and authors[value_size:].abs().max() > 0
    assert torch.equal(stats["squared"], stats["paper"])


def episode_ends(replay, num_envs, limit_steps):
    """Each row of a replay memory that holds a whole short run (env e's step k at row k num_envs + e): whether it
    ends its episode (its s' is not its env's next row's s; an env's last row, at the time limit) and whether by
    the time limit (the episode's limit_steps-th step)."""
    obs, next_obs, rows = replay["fields"][0], replay["fields"][4], replay["size"]
    ends, truncations = torch.zeros(rows, dtype=torch.bool), torch.zeros(rows, dtype=torch.bool)
    for env in range(num_envs):
        length = 0
        for row in range(env, rows, num_envs):
            length += 1
            last = row + num_envs >= rows
            ends[row] = length == limit_steps if last else not torch.equal(next_obs[row], obs[row + num_envs])
            truncations[row] = ends[row] and length == limit_steps
            length = 0 if ends[row] else length
    return ends, truncations


def test_truncation_as_termination_gives_a_time_limits_transition_the_target_r_dt(tmp_path):
    """--truncation-as-termination (their code/envs/wrappers.py:55-59, advantage.py:80): a short run's memory (time
    limit 0.2 s: 20 steps at dt 0.01, which some episodes reach and some do not) holds d = 1 at every episode's end,
    the time limits' included, with s' the episode's last state (not the next row's s); and at no other row. update()
    gives the time limits' transitions the target r dt: the TD error V(s) + dt A(s, a) - r dt, where Alg. 1's
    bootstraps on gamma^dt V(s'). (Off, the script stores the paper's flags: the options-off runs above.)"""
    _, _, variant = short_run(tmp_path / "variant", "dau_discrete_research.py", "--truncation-as-termination",
                              "--time-limit", "0.2")  # fmt: skip
    replay = variant["state"]["replay"]
    ends, truncations = episode_ends(replay, num_envs=4, limit_steps=20)
    assert truncations.sum() >= 2 and (ends & ~truncations).sum() >= 2 and replay["size"] == 400
    assert torch.equal(replay["fields"][3][:, 0] > 0, ends)
    rows = replay["fields"]
    dt, gamma = 0.01, 0.8
    torch.manual_seed(0)
    normalizer = research.Normalizer(4)
    value, advantage = research.Value(4, 16, normalizer), research.Advantage(4, 2, 16, normalizer)
    optimizer = torch.optim.SGD([*value.parameters(), *advantage.parameters()], lr=0.0)
    for row in truncations.nonzero()[:, 0].tolist():
        obs, action, reward, terminated, next_obs = (field[row : row + 1] for field in rows)
        batch = [obs, action.long(), reward[:, 0], terminated[:, 0], next_obs]
        with torch.no_grad():
            advantages = advantage(obs)[0]
            q = value(obs)[0] + dt * (advantages[int(action)] - advantages.max())
            bootstrap = gamma**dt * value(next_obs)[0]
        td_loss = research.update(batch, value, advantage, optimizer, dt, gamma, research.Args())[0]
        assert td_loss == pytest.approx(((q - reward[0, 0] * dt) ** 2).item(), rel=1e-5)
        assert td_loss != pytest.approx(((q - reward[0, 0] * dt - bootstrap) ** 2).item(), rel=1e-3)


# The vector steps after which a run's update() rounds begin (its sample() calls): the run's clock and step.
RECORD_LEARNING_STEPS = """
records = []


def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "sample" and frame.f_code.co_filename == {script!r}:
        main = frame.f_back.f_locals  # the script's main block
        records.append(main["run"].loop.clock.rounds_done * main["args"].steps_per_round + main["step"])
"""


def test_the_first_round_steps_delay_the_first_updates_and_keep_the_budget(papers_run, tmp_path):
    """--first-round-steps 19 (their code/agents/off_policy/offline_agent.py:49, 80, 91): a short run's updates come
    after vector steps 19, 29, ..., 99 (100 steps, rounds of 10), one round of updates fewer than the paper's 10, which
    evals.csv and run.json count; the same rounds, physical times and env steps as the paper's run. The clock's count
    of updates over 1800 s is the one docs/research/authors_code.md gives: 69 learning steps (3450 updates) at dt
    0.01, 1405 (70250) at dt 0.0005, against 70 and 1406. A first round of 0 steps is refused before any work."""
    probe = profiled_script(tmp_path, "dau_discrete_research.py", RECORD_LEARNING_STEPS, "steps.json")
    run_script(str(probe), *SHORT, "--first-round-steps", "19", cwd=tmp_path)
    assert json.loads((tmp_path / "steps.json").read_text()) == list(range(19, 100, 10))
    (run_dir,) = (tmp_path / "runs").glob("*__*")
    assert json.loads((run_dir / "run.json").read_text())["updates"] == 9 * 2
    evals, paper_evals = read_evals(tmp_path), papers_run[0]
    assert [(row["physical_time"], row["env_steps"]) for row in evals] == [
        (row["physical_time"], row["env_steps"]) for row in paper_evals
    ]
    assert [int(row["updates"]) for row in evals] == [max(int(row["updates"]) - 2, 0) for row in paper_evals]
    diagnostics = (run_dir / "diagnostics.csv").read_text().splitlines()
    assert "nan" in diagnostics[1] and "nan" not in "".join(diagnostics[2:])  # the first round's window: no updates
    for dt, learning_steps in ((0.01, (69, 70)), (0.0005, (1405, 1406))):
        for rounds_without_updates, count in zip((1, 0), learning_steps, strict=True):  # as the short run's: 1 at 19
            cartpole = SimpleNamespace(total_time=1800, num_envs=256, steps_per_round=10, updates_per_round=50)
            clock = harness.clock.Clock(cartpole, dt)
            clock.rounds_done, clock.rounds_without_updates = clock.num_rounds, rounds_without_updates
            assert clock.updates == 50 * count
    result = run_script("dau_discrete_research.py", *SHORT, "--first-round-steps", "0", cwd=tmp_path, check=False)
    assert result.returncode != 0 and "--first-round-steps must be positive" in result.stderr, result.stderr


def test_the_zeroed_last_bias_leaves_every_weight_as_the_default_draws_it(papers_folder, tmp_path):
    """--zero-last-bias (their code/models.py:29-30): at the start (checkpoints/0.0s.pt) V's and A's last layers'
    biases are 0, and every other parameter and buffer is the paper's run's, bit for bit (no random draw moved)."""
    short_run(tmp_path / "variant", "dau_discrete_research.py", "--zero-last-bias")
    (start,) = (tmp_path / "variant" / "runs").glob("*__*/checkpoints/0.0s.pt")
    (papers_start,) = papers_folder.glob("runs/*__*/checkpoints/0.0s.pt")
    zeroed, paper_networks = torch.load(start, weights_only=True), torch.load(papers_start, weights_only=True)
    for network in ("value", "advantage"):
        assert zeroed[network].keys() == paper_networks[network].keys()
        for name, tensor in zeroed[network].items():
            if name == "net.6.bias":  # the last Linear of mlp()
                assert (tensor == 0).all() and (paper_networks[network][name] != 0).all()
            else:
                assert torch.equal(tensor, paper_networks[network][name]), (network, name)


def test_the_authors_differences_all_at_once_with_their_ring_run_end_to_end(tmp_path):
    """The four options and --buffer-transitions together: a short run ends with its evaluations, a ring of 200
    transitions and the delayed schedule's 18 updates."""
    evals, _, variant = short_run(tmp_path / "authors", "dau_discrete_research.py", *AUTHORS,
                                  "--buffer-transitions", "200")  # fmt: skip
    assert len(evals) == 5 and variant["state"]["replay"]["capacity"] == 200
    assert int(evals[-1]["updates"]) == 18


def small_buffer(terminal_rows):
    """A buffer of 10 transitions whose observation is its row, terminal at `terminal_rows`."""
    buffer = research.ReplayBuffer(12, 1, "cpu")
    rows = torch.arange(10.0)
    terminated = torch.zeros(10)
    terminated[list(terminal_rows)] = 1
    buffer.add(rows[:, None], torch.zeros(10, dtype=torch.long), torch.zeros(10), terminated, rows[:, None])
    return buffer


def test_terminal_rows_keep_the_expected_update_and_take_the_jumps_variance_out():
    """--terminal-rows: every row of the buffer weighs 1 / 10 in expectation, as in a uniform batch's mean, so the
    stratified estimator of any mean over the buffer (the update's included: it is the weighted sum) has the uniform
    one's expectation; the terminal rows' part of it is the buffer's terminal share exactly, in every batch (a uniform
    batch's varies); before any terminal row exists the extra rows weigh nothing."""
    torch.manual_seed(0)
    batches, batch_size = 20000, 8
    obs, _, _, terminated, _, weight = small_buffer([1, 5, 9]).sample(batches, batch_size, 4)
    row_weights = torch.zeros(batches, 10).scatter_add_(1, obs[..., 0].long(), weight)  # each batch's, per row
    mean, standard_error = row_weights.mean(0), row_weights.std(0) / batches**0.5
    assert ((mean - 0.1).abs() < 5 * standard_error).all(), mean
    torch.testing.assert_close((terminated * weight).sum(1), torch.full((batches,), 0.3))
    uniform_share = terminated[:, :batch_size].mean(1)
    assert uniform_share.std() > 0.1 and uniform_share.mean() == pytest.approx(0.3, abs=0.01)
    *_, weight = small_buffer([]).sample(3, batch_size, 4)
    assert (weight[:, :batch_size] == 1 / batch_size).all() and (weight[:, batch_size:] == 0).all()


def test_weighted_update_and_decoupled_weight_decay():
    """update() with every row weighing 1 / N is the paper's update (the batch's mean); --weight-decay lambda then
    multiplies every weight by 1 - lr lambda after RMSprop's step, which its denominators do not divide."""
    dt, learning_rate = 0.01, 0.001
    batch = fixed_batch(obs_dim=3, n=8, num_actions=2)
    parameters, stats = {}, {}
    for name, weight, decay in (("paper", None, 0.0), ("weighted", torch.full((8,), 1 / 8), 0.0),
                                ("decayed", None, 5.0)):  # fmt: skip
        torch.manual_seed(0)
        normalizer = research.Normalizer(3)
        value, advantage = research.Value(3, 16, normalizer), research.Advantage(3, 2, 16, normalizer)
        optimizer = torch.optim.RMSprop([*value.parameters(), *advantage.parameters()], lr=learning_rate, alpha=1 - dt)
        extra = [] if weight is None else [weight]
        options = research.Args(terminal_rows=len(extra), weight_decay=decay)  # a weight field where terminal_rows
        stats[name] = research.update([*batch, *extra], value, advantage, optimizer, dt, 0.8, options)
        parameters[name] = torch.cat(
            [parameter.detach().flatten() for parameter in optimizer.param_groups[0]["params"]]
        )
    torch.testing.assert_close(parameters["weighted"], parameters["paper"])
    torch.testing.assert_close(stats["weighted"], stats["paper"])
    torch.testing.assert_close(parameters["decayed"], parameters["paper"] * (1 - learning_rate * 5.0))
    assert not torch.equal(parameters["decayed"], parameters["paper"])


# The arguments a script's update() and the horizon's functions are called with (helpers.PROFILED: sys.setprofile
# sees every call of a function by name, the script's own update() included), written as JSON to calls.json.
RECORD_CALLS = """
records = calls = {{"update": [], "rows_ahead": [], "horizon_target": []}}


def profile(frame, event, arg):
    name = frame.f_code.co_name
    if event == "call" and name in calls:
        local = frame.f_locals
        if name == "update" and frame.f_code.co_filename == {script!r}:
            options = local["options"]
            calls[name].append([local["dt"], local["gamma"], options.advantage_rate_clip,
                                options.advantage_without_terminal_rows, options.terminal_rows, len(local["batch"])])
        elif name == "rows_ahead":
            calls[name].append(local["steps"])
        elif name == "horizon_target":
            calls[name].append([local["dt"], local["gamma"]])
"""


def recorded_calls(folder, script, *extra):
    """The calls RECORD_CALLS records in a short run of `script` with `extra` arguments, each kind as a set."""
    folder.mkdir()
    run_script(str(profiled_script(folder, script, RECORD_CALLS, "calls.json")), *SHORT, *extra, cwd=folder)
    return {name: {tuple(call) if isinstance(call, list) else call for call in calls}
            for name, calls in json.loads((folder / "calls.json").read_text()).items()}  # fmt: skip


def test_the_horizon_options_reach_the_update_and_a_horizon_of_0_is_refused(tmp_path):
    """The training loop passes each option on: with the three of the episode's end and --terminal-rows (V's target
    over 0.05 s, 5 steps at dt 0.01), every update() gets A's rate clip, the terminal-row flag, the run's dt and gamma
    and a batch with the rows' weights and the rows ahead (10 fields), sampled over 5 steps; the loop marks which rows
    continue their env's previous row (some do, some do not). Off, update() gets the paper's batch (5 fields) and no
    option. Fails on an option that does not reach update(), a horizon of another length than round(H / dt) steps,
    or V's target made with another dt or gamma. --value-horizon 0 is refused before any work."""
    options = ["--value-horizon", "0.05", "--advantage-without-terminal-rows", "--advantage-rate-clip", "7",
               "--terminal-rows", "4"]  # fmt: skip
    calls = recorded_calls(tmp_path / "on", "dau_discrete_research.py", *options)
    assert calls == {"update": {(0.01, 0.8, 7.0, True, 4, 10)}, "rows_ahead": {5}, "horizon_target": {(0.01, 0.8)}}
    (run_dir,) = (tmp_path / "on" / "runs").glob("*__*")
    replay = torch.load(run_dir / "checkpoint.pt", weights_only=True)["state"]["replay"]
    assert 0 < replay["fields"][5][: replay["size"]].mean() < 1
    off = recorded_calls(tmp_path / "off", "dau_discrete_research.py")
    assert off == {"update": {(0.01, 0.8, None, False, 0, 5)}, "rows_ahead": set(), "horizon_target": set()}
    result = run_script(
        "dau_discrete_research.py", *SHORT, "--value-horizon", "0", cwd=tmp_path, check=False, timeout=120
    )
    assert result.returncode != 0 and "--value-horizon must be positive" in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def continuous_papers_run(tmp_path_factory):
    """dau_continuous.py's short Pendulum run: what dau_continuous_horizon.py must log with one step of horizon."""
    return short_run(tmp_path_factory.mktemp("continuous") / "run", "dau_continuous.py", env_id="Pendulum-v1")


def test_the_continuous_horizon_is_the_papers_run_at_one_step_and_cut_only_at_an_episodes_end(
    continuous_papers_run, tmp_path
):
    """dau_continuous_horizon.py's short Pendulum run with its defaults or V's target over one step (n = 1) logs
    dau_continuous.py's evals.csv and diagnostics.csv. Over 0.05 s (n = 5) it is another run, whose replay rows each
    continue their env's previous row but the first of each episode (4 envs, 100 steps each, episodes of 50 steps),
    whatever the noise did to the action: the return is not corrected for it. --value-horizon 0 is refused."""
    paper_evals, paper_diagnostics, _ = continuous_papers_run
    assert len(paper_evals) == 5 and len(paper_diagnostics.splitlines()) > 5
    for name, extra in (("defaults", ()), ("one-step", ("--value-horizon", "0.01"))):
        evals, diagnostics, _ = short_run(tmp_path / name, "dau_continuous_horizon.py", *extra, env_id="Pendulum-v1")
        assert evals == paper_evals and diagnostics == paper_diagnostics, name
    _, diagnostics, variant = short_run(tmp_path / "horizon", "dau_continuous_horizon.py", "--value-horizon", "0.05",
                                        env_id="Pendulum-v1")  # fmt: skip
    replay, first_rows = variant["state"]["replay"], torch.ones(400)
    first_rows[[0, 1, 2, 3, 200, 201, 202, 203]] = 0  # each env's steps 0 and 50, rows env + 4 step
    assert replay["size"] == 400 and torch.equal(replay["fields"][5][:, 0], first_rows)
    assert diagnostics != paper_diagnostics
    with pytest.raises(ValueError, match="--value-horizon must be positive"):
        continuous_horizon.check_args(continuous_horizon.Args(policy_learning_rate=0.02, value_horizon=0.0))
    assert continuous_horizon.check_args(continuous_horizon.Args(policy_learning_rate=0.02, value_horizon=0.05)) == 1


def test_the_memory_check_counts_the_horizons_extra_float_per_row(monkeypatch):
    """With --value-horizon a replay row holds one float more (whether it continues its env's previous row): the
    memory check before any work counts it. Host memory for exactly two copies of the paper's rows (the buffer and a
    checkpoint's copy, CartPole's 11 floats a row): the paper's rows fit, the horizon's 12 do not."""

    def settle(module, **options):
        args = module.Args(dt=0.01, **options)
        harness.args.settle_args(args, None, gym.spaces.Discrete, module.check_args, torch.device("cpu"))
        return args

    exactly = 2 * harness.args.buffer_rows(settle(paper), 0.01) * 4 * (2 * 4 + 1 + 2)  # settled on this machine
    monkeypatch.setattr(harness.args.psutil, "virtual_memory", lambda: type("Memory", (), {"available": exactly}))
    settle(paper)
    settle(research)
    with pytest.raises(ValueError, match="the replay buffer needs .* lower --buffer-time"):
        settle(research, value_horizon=0.05)


# The paper's script and its horizon variant, and the sizes of their replay rows after the capacity: (obs,) or
# (obs, action) dimensions.
HORIZON_PAIRS = {"discrete": (paper, research, (3,)), "continuous": (continuous_paper, continuous_horizon, (3, 2))}


def horizon_buffers(pair, follows, steps=4, envs=4):
    """The same `steps` adds of `envs` rows (fixed_batch's transitions) to the paper's script's replay memory and to
    its horizon variant's with --value-horizon, where each row continues its env's previous row if `follows`."""
    papers, variant, dims = HORIZON_PAIRS[pair]
    num_actions = 2 if pair == "discrete" else None  # the continuous rows: actions in [-1, 1]^2
    obs, action, reward, terminated, next_obs = fixed_batch(obs_dim=3, n=steps * envs, num_actions=num_actions)
    buffers = papers.ReplayBuffer(32, *dims, "cpu"), variant.ReplayBuffer(32, *dims, "cpu", envs)
    for step in range(steps):
        rows = slice(step * envs, (step + 1) * envs)
        transition = obs[rows], action[rows], reward[rows], terminated[rows], next_obs[rows]
        buffers[0].add(*transition)
        buffers[1].add(*transition, torch.full((envs,), float(follows)))
    return buffers


def options_off(module):
    """update()'s options: dau_discrete_research.py's Args with every option off, none for the other scripts."""
    return [module.Args()] if module is research else []


def step_from(module, networks, batch):
    """The parameters of each network (V, A and, continuous, the actor) and the stats after `module`'s update() on
    `batch`, one RMSprop step from a copy of `networks`."""
    networks = copy.deepcopy(networks)
    optimizer = torch.optim.RMSprop([p for network in networks for p in network.parameters()], lr=1e-3, alpha=0.99)
    stats = module.update(batch, *networks, optimizer, 0.01, 0.8, *options_off(module))
    return (*map(flat, networks), stats)


@pytest.mark.parametrize("pair", HORIZON_PAIRS)
@pytest.mark.parametrize(
    "steps,follows", [(1, True), (4, False), (4, True)], ids=["one-step", "cut-at-once", "rows-ahead"]
)
def test_a_value_horizon_of_one_step_and_the_defaults_are_alg1s_step_bit_for_bit(pair, steps, follows):
    """A horizon variant's update() from the same weights on the same rows: with its defaults (the paper's batch),
    and with --value-horizon of one step (n = 1) or of n = 4 where every row's return is cut at once (V's target is
    the paper's), the parameters and stats after one RMSprop step are the paper's script's bit for bit; where the rows
    ahead continue, V's target, so V's step, is another, and A's (and the actor's) the paper's."""
    papers, variant, _ = HORIZON_PAIRS[pair]
    torch.manual_seed(0)
    normalizer = papers.Normalizer(3)
    networks = papers.Value(3, 16, normalizer), papers.Advantage(3, 2, 16, normalizer)
    networks += (papers.Actor(3, 2, 16, normalizer),) if pair == "continuous" else ()
    papers_buffer, buffer = horizon_buffers(pair, follows)
    torch.manual_seed(1)
    papers_batch = [field[0] for field in papers_buffer.sample(1, 16)]
    torch.manual_seed(1)
    batch = [field[0] for field in buffer.sample(1, 16, steps=steps)]
    assert len(batch) == 9 and all(torch.equal(mine, its) for mine, its in zip(batch[:5], papers_batch, strict=True))
    papers_step = step_from(papers, networks, papers_batch)
    defaults = step_from(variant, networks, papers_batch)  # its options off
    assert all(torch.equal(mine, its) for mine, its in zip(defaults, papers_step, strict=True))
    value, *others = step_from(variant, networks, batch)
    assert all(torch.equal(mine, its) for mine, its in zip(others, papers_step[1:], strict=True))  # A's TD: one step
    assert batch[6].max() == (3 if steps > 1 and follows else 0)  # the rows ahead that V's target reaches
    assert torch.equal(value, papers_step[0]) == (batch[6].max() == 0)


def episodes_in_a_buffer(pair, envs=2, steps=8):
    """Two envs' `steps` steps, as the scripts add them (the buffer's follows, every action greedy): env 0
    terminates at its step 2 and starts again, env 1 is truncated at its step 5 (its last s' is not the next s).
    Returns the variant's buffer and each env's transitions (s's id, r, d, s'), s's id (a unique number) the first
    entry of s, from which a test computes the n-step return on its own."""
    _, variant, dims = HORIZON_PAIRS[pair]
    buffer = variant.ReplayBuffer(64, *dims, "cpu", envs)
    generator = torch.Generator().manual_seed(3)
    ids, transitions = [[env * 100 + 1] for env in range(envs)], [[] for _ in range(envs)]
    for step in range(steps):
        obs = torch.tensor([[ids[env][-1], 0.3 * env, -0.1 * step] for env in range(envs)], dtype=torch.float32)
        ends = [(0, 2, "terminated"), (1, 5, "truncated")]
        terminated = torch.tensor([float((env, step, "terminated") in ends) for env in range(envs)])
        next_ids = [ids[env][-1] + 1 for env in range(envs)]
        last_ids = [next_ids[env] + 50 if (env, step) in [(end[0], end[1]) for end in ends] else next_ids[env]
                    for env in range(envs)]  # fmt: skip # an episode's last s' is no row's s
        next_obs = torch.tensor([[last_ids[env], 0.3 * env, -0.1 * (step + 1)] for env in range(envs)])
        reward = torch.rand(envs, generator=generator)
        action = torch.randint(2, (envs, 1), generator=generator) if pair == "discrete" else torch.rand(envs, 2) * 2 - 1
        buffer.add(obs, action, reward, terminated, next_obs, buffer.follows(obs))
        for env in range(envs):
            transitions[env].append((ids[env][-1], reward[env].item(), terminated[env].item(), next_obs[env]))
            ids[env].append(next_ids[env])
    return buffer, transitions


@pytest.mark.parametrize("pair", HORIZON_PAIRS)
def test_the_value_horizons_step_is_the_per_sample_formula(pair, float64):
    """With n = 4, Delta-theta = mean over rows of (V(s) + dt A(s, a) - G) / dt dV(s)/dtheta, G the n-step return of
    the row's own episode, computed here from the envs' transitions: sum_k gamma^(k dt) r_k dt over the steps up to
    the episode's end, plus gamma^(m dt) V(s_m) unless it terminated. Fails on a discount per step instead of per
    dt, a cut one row late (a return summed past a termination or a truncation) and a missing termination mask."""
    papers, variant, _ = HORIZON_PAIRS[pair]
    dt, gamma, n = 0.01, 0.8, 4
    torch.manual_seed(0)
    normalizer = papers.Normalizer(3)
    networks = [papers.Value(3, 16, normalizer), papers.Advantage(3, 2, 16, normalizer)]
    networks += [papers.Actor(3, 2, 16, normalizer)] if pair == "continuous" else []
    torch.set_default_dtype(torch.float32)  # the replay memory's rows are float32; the step in float64 (exact sums)
    buffer, transitions = episodes_in_a_buffer(pair)
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(1)
    batch = [field[0].double() if field.is_floating_point() else field[0] for field in buffer.sample(1, 32, steps=n)]
    obs, action, *_ = batch
    value, advantage = networks[:2]
    steps = {row[0]: (env, step) for env, rows in enumerate(transitions) for step, row in enumerate(rows)}
    expected = 0
    for row in range(len(obs)):
        state = obs[row : row + 1]
        env, step = steps[int(state[0, 0].item())]
        episode = transitions[env]
        reached = []  # the row's own step and the next ones of its episode, n at most
        for index in range(step, min(step + n, len(episode))):
            reached.append(episode[index])
            truncated = index + 1 < len(episode) and episode[index][3][0] != episode[index + 1][0]
            if episode[index][2] or truncated:  # a termination, or the next row is another episode's
                break
        returns = sum(gamma ** (k * dt) * reward * dt for k, (_, reward, _, _) in enumerate(reached))
        _, _, terminated, s_m = reached[-1]
        with torch.no_grad():
            target = returns + (0.0 if terminated else gamma ** (len(reached) * dt) * value(s_m[None].double()).item())
        if pair == "discrete":
            advantages = advantage(state)[0]
            advantage_taken = advantages[action[row].item()] - advantages.max()
        else:
            advantage_taken = advantage(state, action[row : row + 1]) - advantage(state, networks[2](state))
        q = value(state) + dt * advantage_taken
        gradient = per_sample_gradient(value(state).sum(), list(value.parameters()))
        expected += (q - target).item() / dt * gradient
    reached_ahead = batch[6]
    assert reached_ahead.max() == n - 1 and 0 in reached_ahead.tolist()  # full horizons and cut ones
    assert batch[7].max() == 1  # some rows' returns end at a termination
    before = flat(value)
    optimizer = torch.optim.SGD([p for network in networks for p in network.parameters()], lr=1.0)
    variant.update(batch, *networks, optimizer, dt, gamma, *options_off(variant))
    torch.testing.assert_close(before - flat(value), expected / len(obs), rtol=1e-9, atol=1e-12)


def test_the_value_horizons_target_is_the_n_step_return_cut_where_the_greedy_policy_leaves_the_data():
    """--value-horizon, n = 3 at dt 0.1: two envs' six steps in a ring of 11 rows (the oldest row overwritten; an
    env's next row 2 rows further on, modulo 11). Each row's V target is sum_k gamma^(k dt) r_k dt +
    gamma^(m dt) (1 - d) V(s_m) over the m <= n steps its env's rows reach: cut after a termination (env 0's step 2:
    no bootstrap), a truncation (env 1's step 3: bootstrap on its last observation), at an action the noise changed
    (env 1's step 2), and at the newest rows (never onto the oldest, another env's)."""
    dt, gamma, steps = 0.1, 0.8, 3
    obs = [[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15]]
    next_obs = [[1, 2, 50, 4, 5, 6], [11, 12, 13, 60, 15, 16]]  # env 0 terminates at step 2, env 1 truncated at 3
    terminated = [[0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]]
    greedy = [[1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 1]]  # env 1's step 2: the noise changed the greedy action
    buffer = research.ReplayBuffer(11, 1, "cpu", 2)
    for step in range(6):
        observation = torch.tensor([[obs[0][step]], [obs[1][step]]], dtype=torch.float32)
        follows = buffer.follows(observation, torch.tensor([greedy[0][step], greedy[1][step]]) > 0)
        buffer.add(observation, torch.zeros(2, dtype=torch.long), 0.5 + observation[:, 0] / 10,
                   torch.tensor([terminated[0][step], terminated[1][step]]),
                   torch.tensor([[next_obs[0][step]], [next_obs[1][step]]]), follows)  # fmt: skip
    # Each row the ring still holds, named by its s: the rows whose rewards its target sums (named by their s) and
    # the s_m it bootstraps on (None: the episode terminated).
    expected = {1: ([1, 2], None), 2: ([2], None), 3: ([3, 4, 5], 6), 4: ([4, 5], 6), 5: ([5], 6),
                10: ([10, 11], 12), 11: ([11], 12), 12: ([12, 13], 60), 13: ([13], 60), 14: ([14, 15], 16),
                15: ([15], 16)}  # fmt: skip

    def value(observation):
        return 3 + 0.5 * observation[..., 0]

    torch.manual_seed(0)
    obs_sampled, _, reward, _, _, *ahead = (field[0] for field in buffer.sample(1, 400, steps=steps))
    targets = research.horizon_target(reward, *ahead, value, dt, gamma)
    assert set(obs_sampled[:, 0].tolist()) == set(expected)
    for row, target in zip(obs_sampled[:, 0].tolist(), targets.tolist(), strict=True):
        rewarded, bootstrap = expected[row]
        want = sum(gamma ** (k * dt) * (0.5 + s / 10) * dt for k, s in enumerate(rewarded))
        if bootstrap is not None:
            want += gamma ** (len(rewarded) * dt) * (3 + 0.5 * bootstrap)
        assert target == pytest.approx(want, rel=1e-6), row


@pytest.mark.parametrize(
    "without_terminal_rows,clipped", [(True, False), (False, True), (True, True)],
    ids=["without-terminal-rows", "rate-clip", "both"],
)  # fmt: skip
def test_as_step_without_terminal_rows_or_with_its_rate_clipped_is_the_per_sample_formula(
    float64, without_terminal_rows, clipped
):
    """Delta-psi = mean over all rows of clip(m td / dt, -c, c) dA(s, a)/dpsi, with m = 1 - d under
    --advantage-without-terminal-rows (the terminal rows out, the mean still over the whole batch), else 1, and c
    --advantage-rate-clip's (here the median of |m td / dt|: some rows clipped, some not); Delta-theta = mean(td / dt
    dV/dtheta), Alg. 1's, unclipped. A clip above every rate is no clip, bit for bit."""
    dt, gamma = 0.01, 0.8
    torch.manual_seed(0)
    normalizer = research.Normalizer(4)
    value, advantage = research.Value(4, 16, normalizer), research.Advantage(4, 3, 16, normalizer)
    batch = fixed_batch(obs_dim=4, num_actions=3, n=12)  # every third transition terminated
    v0, a0 = copy.deepcopy(value), copy.deepcopy(advantage)
    rows = [discrete_td(v0, a0, transition, dt, gamma) for transition in zip(*batch, strict=True)]
    kept = [(1 - terminated.item()) if without_terminal_rows else 1.0 for terminated in batch[3]]
    rates = torch.tensor([keep * td / dt for keep, (td, _) in zip(kept, rows, strict=True)])
    clip = rates.abs().median().item() if clipped else None
    expected_theta, expected_psi = 0, 0
    for obs, (td, advantage_taken), rate in zip(batch[0], rows, rates.tolist(), strict=True):
        expected_theta += td / dt * per_sample_gradient(v0(obs[None]).sum(), list(v0.parameters()))
        rate = max(-clip, min(clip, rate)) if clipped else rate
        expected_psi += rate * per_sample_gradient(advantage_taken, list(a0.parameters()))
    n = len(batch[0])
    assert 0 < batch[3].sum() < n and (not clipped or 0 < (rates.abs() > clip).sum() < n)
    optimizer = torch.optim.SGD([*value.parameters(), *advantage.parameters()], lr=1.0)
    options = research.Args(advantage_without_terminal_rows=without_terminal_rows, advantage_rate_clip=clip)
    research.update(batch, value, advantage, optimizer, dt, gamma, options)
    torch.testing.assert_close(flat(v0) - flat(value), expected_theta / n, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(flat(a0) - flat(advantage), expected_psi / n, rtol=1e-9, atol=1e-12)
    steps = {}  # Alg. 1's step (the same for V, another for A), and the options' with a clip that binds nowhere
    mask = {"advantage_without_terminal_rows": without_terminal_rows}
    for name, script, options in (("paper", paper, {}), ("unclipped", research, mask),
                                  ("never-binding", research, mask | {"advantage_rate_clip": 1e30})):  # fmt: skip
        value, advantage = copy.deepcopy(v0), copy.deepcopy(a0)
        optimizer = torch.optim.SGD([*value.parameters(), *advantage.parameters()], lr=1.0)
        options = {"options": research.Args(**options)} if script is research else {}
        script.update(batch, value, advantage, optimizer, dt=dt, gamma=gamma, **options)
        steps[name] = flat(value), flat(advantage)
    torch.testing.assert_close(flat(v0) - steps["paper"][0], expected_theta / n, rtol=1e-9, atol=1e-12)
    assert not torch.allclose(flat(a0) - steps["paper"][1], expected_psi / n)
    assert all(torch.equal(mine, its) for mine, its in zip(steps["never-binding"], steps["unclipped"], strict=True))
    if not without_terminal_rows:  # the clip alone, binding nowhere: Alg. 1's step itself, bit for bit
        assert all(torch.equal(mine, its) for mine, its in zip(steps["never-binding"], steps["paper"], strict=True))


def test_a_rate_clip_that_is_not_positive_and_finite_is_refused():
    """check_args (which Run calls before any work) refuses --advantage-rate-clip 0, -5 or inf, naming the flag; the
    clip's off value, an infinite c, is its default None, as every positive flag here takes finite values only."""
    for bad in (0.0, -5.0, float("inf")):
        with pytest.raises(ValueError, match="--advantage-rate-clip must be positive"):
            research.check_args(research.Args(advantage_rate_clip=bad))
    research.check_args(research.Args(advantage_rate_clip=2000.0))
