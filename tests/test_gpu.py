"""The scripts' GPU path: a round replayed as a CUDA graph computes what the same round computes launched op by
op, evaluation runs on the CPU, and the memory check reads the GPU's memory. The graph tests need CUDA
(DAU_TEST_DEVICE=cuda on a GPU machine, docs/common.md "On a GPU"); the others run anywhere."""

import copy
import importlib
import re
from types import SimpleNamespace

import pytest
import torch
from helpers import ROOT, TINY, read_csv, run_script
from test_scripts import CONTINUOUS, SCRIPTS, env_defaults

import harness.args
import harness.envs
import harness.evaluations
import harness.gpu

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (DAU_TEST_DEVICE=cuda)")


def round_parts(script, device, obs_dim=17, action_dim=6, hidden_size=64, updates=5, batch_size=32):
    """The script's networks, optimizer and train_round as its main block makes them (HalfCheetah's sizes for
    the continuous scripts, six actions for the discrete ones), and a maker of a round's batches."""
    module = importlib.import_module(script[: -len(".py")])
    torch.manual_seed(0)
    normalizer = module.Normalizer(obs_dim).to(device)
    normalizer.update(torch.randn(100, obs_dim, device=device) * 3 + 1)
    dt, gamma, tau = 0.005, 0.8, 0.5
    if script == "dau_continuous.py":
        value = module.Value(obs_dim, hidden_size, normalizer)
        advantage = module.Advantage(obs_dim, action_dim, hidden_size, normalizer)
        actor = module.Actor(obs_dim, action_dim, hidden_size, normalizer)
        modules = [value.to(device), advantage.to(device), actor.to(device)]
        groups = [[*value.parameters(), *advantage.parameters()], list(actor.parameters())]

        def update(batch, optimizer):
            return module.update(batch, value, advantage, actor, optimizer, dt, gamma)
    elif script == "ddpg_baseline.py":
        qf, target_qf = (module.QNetwork(obs_dim, action_dim, hidden_size, normalizer) for _ in range(2))
        actor, target_actor = (module.Actor(obs_dim, action_dim, hidden_size, normalizer) for _ in range(2))
        modules = [network.to(device) for network in (qf, target_qf, actor, target_actor)]
        groups = [list(qf.parameters()), list(actor.parameters())]

        def update(batch, optimizer):
            return module.update(batch, qf, target_qf, actor, target_actor, optimizer, dt, gamma, 0.01, tau)
    elif script == "dau_discrete.py":
        value = module.Value(obs_dim, hidden_size, normalizer)
        advantage = module.Advantage(obs_dim, action_dim, hidden_size, normalizer)
        modules = [value.to(device), advantage.to(device)]
        groups = [[*value.parameters(), *advantage.parameters()]]

        def update(batch, optimizer):
            return module.update(batch, value, advantage, optimizer, dt, gamma)
    else:
        qf, target_qf = (module.QNetwork(obs_dim, action_dim, hidden_size, normalizer) for _ in range(2))
        modules = [qf.to(device), target_qf.to(device)]
        groups = [list(qf.parameters())]

        def update(batch, optimizer):
            return module.update(batch, qf, target_qf, optimizer, dt, gamma, 0.01, tau)

    optimizer = torch.optim.RMSprop([{"params": group, "lr": 0.1 * dt} for group in groups], alpha=1 - dt,
                                    momentum=0, foreach=True, capturable=device.type == "cuda")  # fmt: skip

    def train_round(batches):
        return torch.stack([update([field[k] for field in batches], optimizer) for k in range(updates)])

    def batches(seed):
        generator = torch.Generator(device).manual_seed(seed)
        shape = (updates, batch_size)
        if script in CONTINUOUS:
            action = torch.rand(*shape, action_dim, generator=generator, device=device) * 2 - 1
        else:
            action = torch.randint(action_dim, (*shape, 1), generator=generator, device=device)
        return [torch.randn(*shape, obs_dim, generator=generator, device=device), action,
                torch.randn(*shape, generator=generator, device=device),
                (torch.rand(*shape, generator=generator, device=device) < 0.2).float(),
                torch.randn(*shape, obs_dim, generator=generator, device=device)]  # fmt: skip

    return module, [normalizer, *modules], optimizer, train_round, batches


