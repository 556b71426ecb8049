"""Running the grids: W&B sweep files (paper/, readme/, authors/) and the tools around them, each a module run from
the repository root, as `python -m sweeps.<tool> --help`:

    run_local.py       runs sweep files on this machine, as `wandb agent` would, resuming where it stopped
    collect.py         keeps the small files of finished runs in git (docs/results)
    authors_code.py    the authors' own DAU on CartPole, one grid point written as ours are

Which runs are done is harness/archive.py's: the catalogue the analysis (analysis/) reads too.
"""
