"""What the tools know of a finished run: its grid point (identity), its label, and a folder's finished runs.

No script imports it: it is the runs' catalogue. The sweep runner (sweeps/run_local.py) and the analysis (analysis/)
both read runs through it, so that the runner finds the same runs done that plot.py, compare.py, diagnostics.py and
invariance.py count. It reads what run.json records when it is written (harness.run_info.describe_run), and imports
no training script, makes no env and imports no torch:

- a run's identity is its run.json's "identity" (harness.run_info.run_identity of its script and arguments);
- a run's label is its run.json's "label": its algorithm and its non-default algorithm arguments, without spaces:
  DAU, DQN-unscaled, DDPG-scaled, DAU+value_learning_rate=0.01, DAU+round_seconds=0.1 ("non-default": not what the
  script used for that env and dt, the per-env settings included), and its algorithm its "algorithm";
- finished_runs refuses, in one line naming both folders, two finished runs with the same env, label, budget, dt and
  seed: plotted, they would be counted as one (or one of them silently dropped); read_run refuses a run.json that is
  not whole, not a run's (no "script" or "args"), unreadable, or written before it recorded these (no "schema":
  sweeps/migrate_runs.py rewrites it once), naming it (RefusedRuns, which every command prints as its one-line
  error).
"""

import json
from pathlib import Path

from harness.run_info import SCHEMA, UNRECORDED, same_value  # noqa: F401 (same_value: compare.py's and sweeps')


class RefusedRuns(ValueError):
    """Runs the tools refuse to read, in one line that names them (each command prints it as its error)."""


class DuplicateRuns(RefusedRuns):
    """Two finished runs of one grid point where the tools count one."""


def read_run(path, schema=SCHEMA):
    """A run.json that records `schema` (None: any, as the migration reads the runs it rewrites). One that is not
    whole JSON (a copy cut short, a disk that filled, a hand edit; the scripts write it atomically), not a JSON object
    with the "script" (a string) and "args" (an object) that every run.json has, or that cannot be read (a folder of
    that name, a broken link, no permission) is refused, naming it: read as nothing, or raising where a tool looks up
    its script or arguments, its run would leave the plots and the "done" lists without a word, or stop the tool with
    a traceback."""
    try:
        with open(path) as file:
            run = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RefusedRuns(f"{path} is not a whole run.json ({error}): restore it, or remove its run's folder") from None
    except OSError as error:
        raise RefusedRuns(f"{path} cannot be read ({error.strerror or error}): restore it, or remove its run's "
                          "folder") from None  # fmt: skip
    if not isinstance(run, dict):
        raise RefusedRuns(f"{path} is not a run.json (a JSON {type(run).__name__}): restore it, or remove its folder")
    missing = [f'"{key}" {name}' for key, kind, name in (("script", str, "string"), ("args", dict, "object"))
               if not isinstance(run.get(key), kind)]  # fmt: skip
    if missing:
        raise RefusedRuns(f"{path} is not a run.json (no {' or '.join(missing)}): restore it, or remove its folder")
    if schema is not None and run.get("schema") != schema:
        raise RefusedRuns(f"{path} records no identity or label (schema {run.get('schema')}, not {SCHEMA}): "
                          f"rewrite it once with python -m sweeps.migrate_runs {Path(path).parent.parent}")  # fmt: skip
    return run


def code_of(run):
    """The code that made a run, from run.json's "code" (harness.run_info.code_history): its commits, short, in the
    order they ran it, "+changes" after one whose Python files had uncommitted changes; "no git" for a run made
    outside a git checkout (or in one without a commit), "unrecorded" for a run.json from before the record
    (2026-11-27), and for the part of a run made before it, resumed since."""
    names = []
    for version in run.get("code", [UNRECORDED]):
        if version == UNRECORDED:  # a run from before the record (resumed since, it has later versions too)
            names.append("unrecorded")
        elif version["commit"] is None:
            names.append("no git")
        else:
            names.append(version["commit"][:7] + ("+changes" if version["uncommitted_changes"] else ""))
    return " then ".join(names)


def identity(run):
    """The run's grid point (harness.run_info.run_identity), as its run.json records it."""
    return run["identity"]


def label(run):
    """DAU, DQN-unscaled, DAU+value_learning_rate=0.01...: the algorithm, then each algorithm argument (sorted) whose
    value is not the one the script used for the run's env and dt, as its run.json records it."""
    return run["label"]


def algorithm(run):
    """DAU, DDPG or DQN (None for another script), as its run.json records it."""
    return run["algorithm"]


def finished_runs(folders, env_ids=()):
    """{(env_id, label, dt, seed): (run folder, run.json)} of the finished runs in the folders (each a folder of
    runs/<run_name>/run.json), sorted. A label gets "@<total_time>s" where its env has runs of it at several budgets.
    Raises DuplicateRuns, naming both folders, for two finished runs of one env, label, budget, dt and seed."""
    found = {}
    for folder in [folders] if isinstance(folders, str | Path) else folders:
        for path in sorted(Path(folder).glob("*/run.json")):
            run = read_run(path)
            if not run or not run.get("completed") or (env_ids and run["args"]["env_id"] not in env_ids):
                continue
            key = run["args"]["env_id"], label(run), float(run["args"]["total_time"]), run["dt"], run["args"]["seed"]
            if key in found:
                env_id, name, total_time, dt, seed = key
                raise DuplicateRuns(
                    f"two finished runs of {env_id} {name} ({total_time:g} s) at dt {dt:g}, seed "
                    f"{seed}: {found[key][0]} and {path.parent}; keep one of them in this folder"
                )
            found[key] = path.parent, run
    budgets = {}
    for env_id, name, total_time, _, _ in found:
        budgets.setdefault((env_id, name), set()).add(total_time)
    runs = {}
    for (env_id, name, total_time, dt, seed), value in found.items():
        shown = f"{name}@{total_time:g}s" if len(budgets[env_id, name]) > 1 else name
        runs[env_id, shown, dt, seed] = value
    return dict(sorted(runs.items()))
