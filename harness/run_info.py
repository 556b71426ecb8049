"""runs/<run_name>/run.json: what a run ran (its script, arguments and code), on what (the libraries' versions,
the machine) and how it ended; sweeps/ reads it while runs go on and after they stop. A run's identity
(`run_identity`) is the grid point sweeps/ finds its runs by, always computed from the script and arguments that
run.json records. It is not stored: the run.json of earlier commits kept an "identity" that no tool reads, 19 of
them (docs/results/cartpole_td_noise_probes) made by the formula before 69451aa, which merged VALUE_BEFORE into the
arguments. The constants below say what it leaves out and how a run.json older than an argument reads."""

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess

import torch

from harness.files import save_json

NON_FINITE_LOSS = "non-finite loss"  # run.json's stopped_by for a run that diverged: run again, it diverges again
# Arguments that change nothing a run computes: a run's identity (run_identity) leaves them out.
NOT_COMPUTED = ("exp_name", "cpu", "track", "wandb_project_name", "wandb_entity", "wandb_group", "save_model",
                "eval_model", "capture_video", "checkpoint_every", "resume", "env_workers",
                "eval_in_background")  # fmt: skip
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


def library_versions():
    """Python's and the libraries' versions a run's numbers depend on (run.json), None for one not installed."""
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


def write_run_info(run_dir, *, script, run_name, dt, args, device, wandb_id, code, **results):
    """runs/<run_name>/run.json: what ran, from which code (`code`: code_history), and how it ended (`results`:
    completed, and once the run stops its physical time, counts, wall times, final scaled return, stopped_by and
    checkpoint)."""
    info = {"script": script, "run_name": run_name, "dt": dt, "args": vars(args), "code": code,
            "versions": library_versions(), "machine": machine_info(device), "wandb_id": wandb_id,
            **results}  # fmt: skip
    save_json(info, os.path.join(run_dir, "run.json"))  # whole or not at all, whenever the run stops
