"""The checkpoint, runs/<run_name>/checkpoint.pt, written and read here only; and the model files.

checkpoint.pt holds all that --resume needs to go on as if never stopped, one dict of data only (tensors, numbers,
strings, lists, dicts: torch.load(weights_only=True) reads it without running code):

    script, run_name, device, wandb_id   which run it is and where it ran (a run resumes on the device it ran on)
    torch_threads                        torch's thread count (a resumed run keeps it: harness/threads.py)
    args                                 its arguments (--resume takes them as the run's own)
    counters                             the clock's and the logs' COUNTERS, and the wall time so far
    state                                each of the script's objects by its state_dict: networks, optimizer, replay
                                         memory, noise, ...
    envs, obs                            the training envs' states (harness/env_state.py) and their observations
    eval_envs                            the evaluation envs' states
    random                               Python's, NumPy's and torch's generators (and CUDA's on a GPU)
    evals_csv_bytes, diagnostics_csv_bytes   the logs' lengths: what was logged after the checkpoint goes
    videos                               with --capture-video: the video env's state

`write_checkpoint` writes it; `load_checkpoint` reads it back as a `Resumed`, which puts it back (`restore`).

model.pt (--save-model, the end of a run) and checkpoints/<time>s.pt (--checkpoint-every): the networks, the optimizer
and the args (`save_model`); model.pt also keeps the evaluation envs as the final evaluation found them, so that
--eval-model (`load_model`, `restore_model`) repeats that evaluation.
"""

import os
import random
import zipfile

import numpy as np
import torch

from harness.env_state import env_state, restore_envs, set_env_state
from harness.envs import env_states, restore_env_states
from harness.files import save_checkpoint

CHECKPOINT = "checkpoint.pt"  # runs/<run_name>/checkpoint.pt: the run's latest whole training state, one per run


def write_checkpoint(run_dir, *, script, run_name, args, device, wandb_id, counters, state, envs, obs, eval_envs,
                     csv_bytes, videos):  # fmt: skip
    """runs/<run_name>/checkpoint.pt: all that --resume needs to go on as if never stopped (the module's docstring
    says what each key holds)."""
    checkpoint = {"script": script, "run_name": run_name, "args": vars(args), "device": device.type,
                  "torch_threads": torch.get_num_threads(), "wandb_id": wandb_id, "counters": counters,
                  "state": {name: thing.state_dict() for name, thing in state.items()},
                  "envs": env_states(envs), "obs": torch.from_numpy(obs),
                  "eval_envs": [env_state(env) for env in eval_envs.envs], "random": random_state(device),
                  "evals_csv_bytes": csv_bytes[0], "diagnostics_csv_bytes": csv_bytes[1]}  # fmt: skip
    if videos is not None:
        checkpoint["videos"] = {"env": env_state(videos.env)}
    save_checkpoint(checkpoint, os.path.join(run_dir, CHECKPOINT))


def checkpoint_counters(clock, logs, wall_time):
    """The checkpoint's counters: the clock's and the logs' COUNTERS, and the wall time so far."""
    counters = {name: getattr(clock, name) for name in clock.COUNTERS}
    return counters | {name: getattr(logs, name) for name in logs.COUNTERS} | {"wall_time": wall_time}


def load_checkpoint(run_dir, script):
    """The checkpoint of runs/<run_name> for `script`, loaded as data only (weights_only: it runs no code), as a
    Resumed; a ValueError that says what is wrong if it is missing, unreadable or another script's."""
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isfile(path):
        reason = "no such folder" if not os.path.isdir(run_dir) else f"no {CHECKPOINT} in it"
        raise ValueError(f"--resume {run_dir}: {reason}. A run keeps one when it is stopped by SIGTERM or run with "
                         "--checkpoint-every; start it again without --resume")  # fmt: skip
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a truncated or corrupt file: zip, pickle or EOF errors
        raise ValueError(f"--resume {run_dir}: {path} is not a readable checkpoint ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else 'no detail'})") from None  # fmt: skip
    if not isinstance(checkpoint, dict) or checkpoint.get("script") != script:
        made_by = checkpoint.get("script") if isinstance(checkpoint, dict) else None
        raise ValueError(f"--resume {run_dir}: its checkpoint was made by {made_by}, not {script}")
    if "state" not in checkpoint:
        raise ValueError(f"--resume {run_dir}: its checkpoint was written by the scripts before the harness, in "
                         "another format: resume it with the commit that made it, or start it again")  # fmt: skip
    return Resumed(checkpoint)


