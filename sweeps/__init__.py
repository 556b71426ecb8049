"""Running the grids: W&B sweep files (paper/, readme/, authors/) and the tools around them, each a module run from
the repository root, as `python -m sweeps.<tool> --help`:

    run_local.py       runs sweep files on this machine, as `wandb agent` would, resuming where it stopped
    sweep_files.py     reads and checks a sweep file: its grid, its agent's command line (run_local's)
    grid_runs.py       finds a grid point's runs in runs/ and how each ended (run_local's)
    collect.py         keeps the small files of finished runs in git (docs/results)
    authors_code.py    the authors' own DAU and unscaled baselines, one grid point written as ours are
    authors_shims.py   what the authors' code imports that no longer exists (authors_code's)
    print_args.py      a grid point's resolved arguments and identity, printed by its script (--print-args)
    migrate_runs.py    rewrote the kept run.json once with what they now record (identity, label, schema)

Which runs are done is harness/archive.py's: the catalogue the analysis (analysis/) reads too.
"""