def whole_state(modules, optimizer):
    return [*(tensor for module in modules for tensor in module.state_dict().values()),
            *(tensor for state in optimizer.state.values() for tensor in state.values())]  # fmt: skip


@pytest.fixture
def as_the_scripts_run_on_a_gpu():
    """Deterministic algorithms without the NaN fill, as the scripts set them on CUDA (conftest sets cuBLAS's
    workspace); put back afterwards for the other tests of this process."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = False
    yield
    torch.use_deterministic_algorithms(deterministic)
    torch.utils.deterministic.fill_uninitialized_memory = fill


@cuda
@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("eager_rounds", [0, 2])  # a fresh run, and one with optimizer state (as after --resume)
def test_a_graphed_round_computes_what_the_eager_round_computes(script, eager_rounds, as_the_scripts_run_on_a_gpu):
    """Rounds through harness.gpu.graphed (the first op by op, as the capture's warm-up, the next replayed as one
    CUDA graph) against the same rounds launched op by op, from the same state: the same statistics, parameters,
    targets and RMSprop state, bit for bit, round after round. (The scripts' own rounds, whole runs graphed and
    not, are compared below.)"""
    device = torch.device("cuda")
    module, modules, optimizer, train_round, batches = round_parts(script, device)
    _, graph_modules, graph_optimizer, graph_round, _ = round_parts(script, device)  # the same, twice
    for seed in range(eager_rounds):
        train_round(batches(100 + seed))
        graph_round(batches(100 + seed))
    graphed_round = harness.gpu.graphed(graph_round, device)
    for seed in range(3):
        eager_stats, graphed_stats = train_round(batches(seed)), graphed_round(batches(seed)).clone()
        assert torch.equal(eager_stats, graphed_stats)
        eager_state, graphed_state = whole_state(modules, optimizer), whole_state(graph_modules, graph_optimizer)
        assert len(eager_state) == len(graphed_state)
        assert all(torch.equal(a, b) for a, b in zip(eager_state, graphed_state, strict=True))


@pytest.mark.parametrize("script", SCRIPTS)
def test_evaluation_runs_on_the_cpu_whatever_the_networks_device(script, as_the_scripts_run_on_a_gpu):
    """evaluate() on the harness's copy of the networks (harness.evaluations.policy_copy) with the network on the GPU
    (where there is one) scores exactly what the network's CPU copy scores in the same evaluation envs (a forward
    pass on the GPU rounds otherwise, and Pendulum's actions carry that into the return), and leaves the network on
    its device, as it was."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env_id, obs_dim, action_dim = ("Pendulum-v1", 3, 1) if script in CONTINUOUS else ("CartPole-v1", 4, 2)
    module, modules, *_ = round_parts(script, device, obs_dim, action_dim)
    network = modules[{"dau_continuous.py": 3, "ddpg_baseline.py": 3, "dau_discrete.py": 2}.get(script, 1)]
    before = copy.deepcopy(network.state_dict())

    def score(network):
        envs = harness.envs.make_vector_env(SimpleNamespace(env_id=env_id, time_limit=2.0), 0.05, 3, seed=10)
        bounds = (envs.single_action_space.low, envs.single_action_space.high) if script in CONTINUOUS else ()
        return module.evaluate(network, envs, *bounds)

    copied = harness.evaluations.policy_copy({"network": network})["network"]
    assert next(copied.parameters()).device.type == "cpu"
    assert score(copied) == score(copy.deepcopy(network).cpu())
    assert all(torch.equal(tensor, before[name]) and tensor.device.type == device.type
               for name, tensor in network.state_dict().items())  # fmt: skip