class Resumed:
    """A checkpoint read back for --resume: which run it is (`run_name`, `device`, `wandb_id`, `args`), its counters
    and the logs' lengths (`csv_bytes`), and the rest, which `restore` puts back once and then lets go: its copy of
    the replay memory with it (check_memory budgets the live memory and one checkpoint's copy, not a third)."""

    def __init__(self, checkpoint):
        self.run_name, self.device, self.wandb_id = checkpoint["run_name"], checkpoint["device"], checkpoint["wandb_id"]
        self.args, self.counters = checkpoint["args"], checkpoint["counters"]
        self.torch_threads = checkpoint.get("torch_threads")  # None: a checkpoint from before it was recorded
        self.csv_bytes = checkpoint["evals_csv_bytes"], checkpoint["diagnostics_csv_bytes"]
        self.saved = checkpoint

    def missing(self, state):
        """The names of the script's objects (`state`) that the checkpoint has no state for: an older script's."""
        return sorted(state.keys() - self.saved["state"].keys())

    def restore_counters(self, clock, logs):
        """The clock's and the logs' COUNTERS as the checkpoint has them; returns the wall time so far."""
        clock.restore(self.counters, self.args["checkpoint_every"])
        # A checkpoint from before eval_wait_seconds (issue 73) reads it as eval_seconds: what a run that evaluated
        # at once (the CPU's default) waited; one in the background waited less.
        counters = {"eval_wait_seconds": self.counters["eval_seconds"]} | self.counters
        for name in logs.COUNTERS:
            setattr(logs, name, counters[name])
        return self.counters["wall_time"]

    def restore(self, *, state, envs, obs, eval_envs, videos):
        """Put back the script's objects (`state`), the training envs `envs`, the evaluation envs, the video env
        (`videos`, None without --capture-video) and the generators. Returns the observations to go on from, in
        place of the fresh `obs`."""
        saved, self.saved = self.saved, None
        for name, thing in state.items():
            thing.load_state_dict(saved["state"][name])
        obs = restore_env_states(envs, saved["envs"], saved["obs"].numpy())
        restore_envs(eval_envs, saved["eval_envs"])
        if videos is not None and "videos" in saved:
            set_env_state(videos.env, saved["videos"]["env"])
        set_random_state(saved["random"])
        return obs


def random_state(device):
    """Python's, NumPy's and torch's global generators, and CUDA's on a GPU run (only there: reading it would
    start CUDA in a --cpu run on a GPU machine)."""
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_random_state(state):
    """Put back what random_state saved."""
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    key = np.array(numpy_state["state"]["key"], dtype=np.uint32)
    np.random.set_state({**numpy_state, "state": {**numpy_state["state"], "key": key}})
    torch.set_rng_state(state["torch"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def save_model(path, *, args, optimizer, networks, eval_envs_state=None):
    """The networks, the optimizer and the args (model.pt, checkpoints/<time>s.pt); with the evaluation envs'
    state, --eval-model repeats the evaluation that found them so."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    model = {"args": vars(args), "optimizer": optimizer.state_dict()}
    model |= {name: network.state_dict() for name, network in networks.items()}
    if eval_envs_state:
        model["eval_envs"] = eval_envs_state
    save_checkpoint(model, path)


def load_model(path):
    """A model.pt (or checkpoints/<time>s.pt) saved by --save-model, loaded as data only; a ValueError that names
    the file if it is missing, unreadable or not such a model (its networks are checked by restore_model)."""
    if not os.path.isfile(path):
        raise ValueError(f"--eval-model {path}: no such file")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive: any other file is not a model
        raise ValueError(f"--eval-model {path}: is not a readable model file: not a file torch.save wrote, or one "
                         "cut short (pass the model.pt, or a checkpoints/<time>s.pt, of a run with "
                         "--save-model)")  # fmt: skip
    try:
        model = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a zip archive torch cannot read: zip, pickle or EOF errors
        raise ValueError(f"--eval-model {path}: is not a readable model file ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else 'no detail'})") from None  # fmt: skip
    settings = ("env_id", "dt", "time_limit", "hidden_size")
    if not isinstance(model, dict) or not isinstance(model.get("args"), dict):
        raise ValueError(f"--eval-model {path}: is not a model saved by --save-model (it has no args)")
    if missing := [name for name in settings if name not in model["args"]]:
        raise ValueError(f"--eval-model {path}: is not a model saved by --save-model (its args have no "
                         f"{', '.join(missing)})")  # fmt: skip
    return model


def restore_model(model, path, script, *, networks, eval_envs):
    """Load a model read by load_model into `networks` (a dict of modules, as saved), and put the evaluation envs
    back as its final evaluation found them where it kept them for as many envs; a ValueError that names the file
    if a network is missing or does not fit (another script's model)."""
    if missing := [name for name in networks if name not in model]:
        raise ValueError(f"--eval-model {path}: has no {', '.join(missing)}: a model of another script? (this is "
                         f"{script})")  # fmt: skip
    for name, network in networks.items():
        try:
            network.load_state_dict(model[name])
        except (RuntimeError, TypeError, AttributeError) as error:  # other shapes, or not a state dict
            raise ValueError(f"--eval-model {path}: its {name} does not fit {script}'s "
                             f"({str(error).splitlines()[0]})") from None  # fmt: skip
    if len(model.get("eval_envs", [])) == len(eval_envs.envs):  # model.pt: the final evaluation again
        restore_envs(eval_envs, model["eval_envs"])
