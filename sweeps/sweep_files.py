"""The sweep files (sweeps/paper/*.yaml ...): read and checked, their grid, the order their points run in, and the
command `wandb agent` starts for a point (sweeps/run_local.py runs it)."""

import itertools
import os
import sys
from pathlib import Path

import yaml
from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

from sweeps.print_args import resolve


def parse_value(text):
    """A command-line value: 600 -> int, 1e-3 -> float, true -> bool, anything else as YAML reads it."""
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return yaml.safe_load(text)


def load_sweep(path, overrides=()):
    """Read and check a sweep file; overrides ("key=value[,value...]") replace or add parameters."""
    with open(path) as file:
        sweep = yaml.safe_load(file)
    if not isinstance(sweep, dict) or sweep.get("method") != "grid":
        raise ValueError(f"{path}: only `method: grid` sweeps can run locally")
    command = sweep.get("command", [])
    if "${program}" not in command or "${args_no_boolean_flags}" not in command:
        raise ValueError(f"{path}: `command:` must contain ${{program}} and ${{args_no_boolean_flags}}")
    if not Path(sweep.get("program", "")).is_file():
        raise ValueError(f"{path}: program {sweep.get('program')!r} not found: run from the repository root")
    parameters = dict(sweep.get("parameters") or {})
    parsed = []  # (key, values), checked before the script is imported
    for override in overrides:
        key, separator, values = override.partition("=")
        if not separator or not values:
            raise ValueError(f"--override {override!r}: expected KEY=VALUE or KEY=V1,V2")
        parsed.append((key, [parse_value(value) for value in values.split(",")]))
    defaults = resolve(sweep["program"], [[]])[0]["defaults"]  # the script's Args, printed by --print-args
    for key, values in parsed:
        if defaults.get(key) is not False:  # only a flag off by default takes a boolean (see below)
            values = [str(value) if isinstance(value, bool) else value for value in values]
        parameters[key] = {"value": values[0]} if len(values) == 1 else {"values": values}
    for key, spec in parameters.items():
        if key not in defaults:
            raise ValueError(f"{path}: {key!r} is not an argument of {sweep['program']}")
        if not isinstance(spec, dict) or not ("value" in spec or spec.get("values")):
            raise ValueError(f"{path}: parameter {key!r} needs `value:` or a non-empty `values:` list")
        values = spec["values"] if "values" in spec else [spec["value"]]
        if defaults[key] is not False and any(isinstance(value, bool) for value in values):
            # ${args_no_boolean_flags} makes true a bare flag and drops false: right only for flags off by default.
            raise ValueError(f"{path}: {key}: write the value as a string, 'True' or 'False' (quoted): a YAML boolean "
                             f"reaches the script as a bare --{key} or not at all")  # fmt: skip
    return {**sweep, "parameters": parameters, "defaults": defaults}


def grid(sweep):
    """Every grid point, as {key: value}."""
    keys = list(sweep["parameters"])
    choices = [spec["values"] if "values" in spec else [spec["value"]] for spec in sweep["parameters"].values()]
    return [dict(zip(keys, point, strict=True)) for point in itertools.product(*choices)]


def agent_command(sweep, point):
    """The command `wandb agent` starts for this grid point (wandb_agent.Agent._command_run)."""
    macros = create_sweep_command_args({"args": {key: {"value": value} for key, value in point.items()}})
    macros |= {"env": ["/usr/bin/env"], "interpreter": [sys.executable], "program": [sweep["program"]]}
    command = []
    for item in map(str, sweep["command"]):
        is_macro = item.startswith("${") and item.endswith("}")
        command += (macros.get(item[2:-1]) or []) if is_macro else [item]
    return command


def point_argv(sweep, point):
    """The arguments the point's command (agent_command) passes its program."""
    command = agent_command(sweep, point)
    return command[command.index(sweep["program"]) + 1 :]


def describe(sweep, point):
    """Short name of a grid point: the script, its env, dt and seed, and any other parameter that varies."""
    shown = [key for key in ("env_id", "dt", "seed") if key in point]
    shown += [key for key, spec in sweep["parameters"].items() if "values" in spec and key not in shown]
    return " ".join([Path(sweep["program"]).stem, *(f"{key}={point[key]}" for key in shown)])


def schedule(jobs):
    """Seed by seed (a partial sweep covers every dt), smallest dt (longest run) first within a seed."""

    def key(job):
        sweep, point = job
        seeds = sweep["parameters"].get("seed", {})
        seed_rank = seeds["values"].index(point["seed"]) if "values" in seeds else 0
        return seed_rank, point.get("dt") or 0.0

    return sorted(jobs, key=key)


def check_wandb(sweeps):
    """The sweep files pass --track: fail now, not in every run, when W&B has no credentials."""
    if os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return
    if not any("--track" in map(str, sweep["command"]) for sweep in sweeps):
        return
    import wandb

    try:
        wandb.Api(timeout=30)
    except wandb.errors.UsageError as error:
        raise ValueError(
            f"W&B: {error} Or set WANDB_MODE=offline (W&B files kept locally) or WANDB_MODE=disabled."
        ) from None
