"""The resolved arguments of a script's runs, as run.json will record them, learnt from the script itself: each
command line run with --print-args (harness/args.py's RunArgs; sweeps/authors_code.py's Args), which parses and
settles them as a run does (the env's defaults at its dt, the round that --round-seconds sets), prints them with the
run's identity and label, and exits before any work. The sweep runner asks once per grid point (sweeps/grid_runs.py,
`resolved`), and one process answers for all the points of a sweep file:

    python -m sweeps.print_args dau_discrete.py < command_lines.jsonl    # one JSON list of arguments a line

prints one JSON object a line, in order: what --print-args printed, or {"error": its message}. `resolve` asks it,
and remembers the answers."""

import contextlib
import io
import json
import os
import runpy
import sys
import threading
from subprocess import PIPE, Popen  # the class itself: a test that stands in for the runs' Popen leaves this one


def print_args(program, argv):
    """What `program` run with `argv` and --print-args prints (a dict), or {"error": why it refused them}."""
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [program, *argv, "--print-args"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(program, run_name="__main__")
    except SystemExit as error:
        if error.code not in (0, None):
            message = error.code if isinstance(error.code, str) else err.getvalue().strip() or out.getvalue().strip()
            return {"error": message}
    printed = [line for line in out.getvalue().splitlines() if line.startswith("{")]
    return json.loads(printed[-1]) if printed else {"error": f"{program} printed no arguments: {err.getvalue()[-500:]}"}


def main():
    program = sys.argv[1]
    for line in sys.stdin:
        print(json.dumps(print_args(program, json.loads(line))), flush=True)


if __name__ == "__main__":
    main()


PRINTED = {}  # (program's real path, its arguments): what --print-args printed, asked once per process
ASKING = threading.Lock()  # the runner's workers ask at once: one asks, the others wait for its answer


def command_key(program, argv):
    return os.path.realpath(program), tuple(map(str, argv))


def printed(program, argv):
    """Whether this process has asked `program` for the command line `argv` (resolve)."""
    return command_key(program, argv) in PRINTED


def resolve(program, argvs):
    """What --print-args prints for `program` with each command line in `argvs` (a list of argument lists): one
    process answers for all those not asked before in this process. ValueError, naming the command line and the
    script's message, for one the script refuses."""
    keys = [command_key(program, argv) for argv in argvs]
    with ASKING:
        asked = list(dict.fromkeys(key for key in keys if key not in PRINTED))
        if asked:
            with Popen([sys.executable, "-m", "sweeps.print_args", program], stdin=PIPE, stdout=PIPE, stderr=PIPE,
                       text=True) as process:  # fmt: skip
                stdout, stderr = process.communicate("".join(json.dumps(argv) + "\n" for _, argv in asked), 600)
            answers = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
            if process.returncode != 0 or len(answers) != len(asked):
                raise ValueError(f"{program} --print-args failed: {stderr.strip()[-1000:]}")
            PRINTED.update(zip(asked, answers, strict=True))
    for key in keys:
        if "error" in PRINTED[key]:
            raise ValueError(f"{program} {' '.join(key[1])}: {PRINTED[key]['error']}")
    return [PRINTED[key] for key in keys]