def test_on_a_gpu_the_replay_memory_must_fit_in_its_memory(monkeypatch):
    """On CUDA the buffer lives in GPU memory and a checkpoint copies it to host memory: a buffer that host
    memory would hold twice over is refused when the GPU lacks room for it (2 GiB kept for CUDA itself)."""
    module = importlib.import_module("dau_continuous")
    args, row_floats = env_defaults(module, "HalfCheetah"), 2 * 17 + 6 + 2
    needed = harness.args.buffer_rows(args, 0.005) * 4 * row_floats
    monkeypatch.setattr(harness.args.psutil, "virtual_memory", lambda: type("Memory", (), {"available": 10 * needed}))
    for gpu_free, refused in ((needed + 2**31 - 1, True), (needed + 2**31, False)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, free=gpu_free: (free, 8 * 10**10))
        if refused:
            message = re.escape("on the GPU (2 GiB kept for CUDA) ") + ".*GB are available: lower --buffer-time"
            with pytest.raises(ValueError, match=message):
                harness.args.check_memory(args, 0.005, row_floats, torch.device("cuda"))
        else:
            harness.args.check_memory(args, 0.005, row_floats, torch.device("cuda"))
    harness.args.check_memory(args, 0.005, row_floats, torch.device("cpu"))  # on the CPU, host memory alone: it fits
    monkeypatch.setattr(harness.args.psutil, "virtual_memory", lambda: type("Memory", (), {"available": needed - 1}))
    with pytest.raises(ValueError, match=re.escape("in host memory") + ".*GB are available"):  # the host's copy
        harness.args.check_memory(args, 0.005, row_floats, torch.device("cuda"))


EAGER = """import runpy, sys
sys.path.insert(0, {root!r})
import harness.gpu
harness.gpu.graphed = lambda train_round, device: train_round  # every round op by op
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""


# The research variants with every option on: their rounds differ from the paper's scripts' inside the graph (the
# sqrt(dt) learning rates, the stratified batch's weights, the decoupled decay, V's n-step target, A's mask and
# clipped rate, V's own rate and greedy rows, the authors' loss scale), and a first round without updates before the
# capture (--first-round-steps).
VARIANTS = {
    "dau_discrete_research.py": ["--exploration", "ou-scaled", "--value-learning-rate", "0.05",
                                 "--value-update", "greedy", "--learning-rate-reference-dt", "0.04",
                                 "--terminal-rows", "8", "--weight-decay", "5", "--value-horizon", "0.1",
                                 "--advantage-without-terminal-rows", "--advantage-rate-clip", "50",
                                 "--squared-loss", "--truncation-as-termination", "--first-round-steps", "19",
                                 "--zero-last-bias"],
    "dau_continuous_horizon.py": ["--value-horizon", "0.1"],
}  # fmt: skip


@cuda
@pytest.mark.parametrize("script", [*SCRIPTS, *VARIANTS])
def test_a_scripts_graphed_run_computes_what_its_eager_run_computes(script, tmp_path):
    """The script's own round and wiring on CUDA: a run whose rounds are replayed as CUDA graphs (the default on a
    GPU) writes the same evaluations and diagnostics, bit for bit, as the same run with every round op by op: the
    round the script builds (its networks, optimizer and batches) captured and replayed as it runs there."""
    continuous = script in CONTINUOUS or script.startswith("dau_continuous")
    env_args = ["--env-id", "Pendulum-v1" if continuous else "CartPole-v1", "--dt", "0.02"]
    common = [*env_args, *TINY, "--total-time", "4", "--exp-name", "graph", *VARIANTS.get(script, [])]
    for side in ("graphed", "eager"):
        (tmp_path / side).mkdir()
    run_script(script, *common, cwd=tmp_path / "graphed")
    eager = tmp_path / f"eager_{script}"
    eager.write_text(EAGER.format(root=str(ROOT), script=str(ROOT / script)))
    run_script(str(eager), *common, cwd=tmp_path / "eager")
    for name in ("evals.csv", "diagnostics.csv"):
        graphed_rows, eager_rows = (read_csv(next((tmp_path / side).glob(f"runs/*/{name}")))
                                    for side in ("graphed", "eager"))  # fmt: skip
        for rows in (graphed_rows, eager_rows):
            for row in rows:
                row.pop("wall_time", None)
        assert graphed_rows == eager_rows and len(graphed_rows) > 2
