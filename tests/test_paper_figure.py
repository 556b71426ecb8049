"""analysis/paper_figure.py reads curves of known values back from a figure drawn in the paper's style."""

import matplotlib
import numpy as np
import pytest

from analysis import paper_figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DT_RANGE = (5e-4, 5e-2)
HOURS = (0.25, 0.5, 1.0, 3.5)
# The curves drawn: (algorithm, dt): scaled return against hours. The finest is drawn first, as the authors' code
# draws in order of dt, and every later curve's band lies over it.
CURVES = {
    ("DAU", 0.0005): lambda hours: 250 + 40 * hours / 3.5,
    ("DAU", 0.01): lambda hours: 450 + 20 * np.sin(2 * np.pi * hours / 0.8),
    ("DQN", 0.01): lambda hours: 120 + 60 * hours,
}


def draw(path):
    """A figure in the paper's style: ggplot's grey, one panel of three curves (mean line over a band of alpha
    0.2, coloured by log dt as the authors' plots.py does), and two colour bars of 50 cells as their legend draws
    them (Blues above Reds), at about the paper figure's size in pixels."""
    low, high = np.log(DT_RANGE[0]), np.log(DT_RANGE[1])
    norm = matplotlib.colors.Normalize(vmin=low - 3, vmax=high + 0.1)
    maps = {"DAU": matplotlib.colormaps["Reds"], "DQN": matplotlib.colormaps["Blues"]}
    hours = np.linspace(0, 3.5, 400)
    with plt.style.context("ggplot"):
        figure = plt.figure(figsize=(4.6, 3.0), dpi=100)
        ax = figure.add_axes((0.12, 0.15, 0.5, 0.75))
        for (name, dt), curve in sorted(CURVES.items(), key=lambda item: item[0][1]):
            colour = maps[name](norm(np.log(dt)))
            ax.plot(hours, curve(hours), color=colour, linewidth=0.6)
            ax.fill_between(hours, curve(hours) - 40, curve(hours) + 40, facecolor=colour, alpha=0.2)
        ax.set_xlim(0, 3.55)
        ax.set_ylim(-30, 620)
        ax.set_xticks(np.arange(0, 3.6, 0.5))
        ax.set_yticks(np.arange(0, 601, 100))
        cells = np.linspace(low, high, 50)
        for place, name in enumerate(("DQN", "DAU")):
            bar = figure.add_axes((0.7, 0.45 - 0.15 * place, 0.25, 0.05))
            bar.imshow(maps[name](norm(cells))[np.newaxis], aspect="auto")
            bar.axis("off")
        figure.savefig(path)
        plt.close(figure)


@pytest.fixture(scope="module")
def figure(tmp_path_factory):
    path = tmp_path_factory.mktemp("figure") / "synthetic.png"
    draw(path)
    return path


def test_the_reader_recovers_the_curves_drawn(figure):
    options = paper_figure.Options(image=figure, panel=0, hours=HOURS, dts=(0.01, 0.0005))
    result = paper_figure.read_figure(paper_figure.load(figure), options)
    units = abs(result.y_axis.slope)  # returns a pixel
    assert 2.5 < units < 3.5  # 650 returns over about 225 pixels
    for (name, dt), curve in CURVES.items():
        for hour in HOURS:
            reading = result.readings[name, dt][hour][options.tolerance]
            truth = curve(np.linspace(hour - options.window, min(hour + options.window, 3.5), 9))
            where = f"{name} dt {dt:g} at {hour:g} h: {reading}"
            # every column read has a pixel of the curve, but one (past 3.5 h, where the curves end, none)
            assert reading.found >= (reading.columns - 1 if hour < 3.5 else 2), where
            # within its range and a pixel either side, and its median within two pixels of the curve's
            assert reading.low - units <= truth.mean() <= reading.high + units, where
            assert abs(reading.median - truth.mean()) <= 2 * units + (truth.max() - truth.min()) / 2, where
    # the curve not drawn is not found in most columns
    absent = result.readings["DQN", 0.0005]
    assert sum(absent[hour][options.tolerance].found for hour in HOURS) <= len(HOURS), absent


def test_the_table_gives_each_curve_at_each_hour(figure, capsys):
    paper_figure.main(paper_figure.Options(image=figure, panel=0, hours=HOURS, dts=(0.01, 0.0005)))
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| 0.25 |")]
    assert len(rows) == 2  # the readings and how sure they are
    assert rows[0].count("|") == 6  # the hour and four curves
    assert "| hour | DAU dt 0.01 | DAU dt 0.0005 | DQN dt 0.01 | DQN dt 0.0005 |" in table


def test_a_figure_without_colour_bars_is_refused(tmp_path):
    path = tmp_path / "plain.png"
    with plt.style.context("ggplot"):
        figure, ax = plt.subplots(figsize=(4, 3), dpi=100)
        ax.plot([0, 1], [0, 1])
        figure.savefig(path)
        plt.close(figure)
    with pytest.raises(ValueError, match="colour bars found: none"):
        paper_figure.colour_bars(paper_figure.load(path))
