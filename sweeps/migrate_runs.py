"""Rewrite run.json files written before they described themselves (harness.run_info.SCHEMA), once:

    python -m sweeps.migrate_runs docs/results          # every run.json under it, its sub-folders included
    python -m sweeps.migrate_runs runs --dry-run        # say what would change, write nothing

Each run.json gains what the tools now read from it and no longer compute from today's scripts (issue 86): its
"schema", "identity" (harness.run_info.run_identity), "algorithm" and "label", computed here as the tools computed
them before: the script's defaults read by importing it, the env's settings by making it, and the tables below of
what older code did (MERGED, LABELLED_AGAINST, PATCH_OFF, and harness.run_info.VALUE_BEFORE for an argument that a
run.json predates). Nothing else of the file changes: its keys keep their order and its indentation (an "identity"
stored by an older formula is replaced where it stands). A run.json already at SCHEMA, or of a run still running
(running.lock beside it), is left as it is; one at SCHEMA whose script's defaults changed since it was written
(CHANGED_DEFAULTS) gets today's label. tests/test_migration.py checks that every kept run reads with the label, grid
point and score it had before, the changed defaults' arguments aside."""

import argparse
import functools
import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

from harness.archive import RefusedRuns, read_run
from harness.files import replace_atomically
from harness.run_info import ALGORITHMS, SCHEMA, VALUE_BEFORE, changed_args, describe_run

ROOT = Path(__file__).resolve().parent.parent  # the scripts, imported from the repository root

# The discrete research variants before they merged into one (issue 65): their kept runs keep their script's name,
# and read as dau_discrete_research.py's runs with the same arguments (which compute the same numbers).
MERGED = dict.fromkeys(("dau_discrete_beyond_paper.py", "dau_discrete_td_noise.py", "dau_discrete_horizon.py"),
                       "dau_discrete_research.py")  # fmt: skip
OLD_ALGORITHMS = {**ALGORITHMS, **dict.fromkeys(MERGED, "DAU")}
# A script labelled against another's defaults: dau_discrete.py's runs before the options moved out recorded
# them (value_update "all"...), and its defaults lack them; the variant script's defaults are those options off.
LABELLED_AGAINST = {"dau_discrete.py": "dau_discrete_research.py"}
# Defaults of the paper scripts changed since runs were kept: a kept run of such a script, at SCHEMA, is labelled again
# against today's defaults (its identity, a hash of its arguments, is unchanged), so that it reads as what it is: the
# argument whose default changed, and the commit and what changed.
CHANGED_DEFAULTS = {
    "ddpg_baseline.py": ("policy_learning_rate", "d2f9cb3: the unscaled actor's rate alpha~^Q dt0 (issue 84), was the "
                                                 "env's alpha~^pi dt0"),
}  # fmt: skip
# Arguments of the probes' patches (docs/results/cartpole_probes), which the scripts do not have, at the value that
# computes what the script computes: a run made with the patch applied and the option off is the script's run.
PATCH_OFF = {"weight_decay": 0.0, "reward_scale": 1.0}


def known_script(script):
    """The repository's script whose defaults a run of `script` is labelled against: itself, the script it merged
    into (MERGED), or for a patched copy kept beside its runs (dau_discrete_rs.py) the script whose name begins its
    own."""
    stem = Path(script).stem
    known = [name for name in OLD_ALGORITHMS
             if stem.startswith(Path(name).stem) and name not in LABELLED_AGAINST.values()]  # fmt: skip
    found = max(known, key=len) if known else None
    return MERGED.get(found) or LABELLED_AGAINST.get(found, found)


