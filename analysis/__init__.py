"""Reading finished runs and judging them. Each tool is a module run from the repository root, as
`python -m analysis.<tool> --help` (the scripts, the harness and this package import one another from there, or
from anywhere after `pip install -e .`):

    scores.py          runs read into scores: each run's curve and score, an environment's scale, the line for "learns"
    robustness.py      the statistics: fine / coarse, every step, the runs that learn, verdicts
    variances.py       the dt's moderated variances and the t and Fieller intervals made of them
    shares.py          the runs that learn per dt: Clopper-Pearson intervals and the exact test across dt
    calibration.py     synthetic grids with CartPole's spreads, and the intervals' coverage and power on them
    tables.py          the lines invariance.py prints and the Markdown tables plot.py writes into the pages
    invariance.py      prints the invariance, every-step and verdict lines, the seeds an interval needs, the calibration
    plot.py            the robustness figure and each folder's tables (--page)
    compare.py         DAU's variants beside the paper's DAU, with each one's every-step verdict
    diagnostics.py     the runs' training diagnostics (diagnostics.csv)
    spread.py          every run of one command on file: what a user draws from
    phase_plane.py     Pendulum's value and policy over the phase plane, from checkpoints
    failure_boundary.py  what CartPole's advantage learns where an episode ends, from a checkpoint
    paper_figure.py    the paper's results figure read from its pixels (figure_axes.py: its panels, axes, colours)
    paper_layout.py    our kept runs drawn in the layout of the paper's results figure

Runs are read and labelled by harness/archive.py, the catalogue the sweep runner (sweeps/) shares.
"""
