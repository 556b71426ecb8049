"""runs/<run_name>/run.json: what a run ran (its script, resolved arguments and code), on what (the libraries' versions,
the machine) and how it ended; sweeps/ reads it while runs go on and after they stop. It records, when it is written,
all that the tools need to read it (describe_run): its schema (SCHEMA), its identity (`run_identity`, the grid point
sweeps/ finds its runs by), its algorithm and its label; the tools (harness/archive.py) read them and compute
nothing from today's scripts. The kept run.json written before SCHEMA were rewritten once with them
(sweeps/migrate_runs.py). The constants below say what an identity and a label leave out. This module imports no
torch until a run records its versions and machine."""

import hashlib
import importlib.metadata
import json
import math
import os
import platform
import subprocess
from pathlib import Path

from harness.files import save_json

# torch is imported where a run's versions and machine are recorded: the tools that read runs (harness/archive.py)
# import this module for the constants below, and import no torch.

SCHEMA = 1  # run.json's "schema": 1, its resolved arguments with their identity, label and algorithm (issue 86)
NON_FINITE_LOSS = "non-finite loss"  # run.json's stopped_by for a run that diverged: run again, it diverges again
# Arguments that change nothing a run computes: a run's identity (run_identity) leaves them out.
NOT_COMPUTED = ("exp_name", "cpu", "track", "wandb_project_name", "wandb_entity", "wandb_group", "save_model",
                "eval_model", "capture_video", "checkpoint_every", "resume", "env_workers",
                "eval_in_background", "print_args")  # fmt: skip
# What the code computed before an argument existed, as that argument's value: a run.json written before it has no
# such key, and reads as this (the commit that added the argument, which kept the numbers of the code before it).
VALUE_BEFORE = {"round_seconds": None,  # 5a765e3: --round-seconds, off by default
                "value_update": "all",  # 5c015d2: V learns from every transition, as in Alg. 1
                "value_learning_rate": None,  # 6dc78e5: one step size for V and A, as in Alg. 1
                "learning_rate_reference_dt": None, "terminal_rows": 0,  # the TD noise options, off
                "weight_decay": 0.0,
                "advantage_without_terminal_rows": False, "value_horizon": None,  # the horizon options, off
                "advantage_rate_clip": None,  # its third (issue 56), off
                "buffer_transitions": None,  # issue 76: the memory in physical seconds (--buffer-time), not a ring
                "squared_loss": False, "truncation_as_termination": False,  # issue 76 §5: the authors' code's
                "first_round_steps": None, "zero_last_bias": False,  # other differences, off
                "algo": "ddau", "no_training_time_limit": False, "target_tau": 0.0,  # issue 84: authors_code.py's flags
                }  # fmt: skip
# Scripts that compute what another script computes with the same arguments (its options off: a test checks it).
# dau_discrete_research.py merged three (issue 65), whose kept runs keep their names.
SAME_COMPUTATION = {"dau_discrete_research.py": "dau_discrete.py", "dau_continuous_horizon.py": "dau_continuous.py",
                    "dau_discrete_beyond_paper.py": "dau_discrete.py", "dau_discrete_td_noise.py": "dau_discrete.py",
                    "dau_discrete_horizon.py": "dau_discrete.py"}  # fmt: skip