@functools.cache
def script_defaults(script, scaled=False):
    """The default arguments of a script's Args dataclass (importing the script runs no training); a baseline's
    with --scaled (`scaled`), whose defaults differ (ddpg_baseline.py's actor rate)."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return asdict(module.Args(scaled=True) if scaled else module.Args())


@functools.cache
def settings_of(env_id):
    """What the scripts put in place of the arguments left at None for this env, and its native dt."""
    from dt_wrappers import make_env
    from harness.settings import env_settings

    env = make_env(env_id)
    return env_settings(env), env.get_wrapper_attr("dt")


def resolved_args(script, given):
    """The arguments a run of `script` with the arguments `given` has: the script's defaults for the rest, the env's
    settings for those left at None, and the round that --round-seconds sets."""
    from harness.args import set_round_seconds

    wanted = {**script_defaults(script, given.get("scaled", False)), **given}
    settings, native_dt = settings_of(wanted["env_id"])
    args = wanted | {key: settings[key] for key, value in wanted.items() if value is None and key in settings}
    if args.get("round_seconds") is not None:
        resolved = SimpleNamespace(**args)
        set_round_seconds(resolved, args["dt"] or native_dt)
        args = vars(resolved)
    return args


def described(run):
    """describe_run's fields for a run.json from before SCHEMA, as the tools read it before: its arguments, those
    of its script that it predates read as VALUE_BEFORE says, labelled against the defaults of its known_script
    (PATCH_OFF for a patch's options)."""
    script, reference = run["script"], known_script(run["script"])
    fields = describe_run(script, run["args"], None)  # the identity from the arguments recorded
    if reference is None:  # other code (OTHER_CODE), or a script of no known algorithm: named alone
        return fields
    defaults = script_defaults(reference)
    args = {key: value for key, value in VALUE_BEFORE.items() if key in defaults} | run["args"]
    place = {key: args[key] for key in ("env_id", "dt", "round_seconds", "scaled") if key in args}
    expected = PATCH_OFF | resolved_args(reference, place) | {"round_seconds": defaults["round_seconds"]}
    name = OLD_ALGORITHMS.get(script) or Path(script).stem
    if script in ("ddpg_baseline.py", "dqn_baseline.py"):
        name += "-scaled" if args.get("scaled") else "-unscaled"
    return fields | {"algorithm": OLD_ALGORITHMS[reference], "label": changed_args(name, args, expected)}


def migrated(run):
    """The run.json with describe_run's fields: an "identity" already there replaced where it stands, the others
    after "args"."""
    fields, new = described(run), {}
    for key, value in run.items():
        new[key] = fields[key] if key in fields else value
        if key == "args":
            new.update({key: value for key, value in fields.items() if key not in run})
    return new


def relabelled(run):
    """A run.json at SCHEMA of a script whose defaults changed since (CHANGED_DEFAULTS), labelled against today's
    defaults; its identity must not change (a ValueError if it would)."""
    fields = described(run)
    if fields["identity"] != run["identity"]:
        raise ValueError(f"{run['run_name']}: relabelling would change its identity")
    return run | {"label": fields["label"]}


def migrate(folders, dry_run=False):
    """Rewrite every run.json under the folders (recursively) that predates SCHEMA, and label again those at SCHEMA
    whose script's defaults changed since (CHANGED_DEFAULTS) where their label differs. Every file is read and its
    new text made before any is written, so a refused one leaves all as they were. Returns (rewritten, left as they
    are) paths."""
    writes, left = {}, []
    for folder in folders:
        for path in sorted(Path(folder).rglob("run.json")):
            run = read_run(path, schema=None)
            if (path.parent / "running.lock").exists():
                left.append(path)
                continue
            if run.get("schema") == SCHEMA:
                new_run = relabelled(run) if run["script"] in CHANGED_DEFAULTS else run
                if new_run == run:
                    left.append(path)
                    continue
            else:
                new_run = migrated(run)
            text = path.read_text()
            indent = 1 if text.startswith("{\n ") and not text.startswith("{\n  ") else 2 if "\n" in text else None
            writes[path] = json.dumps(new_run, indent=indent) + ("\n" if text.endswith("\n") else "")
    for path, new_text in writes.items() if not dry_run else ():
        replace_atomically(path, "w", lambda file, new_text=new_text: file.write(new_text))
    return list(writes), left


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", help="folders of runs (searched recursively for run.json)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be rewritten, write nothing")
    args = parser.parse_args(argv)
    try:
        rewritten, left = migrate(args.folders, args.dry_run)
    except (RefusedRuns, ValueError) as error:
        sys.exit(f"error: {error}")
    print(f"{'would rewrite' if args.dry_run else 'rewrote'} {len(rewritten)} run.json; left {len(left)} as they are "
          f"(at schema {SCHEMA} with today's label, or still running)")  # fmt: skip


if __name__ == "__main__":
    main()
