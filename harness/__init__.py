"""The harness: what the six scripts (the four paper scripts and the two research variants) do the same way and
is not the algorithm, one part per module.

The scripts keep the algorithm whole (networks, update, exploration, replay memory and the training loop);
`dt_wrappers.py` keeps the time-step layer (an env at any dt). A script imports `Run` (run.py), `RunArgs` (args.py),
`make_vector_env` (envs.py) and `graphed` (gpu.py); `Run` puts the other parts together:

    run.py         Run, the scripts' entry point: arguments, device, run folder, W&B, seeds, evaluation envs,
                   --eval-model; from `run.start(...)` on, a Loop keeps the run going
    loop.py        Loop: between the script's rounds, the evaluations, checkpoints and diagnostics rows that are due
                   and SIGTERM's stop; the end of the run (model.pt, run.json, W&B)
    args.py        RunArgs (the flags every script has), the rules of --resume, the env's defaults for the flags
                   left unset, the checks before any work (arguments, replay memory, disk)
    settings.py    the per-environment settings (ENV_SETTINGS) and their --help table
    clock.py       Clock: rounds, physical time, env steps, updates and what is due; Preemption (SIGTERM)
    logs.py        Logs: evals.csv, diagnostics.csv, the progress bar, W&B
    run_info.py    run.json: versions, machine, a run's identity (run_identity and what it leaves out)
    threads.py     torch's CPU threads: one, whatever the load, unless OMP_NUM_THREADS or MKL_NUM_THREADS sets another
    checkpoint.py  checkpoint.pt (what it holds, written and read back), the random generators, model.pt
    files.py       files written whole or not at all; the run folder and its lock
    envs.py        the training and evaluation envs (make_vector_env) and their states for a checkpoint
    env_workers.py --env-workers: the training envs in worker processes
    env_state.py   one env's state (simulator, generator), saved and put back
    videos.py      --capture-video: evaluation episodes recorded at real speed at any dt
    gpu.py         graphed: a round of updates replayed as one CUDA graph

and one part no script imports, the catalogue of finished runs that the sweep runner (sweeps/) and the analysis
(analysis/) share:

    archive.py     what the tools know of a run, as its run.json records them: its grid point, its label, a folder's
                   finished runs
"""