def run_identity(script, args):
    """A run's grid point: a hash of its script and of the arguments that change what it computes. Two runs with
    one identity compute the same numbers, whatever their folders, names and W&B settings; a run.json older than an
    argument reads as VALUE_BEFORE says. An argument at its VALUE_BEFORE value (an option off) is left out, so that
    an option added later changes no identity already made."""

    def canonical(value):  # 1800 and 1800.0, or 0.1 and 0.1 + 1e-17, are the same argument
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(f"{value:.12g}")
        return value

    computed = {key: canonical(value) for key, value in args.items()
                if key not in NOT_COMPUTED and not (key in VALUE_BEFORE and value == VALUE_BEFORE[key])}  # fmt: skip
    text = json.dumps({"script": SAME_COMPUTATION.get(script, script), "args": computed}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


ALGORITHMS = {"dau_continuous.py": "DAU", "dau_discrete.py": "DAU", "dau_discrete_research.py": "DAU",
              "dau_continuous_horizon.py": "DAU", "ddpg_baseline.py": "DDPG", "dqn_baseline.py": "DQN"}  # fmt: skip
# Code that is not the project's, run as one of its runs, with its algorithm and its label, by its --algo: the
# authors' own DAU and unscaled baselines (sweeps/authors_code.py).
OTHER_CODE = {"authors_code.py": {"ddau": ("DAU", "DAU-authors"), "dqn": ("DQN", "DQN-authors"),
                                  "ddpg": ("DDPG", "DDPG-authors")}}  # fmt: skip
# Other code's options and their defaults (sweeps/authors_code.py's Args; a test checks them), in its label where
# another value is given: DDPG-authors+target_tau=0.9, DDPG-authors+num_envs=128.
OTHER_CODE_OPTIONS = {"target_tau": 0.0, "no_training_time_limit": False, "num_envs": 256, "steps_per_round": 10,
                      "updates_per_round": 50}  # fmt: skip
BASELINES = ("ddpg_baseline.py", "dqn_baseline.py")  # named with their variant: DQN-unscaled, DQN-scaled
# Not in a label: the run's place in the grid (env, dt, seed), its budget and evaluation, and what changes nothing
# computed (NOT_COMPUTED); "scaled" is in the baselines' name.
NOT_LABELLED = ("env_id", "dt", "seed", "total_time", "eval_every", "num_eval_envs", "scaled")


def same_value(recorded, wanted):
    """Two arguments' values are the same (numbers up to rounding: 0.1 and 0.1 + 1e-17)."""
    if isinstance(wanted, float | int) and not isinstance(wanted, bool) and isinstance(recorded, float | int):
        return math.isclose(recorded, wanted, rel_tol=1e-9)
    return recorded == wanted


def changed_args(name, args, expected):
    """A run's label: `name` (its algorithm, DQN-unscaled...), then each argument (sorted) whose value differs from
    `expected` (what the script uses for the run's env and dt), leaving out NOT_LABELLED and NOT_COMPUTED:
    DAU+value_learning_rate=0.01, DAU+round_seconds=0.1."""
    changed = [
        f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
        for key, value in sorted(args.items())
        if key not in (*NOT_LABELLED, *NOT_COMPUTED) and not same_value(value, expected.get(key, ...))
    ]
    return "+".join([name, *(text.replace(" ", "") for text in changed)])


def describe_run(script, args, expected):
    """What run.json records for the tools to read it (harness/archive.py), when it is written: its schema, its
    identity (run_identity), its algorithm (DAU, DDPG or DQN; None for another script) and its label. `args`: the
    run's resolved arguments; `expected`: the script's own, resolved for the run's env, dt and round (the defaults a
    label leaves out), or None for other code (OTHER_CODE: labelled by its --algo and OTHER_CODE_OPTIONS)."""
    name = Path(script).name
    other = OTHER_CODE.get(name, {}).get(args.get("algo", "ddau"))
    algorithm = ALGORITHMS.get(name) or (other or (None,))[0]
    label = ALGORITHMS.get(name) or (other or (None, Path(name).stem))[1]
    if name in BASELINES:
        label += "-scaled" if args.get("scaled") else "-unscaled"
    if expected is not None:
        label = changed_args(label, args, expected)
    elif other is not None:
        label = changed_args(label, {key: args[key] for key in OTHER_CODE_OPTIONS if key in args}, OTHER_CODE_OPTIONS)
    return {"schema": SCHEMA, "identity": run_identity(name, args), "algorithm": algorithm, "label": label}


def library_versions():
    """Python's and the libraries' versions a run's numbers depend on (run.json), None for one not installed."""
    import torch

    # torch's own version names its build (2.13.0+cpu, 2.11.0+cu130), which a GPU image's pip metadata may not.
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("numpy", "gymnasium", "mujoco", "box2d"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine_info(device):
    """What a run ran on, beside library_versions (run.json): the CPU's model, the cores this process may use,
    torch's threads, MKL's pinned code path (MKL_CBWR, None: MKL's own choice) and the device. The same seed gives
    the same numbers only with the same thread count, and on another machine only with a CPU that takes the same
    code path (docs/common.md, "Reproducibility and speed")."""
    import torch

    cpu = None
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as file:
            cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return {"cpu": cpu or platform.processor() or platform.machine(), "cores": cores,
            "torch_threads": torch.get_num_threads(), "mkl_cbwr": os.environ.get("MKL_CBWR"),
            "device": device_name}  # fmt: skip


def code_version(script):
    """The code of `script` (a path): the git commit checked out in its folder, and whether any Python file of that
    tree differs from it (modified, staged or untracked; the scripts, dt_wrappers.py and harness/ are what a run
    runs, and a change to tests/ or sweeps/ counts too, to be safe; a change under docs/ does not).
    {"commit": None, "uncommitted_changes": None} where that commit does not hold the script: outside a git checkout,
    in one without a commit, without git, or where the script is not tracked (a copy of the scripts in another
    project's checkout, ignored or not: that checkout's commit would name code the run did not run)."""
    folder, name = os.path.split(os.path.realpath(script))

    def git(*command):  # --no-optional-locks: a run starting during a `git commit` takes no lock of the index
        return subprocess.run(["git", "--no-optional-locks", "-C", folder, *command], capture_output=True, text=True,
                              timeout=60)  # fmt: skip

    try:
        commit = git("rev-parse", "--verify", "HEAD")
        tracked = git("ls-files", "--error-unmatch", "--", name)  # exits 1 for a file git does not track
        changes = git("status", "--porcelain", "--untracked-files=all", "--", "*.py")
    except (OSError, subprocess.TimeoutExpired):  # no git on this machine
        return {"commit": None, "uncommitted_changes": None}
    if any(result.returncode != 0 for result in (commit, tracked, changes)):  # no checkout, commit, or tracked script
        return {"commit": None, "uncommitted_changes": None}
    return {"commit": commit.stdout.strip(), "uncommitted_changes": bool(changes.stdout.strip())}


UNRECORDED = {"commit": "unrecorded", "uncommitted_changes": None}  # the code before run.json recorded it


def code_history(run_dir, script):
    """run.json's "code": the code versions (code_version) that ran the run, in order. A resumed run keeps those of
    its run.json and adds its own where it differs from the last (a run resumed by another commit has both)."""
    history, path = [], os.path.join(run_dir, "run.json")
    if os.path.isfile(path):  # a resumed run (a new run's folder has none yet)
        try:
            with open(path) as file:
                history = json.load(file).get("code", [UNRECORDED])  # made by a script from before the record
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as error:
            raise ValueError(f"{path} is not a whole run.json ({error}): restore it, or start the run again") from None
    current = code_version(script)
    return history if history and history[-1] == current else [*history, current]


def write_run_info(run_dir, *, script, run_name, dt, args, described, device, wandb_id, code, **results):
    """runs/<run_name>/run.json: what ran (its resolved arguments, and `described`: describe_run's schema, identity,
    algorithm and label), from which code (`code`: code_history), and how it ended (`results`: completed, and once
    the run stops its physical time, counts, wall times, final scaled return, stopped_by and checkpoint)."""
    info = {"script": script, "run_name": run_name, "dt": dt, "args": vars(args), **described, "code": code,
            "versions": library_versions(), "machine": machine_info(device), "wandb_id": wandb_id,
            **results}  # fmt: skip
    save_json(info, os.path.join(run_dir, "run.json"))  # whole or not at all, whenever the run stops
