"""What the tools know of a finished run: its grid point (identity), its label, and a folder's finished runs.

No script imports it: it is the runs' catalogue, beside the run's identity (run_info.py) that it reads. The sweep
runner (sweeps/run_local.py) and the analysis (analysis/) both read runs through it, so that the runner finds the
same runs done that plot.py, compare.py, diagnostics.py and invariance.py count:

- a run's identity is harness.run_info.run_identity of the script and arguments its run.json records (computed when
  read, not stored); a run.json older than an argument reads as the value the code had before it
  (harness.run_info.VALUE_BEFORE);
- a run's label is its algorithm and its non-default algorithm arguments, without spaces: DAU, DQN-unscaled,
  DDPG-scaled, DAU+value_learning_rate=0.01, DAU+round_seconds=0.1 ("non-default": not what the script would use
  for that env and dt, the per-env settings included);
- finished_runs refuses, in one line naming both folders, two finished runs with the same env, label, budget, dt and
  seed: plotted, they would be counted as one (or one of them silently dropped); read_run refuses a run.json that is
  not whole, not a run's (no "script" or "args") or unreadable, naming it (RefusedRuns, which every command prints
  as its one-line error).
"""

import functools
import importlib.util
import json
import math
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent  # the scripts, imported from the repository root (python -m ...)

# The discrete research variants before they merged into one (issue 65): their kept runs keep their script's name,
# and read as dau_discrete_research.py's runs with the same arguments (which compute the same numbers).
MERGED = dict.fromkeys(("dau_discrete_beyond_paper.py", "dau_discrete_td_noise.py", "dau_discrete_horizon.py"),
                       "dau_discrete_research.py")  # fmt: skip

ALGORITHMS = {"dau_continuous.py": "DAU", "dau_discrete.py": "DAU", "dau_discrete_research.py": "DAU",
              "dau_continuous_horizon.py": "DAU", "ddpg_baseline.py": "DDPG", "dqn_baseline.py": "DQN",
              **dict.fromkeys(MERGED, "DAU")}  # fmt: skip
# Code that is not the project's, run as one of its runs, with its algorithm and its label, by its --algo: the
# authors' own DAU and unscaled baselines (sweeps/authors_code.py; runs from before --algo are their DAU's).
OTHER_CODE = {"authors_code.py": {"ddau": ("DAU", "DAU-authors"), "dqn": ("DQN", "DQN-authors"),
                                  "ddpg": ("DDPG", "DDPG-authors")}}  # fmt: skip


OTHER_CODE_OPTIONS = ("target_tau", "no_training_time_limit")  # off at their VALUE_BEFORE values


def other_code(run):
    """(algorithm, label) of other code run as one of ours (OTHER_CODE), or None."""
    return OTHER_CODE.get(run["script"], {}).get(run.get("args", {}).get("algo", "ddau"))


# A script labelled against another's defaults: dau_discrete.py's runs before the options moved out recorded
# them (value_update "all"...), and its defaults lack them; the variant script's defaults are those options off.
LABELLED_AGAINST = {"dau_discrete.py": "dau_discrete_research.py"}
BASELINES = ("ddpg_baseline.py", "dqn_baseline.py")  # named with their variant: DQN-unscaled, DQN-scaled
# Not in a label: the run's place in the grid (env, dt, seed), its budget and evaluation, and what changes nothing
# computed (harness.run_info.NOT_COMPUTED); "scaled" is in the baselines' name.
NOT_LABELLED = ("env_id", "dt", "seed", "total_time", "eval_every", "num_eval_envs", "scaled")
# Arguments of the probes' patches (docs/results/cartpole_probes), which the scripts do not have, at the value that
# computes what the script computes: a run made with the patch applied and the option off is the script's run.
PATCH_OFF = {"weight_decay": 0.0, "reward_scale": 1.0}


class RefusedRuns(ValueError):
    """Runs the tools refuse to read, in one line that names them (each command prints it as its error)."""


class DuplicateRuns(RefusedRuns):
    """Two finished runs of one grid point where the tools count one."""


def read_run(path):
    """A run.json. One that is not whole JSON (a copy cut short, a disk that filled, a hand edit; the scripts write
    it atomically), not a JSON object with the "script" (a string) and "args" (an object) that every run.json has,
    or that cannot be read (a folder of that name, a broken link, no permission) is refused, naming it: read as
    nothing, or raising where a tool looks up its script or arguments, its run would leave the plots and the "done"
    lists without a word, or stop the tool with a traceback."""
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
    return run


