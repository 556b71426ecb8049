"""The run: what the six scripts do the same way and is not the algorithm, put together from the harness's parts.

A script uses it in this order: `run = Run(Args, ...)` (parse, check, seed, make the evaluation envs),
`run.evaluate_saved_model(...)` (`--eval-model` only), `run.start(...)` (open the logs, or restore a
checkpoint), then `with run: for _ in run.rounds(): ...; run.end_round(...)`. Each part is its own module:
harness/__init__.py lists them.
"""

import atexit
import dataclasses
import json
import os
import random
import sys
import time

import gymnasium as gym
import numpy as np
import torch

from harness.args import buffer_rows, collected_rows, default_args, parse_args, settle_args
from harness.checkpoint import load_model, restore_model
from harness.clock import Preemption
from harness.envs import make_vector_env
from harness.evaluations import policy_copy
from harness.files import claim_run_dir, new_run_dir, release_run_dir, remove_if_never_started, remove_run_dir
from harness.logs import finish_wandb, start_wandb
from harness.loop import Loop
from harness.run_info import code_history, describe_run
from harness.settings import settings_help
from harness.threads import choose_threads
from harness.videos import EvaluationVideos


class Run:
    """One run of a script: its arguments, device, evaluation envs, run folder and W&B run; from `start` on, its
    Loop (harness/loop.py) keeps it going: clock, logs, checkpoints, videos. The training loop stays in the
    script."""

    def __init__(self, args_class, *, description, script_file, action_space, check_args):
        """Parse and check the arguments (`args_class`, the script's Args; `check_args(args)`, its checks of its own
        flags), refusing bad input before any work (an env whose actions are not an `action_space` among it: the
        harness names the scripts for its actions); make the run folder and start W&B; seed every generator; make
        the evaluation envs (`self.eval_envs`) and a probe env (`self.probe`)."""
        self.script, self.script_file = os.path.basename(script_file), script_file
        args, self.resumed = parse_args(args_class, description + "\n" + settings_help(args_class), self.script)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (read when CUDA starts)
        self.args, self.device = args, torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
        if self.resumed and self.resumed.device != self.device.type:
            sys.exit(f"error: {args.resume} ran on {self.resumed.device} and would continue on {self.device.type} "
                     "with other numbers: resume it where it ran (CUDA_VISIBLE_DEVICES= hides a GPU)")  # fmt: skip
        try:
            self.model = load_model(args.eval_model) if args.eval_model else None
            self.probe, self.dt = settle_args(args, self.model, action_space, check_args, self.device)
        except (ValueError, gym.error.Error) as error:
            sys.exit(f"error: {error}")
        print_args, args.print_args = args.print_args, False  # run.json records the run's own arguments
        # run.json's schema, identity, algorithm and label, from the resolved arguments and the script's own defaults
        self.described = describe_run(self.script, vars(args), default_args(args_class, args, self.probe, self.dt))
        if print_args:  # the resolved arguments, as run.json records them, for the sweep runner: no run
            print(json.dumps({"dt": self.dt, "args": vars(args), **self.described,
                              "defaults": dataclasses.asdict(args_class())}), flush=True)  # fmt: skip
            sys.exit(0)
        # One thread whatever the load (harness/threads.py), unless OMP_NUM_THREADS sets another; --resume: its own
        threads_note = choose_threads(self.resumed is not None, self.resumed and self.resumed.torch_threads)
        if threads_note:
            print(threads_note, flush=True)
        # From here on SIGTERM stops the run at its next whole state, with a checkpoint (--eval-model: at once). Set
        # before the run folder is made: a SIGTERM that came between the two left a folder holding only running.lock.
        self.preemption = None if args.eval_model else Preemption()
        self._open_run_dir()
        seed_everything(args.seed, self.device)
        self.eval_envs = make_vector_env(args, self.dt, args.num_eval_envs, args.seed + args.num_envs)
        self.replay_rows = buffer_rows(args, self.dt)
        self.collected_rows = collected_rows(args, self.dt)  # every transition the run collects

    def _open_run_dir(self):
        """runs/<run_name>, held by this process (a new run's made now: one started in the same second gets a name of
        its own; --eval-model makes none), and the W&B run (a resumed run goes on as the same W&B run)."""
        args = self.args
        self.run_name = f"{args.env_id}__{args.exp_name}__dt{self.dt:g}__{args.seed}__{int(time.time())}"
        self.wandb_id, self.wandb = None, None  # W&B's id of the run, and the wandb module with --track
        if self.resumed:
            self.run_name, self.wandb_id = self.resumed.run_name, self.resumed.wandb_id
        elif not args.eval_model:
            self.run_name = new_run_dir(self.run_name)
            # A Ctrl-C (or an error) before the run's first file leaves no folder behind (atexit runs for both).
            atexit.register(remove_if_never_started, os.path.join("runs", self.run_name))
        self.run_dir = args.resume or os.path.join("runs", self.run_name)
        if not args.eval_model:
            try:
                self.run_lock = claim_run_dir(self.run_dir)  # held until the process ends: no second writer
                atexit.register(release_run_dir, self.run_dir, self.run_lock)  # running.lock goes as it exits
                # The commits that ran it (run.json's "code"), read in the script's folder: this one, after a
                # resumed run's earlier ones.
                self.code = code_history(self.run_dir, self.script_file)
            except ValueError as error:
                sys.exit(f"error: {error}")
        if args.track:
            try:
                self.wandb = start_wandb(args, self.run_name, self.wandb_id)
            except ValueError as error:
                if not self.resumed and not args.eval_model:  # no run: its folder goes
                    remove_run_dir(self.run_dir, self.run_lock)
                sys.exit(f"error: {error}")
            self.wandb_id = self.wandb.run.id

    def evaluate_saved_model(self, networks, *, evaluate, act):
        """--eval-model: load the networks (a dict of modules, as saved), evaluate them with `evaluate(networks)` (the
        mean scaled return of the copy on the CPU of their policy, the last, over the evaluation envs), record a video
        with `act` (observation -> env action) if asked, and exit the process. Without --eval-model, nothing."""
        args = self.args
        if not args.eval_model:
            return
        try:
            restore_model(self.model, args.eval_model, self.script, networks=networks, eval_envs=self.eval_envs)
        except ValueError as error:
            sys.exit(f"error: {error}")
        scaled_return = evaluate(policy_copy(networks))
        print(f"{args.eval_model}: mean scaled return {scaled_return:.2f} over {args.num_eval_envs} episodes")
        if self.wandb:  # the W&B run of --eval-model --track: its one row (the model file is in its config)
            self.wandb.log({"eval/scaled_return": scaled_return})
        if args.capture_video:  # one episode, in a videos/ folder next to the model file
            videos_dir = os.path.join(os.path.dirname(args.eval_model), "videos")
            model_name = os.path.splitext(os.path.basename(args.eval_model))[0]
            EvaluationVideos(args.env_id, self.dt, args.time_limit, videos_dir, args.seed).record(act, model_name)
        if self.wandb:
            finish_wandb(self.wandb)
        sys.exit(0)

    def start(self, envs, obs, *, state, networks, evaluate, act, diagnostics):
        """Open the logs and, for a resumed run, put back the checkpoint's state: `state` (a dict of the script's
        objects with state_dict / load_state_dict: networks, optimizer, replay memory, noise), the training envs `envs`
        and their observations `obs`, the evaluation envs and the generators. `networks` is what model.pt keeps, the
        policy last; `evaluate(networks)` gives the mean scaled return of the policy's copy on the CPU, `networks`
        holding it alone (harness/evaluations.py), `act` an env action for one observation (videos), and
        `diagnostics` the column names of diagnostics.csv. Returns the observations to go on from."""
        self.loop = Loop(self, envs, obs, state=state, networks=networks, evaluate=evaluate, act=act,
                         diagnostics=diagnostics)  # fmt: skip
        self.round_time = self.loop.clock.round_time  # physical seconds of interaction per round
        return self.loop.obs

    def rounds(self):
        """The training loop's rounds, to iterate over, with evaluations and checkpoints between them (Loop.rounds)."""
        return self.loop.rounds()

    def end_round(self, *, stats, round_stats, obs):
        """After a round's updates: its statistics, and the envs' observations now (Loop.end_round)."""
        self.loop.end_round(stats=stats, round_stats=round_stats, obs=obs)

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        """The end of the run, however the loop ended (Loop.end); after a Ctrl-C, once the rest is written, an error of
        the evaluation in flight ends the process with status 1."""
        handled = self.loop.end(error_type, error)
        if handled:
            self.loop.evaluations.exit_if_failed(self.run_dir)
        return handled


def seed_everything(seed, device):
    """Seed Python's, NumPy's and torch's generators, and make torch deterministic: the same seed gives the same
    numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)  # same seed, same numbers, on a GPU too (with cuBLAS's setting)
    # Deterministic mode also fills each new tensor with NaN, a guard against reading unwritten memory: on the
    # CPU it stays (the tests run there); on a GPU it would add a kernel to most ops an update or a step launches.
    torch.utils.deterministic.fill_uninitialized_memory = device.type == "cpu"