def code_of(run):
    """The code that made a run, from run.json's "code" (harness.run_info.code_history): its commits, short, in the
    order they ran it, "+changes" after one whose Python files had uncommitted changes; "no git" for a run made
    outside a git checkout (or in one without a commit), "unrecorded" for a run.json from before the record
    (2026-11-27), and for the part of a run made before it, resumed since."""
    from harness.run_info import UNRECORDED

    names = []
    for version in run.get("code", [UNRECORDED]):
        if version == UNRECORDED:  # a run from before the record (resumed since, it has later versions too)
            names.append("unrecorded")
        elif version["commit"] is None:
            names.append("no git")
        else:
            names.append(version["commit"][:7] + ("+changes" if version["uncommitted_changes"] else ""))
    return " then ".join(names)


def filled_args(run):
    """The run's arguments, those of its script that its run.json predates read as the code had them
    (harness.run_info.VALUE_BEFORE)."""
    from harness.run_info import VALUE_BEFORE

    reference = known_script(run["script"])
    defaults = script_defaults(reference) if reference else {}
    return {key: value for key, value in VALUE_BEFORE.items() if key in defaults} | run["args"]


def identity(run):
    """The run's grid point (harness.run_info.run_identity), recomputed from its arguments: older run.json have none."""
    from harness.run_info import run_identity

    return run_identity(run["script"], run["args"])


def known_script(script):
    """The repository's script whose defaults a run of `script` is labelled against: itself, the script it merged
    into (MERGED), or for a patched copy kept beside its runs (dau_discrete_rs.py) the script whose name begins its
    own."""
    stem = Path(script).stem
    known = [name for name in ALGORITHMS if stem.startswith(Path(name).stem) and name not in LABELLED_AGAINST.values()]
    found = max(known, key=len) if known else None
    return MERGED.get(found) or LABELLED_AGAINST.get(found, found)


def current_script(script):
    """The repository's script that runs what a run of `script` ran: itself, or the script it merged into (MERGED)."""
    return MERGED.get(script, script)


@functools.cache
def script_defaults(script):
    """The default arguments of a script's Args dataclass (importing the script runs no training)."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return asdict(module.Args())


@functools.cache
def settings_of(env_id):
    """What the scripts put in place of the arguments left at None for this env, and its native dt."""
    from dt_wrappers import make_env
    from harness.settings import env_settings

    env = make_env(env_id)
    return env_settings(env), env.get_wrapper_attr("dt")


def resolved_args(script, given):
    """The arguments a run of `script` with the arguments `given` has, as run.json records them: the script's
    defaults for the rest, the env's settings for those left at None, and the round that --round-seconds sets."""
    from harness.args import set_round_seconds

    wanted = {**script_defaults(script), **given}
    settings, native_dt = settings_of(wanted["env_id"])
    args = wanted | {key: settings[key] for key, value in wanted.items() if value is None and key in settings}
    if args.get("round_seconds") is not None:
        resolved = SimpleNamespace(**args)
        set_round_seconds(resolved, args["dt"] or native_dt)
        args = vars(resolved)
    return args


def same_value(recorded, wanted):
    if isinstance(wanted, float | int) and not isinstance(wanted, bool) and isinstance(recorded, float | int):
        return math.isclose(recorded, wanted, rel_tol=1e-9)
    return recorded == wanted


def label(run):
    """DAU, DQN-unscaled, DAU+value_learning_rate=0.01...: the algorithm, then each algorithm argument (sorted) whose
    value is not the one the script would use for the run's env and dt."""
    from harness.run_info import NOT_COMPUTED, VALUE_BEFORE

    script, args = run["script"], filled_args(run)
    name = ALGORITHMS.get(script) or (other_code(run) or (None, Path(script).stem))[1]
    if script in BASELINES:
        name += "-scaled" if args.get("scaled") else "-unscaled"
    reference = known_script(script)
    if reference is None:  # other code: its options that are on (sweeps/authors_code.py's --target-tau 0.9...)
        on = [
            (key, value)
            for key, value in sorted(args.items())
            if key in OTHER_CODE_OPTIONS and value != VALUE_BEFORE[key]
        ]
        return "+".join(
            [name, *(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in on)]
        )
    place = {key: args[key] for key in ("env_id", "dt", "round_seconds") if key in args}
    expected = (
        PATCH_OFF | resolved_args(reference, place) | {"round_seconds": script_defaults(reference)["round_seconds"]}
    )
    changed = [
        f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
        for key, value in sorted(args.items())
        if key not in (*NOT_LABELLED, *NOT_COMPUTED) and not same_value(value, expected.get(key, ...))
    ]
    return "+".join([name, *(text.replace(" ", "") for text in changed)])


def algorithm(run):
    """DAU, DDPG or DQN: the algorithm of the run's script, of the script a patched copy is (known_script), or of
    other code run as one of ours (OTHER_CODE); None for another script."""
    reference = known_script(run["script"])
    return ALGORITHMS[reference] if reference else (other_code(run) or (None,))[0]


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
