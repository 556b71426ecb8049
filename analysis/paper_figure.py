"""The paper's results figure read from its pixels: one panel's curves at a few hours, per dt and algorithm.

    git clone https://github.com/ctallec/continuous-rl
    git -C continuous-rl show 8f3c655:docs/imgs/full_results_unscaled.png > /tmp/full_results_unscaled.png
    python -m analysis.paper_figure /tmp/full_results_unscaled.png       # the Cartpole panel, dt 0.01 and 0.0005

The figure is the authors' (Tallec, Blier, Ollivier, ICML 2019; `docs/imgs/full_results_unscaled.png` in their
repository, https://github.com/ctallec/continuous-rl/blob/master/docs/imgs/full_results_unscaled.png, 743 x 430
pixels) and is not kept here. Five panels of scaled return against physical hours, DAU in red shades and the
baseline in blue, each curve's colour its dt on a log scale (the colour bars at the lower right, 5e-4 to 5e-2), each
curve a smoothed mean over seeds drawn over a translucent band. The reading, step by step (numbers: Cartpole; steps 1
to 3, the figure's frame, are analysis/figure_axes.py's):

1. Panels. The plot areas are the figure's ggplot grey (its commonest neutral colour short of white, taken where
   the four neighbours are grey too: not the tick labels' anti-aliasing). Rows with grey are cut into bands, a
   band's columns into spans (a gap of more than 15 pixels separates two), and each span grows out to where white
   begins: the panels, in reading order (--panel 2 is Cartpole: rows 18-180, columns 521-728).
2. Axes. The tick marks are the dark strokes between the plot area and the tick labels (below it for x, left of it
   for y), each at its darkness-weighted centre; a least-squares line through them and the values their labels
   read (--x-ticks, --y-ticks, read by eye) maps pixels to hours and returns. The grid lines inside (rows and
   columns lighter than those two pixels away, the median over the area) check it: one should sit on each tick.
3. Colours. The colour bars are rows of at least 60 pixels of saturated colour, each the same as the row below:
   red for DAU, blue for the baseline. The authors' legend (`code/analysis/plot_legend.py`) draws each bar as 50
   cells, cell i at log dt = log 5e-4 + i/49 (log 5e-2 - log 5e-4), under the colour map that colours the curves
   (`code/analysis/plots.py`: Reds or Blues, normalised over log 5e-4 - 3 to log 5e-2 + 0.1). A dt's colour is the
   bar's (the mean of its rows) interpolated at that cell's centre; at each dt of the panel it is matplotlib's Reds
   and Blues under that normalisation within 3 RGB units.
4. Line pixels. A line (1 pt, drawn at 1000 dpi and shrunk to this size: about 0.7 pixel wide) covers part of a
   pixel, over the bands and lines drawn before it: pixel = a c + (1 - a) u, c the line's colour, u what lies
   beneath. For every pixel and every curve colour of the panel (each dt of --dts, both algorithms), u is taken on
   both sides of the pixel at once (2 or 3 pixels above and below, or left and right: a line differs from both
   sides, a band's edge from one), a fitted, and the worse side's distance from the mix to the pixel kept, the best
   over the four pairs. A pixel is a curve's when that curve fits it best of all the panel's curves (each allowed to
   cover as little as 0.15: the fringe of a darker line goes to that line), within --tolerance (RGB, 0-255),
   covering at least --min-coverage of it.
5. Reading. In each column, the curve's best-fitting pixel; at each hour, the median of those over the columns
   within --window hours of it (+-0.05 h: 5 to 7 columns), with their range. A curve that ends before the window
   (Cartpole's dt 0.01 curves stop at 3.34 h) is read over its last 2 x --window hours, and the table says so.

Precision. The axes (Cartpole): 4.00 returns and 0.0171 h a pixel; the tick fits miss by 0.0 pixel (y) and 0.3 (x),
and the grid lines seen (at 6 of 7 and 6 of 8 ticks) sit within 0.3 pixel of them. A line's pixel is its centre to
+-0.5 pixel (+-2 returns). On a synthetic figure in this style (tests/test_paper_figure.py) the reader finds each
curve within 1.5 pixels. In the paper's panel the spread is the curves': within +-0.05 h a coarsest curve's pixels
span 30 to 150 returns (the range in each cell), as its smoothed mean wiggles, and with --window 0.03 or 0.08 the
medians move by up to 40 returns (56 over a coarsest curve's last 0.1 h). The coarsest curves are drawn last (the
authors' code draws in order of dt), on top of the others: their pixels fit their colour far better than any other
curve's (none contested) and their median moves by at most 18 returns over tolerances 8 to 18. The finest are drawn
first, under every other curve's band (alpha 0.2 each, up to nine): their colour is washed towards the bands', the
palest (dt 0.0005) close to the bands' own, so some band pixels pass for them and some of their pixels go to a
neighbouring dt. Their ranges are wider (up to 240 returns), up to half their pixels are contested (another curve
fits within 1.5 times as well; the second table), and their median moves by up to 42 returns with the tolerance:
read them as a level to about +-50 returns, not as a curve (every cell to about +-40).
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tyro
from PIL import Image

from analysis.figure_axes import Axis, Box, calibrate, colour_bars, find_panels, load, runs

# Pairs of neighbours a line pixel is unmixed against, both at once: beyond a 1-pixel line drawn level (above and
# below) or steep (left and right). A line differs from what lies on both sides of it, a band's edge from one side.
NEIGHBOURS = (((-2, 0), (2, 0)), ((-3, 0), (3, 0)), ((0, -2), (0, 2)), ((0, -3), (0, 3)))
CONTESTED = 1.5  # a pixel another curve fits within this factor of its own curve's fit is contested
FRINGE = 0.15  # the least share of a pixel at which a line competes for it (a darker line's fringe is that line's)


@dataclass
class Options:
    image: tyro.conf.Positional[Path]
    """the figure (PNG): `git show 8f3c655:docs/imgs/full_results_unscaled.png` in a clone of ctallec/continuous-rl"""
    panel: int = 2
    """the panel, in reading order from 0 (0 Pendulum, 1 Bipedal Walker, 2 Cartpole, 3 Ant, 4 Cheetah)"""
    x_ticks: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5)
    """the values of the panel's x tick labels, left to right (hours)"""
    y_ticks: tuple[float, ...] = (0.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0)
    """the values of the panel's y tick labels, bottom to top (scaled return)"""
    dts: tuple[float, ...] = (0.01, 0.005, 0.002, 0.001, 0.0005)
    """every dt drawn in the panel (each algorithm's): their colours compete for each pixel"""
    read: tuple[float, ...] = (0.01, 0.0005)
    """the dt whose curves are read (the coarsest and the finest)"""
    hours: tuple[float, ...] = (0.25, 0.5, 1.0, 3.5)
    """where to read"""
    window: float = 0.05
    """read the columns within this many hours of each hour"""
    tolerance: float = 12.0
    """the farthest a pixel may be from its curve's colour mixed with a neighbour (RGB distance, 0-255)"""
    min_coverage: float = 0.3
    """the least share of a pixel a line must cover to be seen there (a level line 0.7 pixel wide covers two rows
    by 0.35 where it runs between them)"""
    names: tuple[str, str] = ("DAU", "DQN")
    """the red and the blue algorithm (the legend says DDPG; in Cartpole the baseline is DQN)"""
    dt_range: tuple[float, float] = (5e-4, 5e-2)
    """the colour bars' ends"""
    bar_cells: int = 50
    """the colour cells of each bar, the first and last at the ends of dt_range (the authors' legend: 50); 0: the
    bar runs from one end to the other across its whole length"""
    overlay: Path | None = None
    """also write this PNG: the panel, 4 times larger, once per curve read, its pixels marked in black and the
    columns read in white (to see what was read as the curve)"""


class Reading(NamedTuple):
    """A curve at one hour: the median of its per-column values, their range, the columns that had a pixel of it
    out of those read, the share of those contested, and a note (where the curve ended before the hour)."""

    median: float
    low: float
    high: float
    found: int
    columns: int
    contested: float
    note: str = ""


def line_fits(rgb, box, colours):
    """(misses, coverages), each (rows, columns, curves): how far each pixel of the plot area is from each curve's
    colour drawn over what lies on both sides of it (a pair of NEIGHBOURS, the worse of the two fits), covering at
    least FRINGE of it (the best over the pairs; inf where none fits), and the share the line covers there."""
    area = rgb[box.top : box.bottom + 1, box.left : box.right + 1]
    height, width, _ = area.shape
    padded = np.full((height + 6, width + 6, 3), np.nan)
    padded[3:-3, 3:-3] = area
    misses = np.full((height, width, len(colours)), np.inf)
    coverages = np.zeros_like(misses)
    with np.errstate(invalid="ignore", divide="ignore"):
        for pair in NEIGHBOURS:
            for index, colour in enumerate(colours):
                miss, coverage = np.zeros((height, width)), np.ones((height, width))
                for row, column in pair:
                    under = padded[3 + row : 3 + row + height, 3 + column : 3 + column + width]
                    towards = colour - under
                    share = np.minimum(np.sum((area - under) * towards, -1) / np.sum(towards * towards, -1), 1)
                    miss = np.fmax(miss, np.linalg.norm(area - under - share[..., None] * towards, axis=-1))
                    coverage = np.where(share >= FRINGE, np.minimum(coverage, share), 0)
                better = (coverage >= FRINGE) & (miss < misses[..., index])
                misses[..., index] = np.where(better, miss, misses[..., index])
                coverages[..., index] = np.where(better, coverage, coverages[..., index])
    return misses, coverages


def curve_pixels(misses, coverages, index, tolerance, min_coverage):
    """{column: (row, contested)} of a curve: in each column of the plot area, the pixel its colour fits best
    among those it fits best of all curves (a line's fringe, the pixel's edge that a darker line covers a little,
    goes to that line), within the tolerance, the line covering at least `min_coverage` of it; contested when
    another curve fits that pixel within CONTESTED times as well."""
    own = misses[..., index]
    others = np.delete(misses, index, axis=-1).min(-1)
    mine = (own <= others) & (own <= tolerance) & (coverages[..., index] >= min_coverage)
    found = {}
    for column in range(misses.shape[1]):
        rows = np.flatnonzero(mine[:, column])
        if len(rows):
            row = rows[np.argmin(own[rows, column])]
            found[column] = (int(row), bool(others[row, column] <= CONTESTED * own[row, column]))
    return found


def read_at(pixels, box, x_axis, y_axis, hour, window):
    """The Reading of a curve's pixels ({column in the area: (row in the area, contested)}) at `hour`: the columns
    within `window` hours of it, or the curve's last 2 x window hours where it ends before them."""
    columns = np.arange(box.right - box.left + 1)
    hours = x_axis.value(box.left + columns)
    chosen = columns[np.abs(hours - hour) <= window]
    note = ""
    if not any(column in pixels for column in chosen) and pixels:
        # the curve's end: that of its last run of 3 columns or more (a stray pixel beyond is another curve's)
        stretches = [run for run in runs(np.isin(columns, list(pixels)), gap=2) if run[1] - run[0] >= 2]
        end = x_axis.value(box.left + (stretches[-1][1] if stretches else max(pixels)))
        if end < hour - window:
            chosen = columns[(hours >= end - 2 * window) & (hours <= end)]
            note = f"ends at {end:.2f} h: read over {end - 2 * window:.2f}-{end:.2f} h"
    found = [pixels[column] for column in chosen if column in pixels]
    if not found:
        return Reading(np.nan, np.nan, np.nan, 0, len(chosen), np.nan, note)
    values = y_axis.value(box.top + np.array([row for row, _ in found]))
    contested = np.mean([flag for _, flag in found])
    return Reading(float(np.median(values)), float(values.min()), float(values.max()), len(found), len(chosen),
                   float(contested), note)  # fmt: skip


@dataclass
class Result:
    """Everything main prints: the panel, its axes, the curves' colours and readings ({(name, dt): {hour: {tolerance:
    Reading}}})."""

    box: Box
    x_axis: Axis
    y_axis: Axis
    colours: dict
    readings: dict
    tolerances: tuple
    pixels: dict


def read_figure(rgb, options):
    """The panel's curves of `options.read` read at `options.hours`, at the tolerance and at 2/3 and 3/2 of it."""
    panels = find_panels(rgb)
    if options.panel >= len(panels):
        raise ValueError(f"panel {options.panel} asked for, {len(panels)} found: {panels}")
    box = panels[options.panel]
    x_axis = calibrate(rgb, box, "x", options.x_ticks)
    y_axis = calibrate(rgb, box, "y", options.y_ticks)
    bars = colour_bars(rgb)
    curves = [(name, dt) for name in options.names for dt in options.dts]
    colours = {
        (name, dt): bars[hue].colour(dt, options.dt_range, options.bar_cells)
        for name, hue in zip(options.names, ("red", "blue"), strict=True)
        for dt in options.dts
    }
    misses, coverages = line_fits(rgb, box, [colours[curve] for curve in curves])
    tolerances = (options.tolerance * 2 / 3, options.tolerance, options.tolerance * 3 / 2)
    readings, chosen = {}, {}
    for name in options.names:
        for dt in options.read:
            if (name, dt) not in colours:
                raise ValueError(f"dt {dt:g} is read but not among --dts {options.dts}")
            index = curves.index((name, dt))
            pixels = {
                tolerance: curve_pixels(misses, coverages, index, tolerance, options.min_coverage)
                for tolerance in tolerances
            }
            chosen[name, dt] = pixels[options.tolerance]
            readings[name, dt] = {
                hour: {
                    tolerance: read_at(pixels[tolerance], box, x_axis, y_axis, hour, options.window)
                    for tolerance in tolerances
                }
                for hour in options.hours
            }
    return Result(box, x_axis, y_axis, colours, readings, tolerances, chosen)


def draw_overlay(rgb, result, options, scale=4):
    """The panel once per curve read, side by side and `scale` times larger: the curve's pixels in black, the edges
    of the columns read at each hour in white."""
    box = result.box
    area = rgb[box.top : box.bottom + 1, box.left : box.right + 1].round().astype(np.uint8)
    height, width = area.shape[0] * scale, area.shape[1] * scale
    sheet = Image.new("RGB", ((width + 10) * len(result.pixels), height), "white")
    for place, pixels in enumerate(result.pixels.values()):
        tile = np.asarray(Image.fromarray(area).resize((width, height), Image.NEAREST)).copy()
        for hour in options.hours:
            for edge in (hour - options.window, hour + options.window):
                column = int(round((result.x_axis.pixel(edge) - box.left + 0.5) * scale))
                if 0 <= column < width:
                    tile[:, column] = 255
        for column, (row, _) in pixels.items():
            tile[row * scale : (row + 1) * scale, column * scale : (column + 1) * scale] = 0
        sheet.paste(Image.fromarray(tile), (place * (width + 10), 0))
    sheet.save(options.overlay)


def calibration(result, options):
    """The lines that say how the panel was read: its plot area, its axes' fit, the bars' colours and the reading."""
    box, x_axis, y_axis = result.box, result.x_axis, result.y_axis

    def grid(axis):
        if axis.grid_offset is None:
            return "no grid line seen at a tick"
        return f"a grid line at {axis.grid_seen} of them, within {axis.grid_offset:.1f} px"

    return [
        f"Panel {options.panel}: plot area rows {box.top}-{box.bottom}, columns {box.left}-{box.right}. "
        f"x: {1 / x_axis.slope:.1f} px an hour ({x_axis.slope:.4f} h a pixel; {len(x_axis.ticks)} ticks, fit within "
        f"{x_axis.residual:.2f} px, {grid(x_axis)}); y: {abs(y_axis.slope):.2f} returns a pixel "
        f"({len(y_axis.ticks)} ticks, fit within {y_axis.residual:.2f} px, {grid(y_axis)}).",
        "",
        "Colours from the bars (RGB): "
        + "; ".join(
            f"{name} dt {dt:g} ({', '.join(f'{value:.0f}' for value in colour)})"
            for (name, dt), colour in result.colours.items()
            if dt in options.read
        )
        + ".",
        "",
        f"Scaled return: the median over the columns within {options.window:g} h of each hour of the curve's pixel "
        f"in each column [their range] (tolerance {options.tolerance:g})",
        "",
    ]


def markdown(result, options):
    """The readings as Markdown: the calibration, the table of values, and the table of how sure each is."""
    tolerance = options.tolerance
    lines = calibration(result, options)
    curves = list(result.readings)
    header = "| hour | " + " | ".join(f"{name} dt {dt:g}" for name, dt in curves) + " |"
    lines += [header, "|---" * (len(curves) + 1) + "|"]
    notes = []
    for hour in options.hours:
        cells = []
        for curve in curves:
            reading = result.readings[curve][hour][tolerance]
            if reading.note:
                notes.append(f"{curve[0]} dt {curve[1]:g} at {hour:g} h: {reading.note}.")
            mark = "*" if reading.note else ""
            cells.append(
                "—" if reading.found == 0 else f"{reading.median:.0f}{mark} [{reading.low:.0f}, {reading.high:.0f}]"
            )
        lines.append(f"| {hour:g} | " + " | ".join(cells) + " |")
    lines += [""] + [f"\\* {note}" for note in notes] + ([""] if notes else [])
    lines += [
        f"How sure: columns with a pixel of the curve / columns read; the share of those pixels contested (another "
        f"curve's colour fits within {CONTESTED:g} times as well); the median at tolerance "
        f"{result.tolerances[0]:g} and {result.tolerances[-1]:g}",
        "",
        header,
        "|---" * (len(curves) + 1) + "|",
    ]
    for hour in options.hours:
        cells = []
        for curve in curves:
            by_tolerance = result.readings[curve][hour]
            reading = by_tolerance[tolerance]
            others = [by_tolerance[other].median for other in result.tolerances if other != tolerance]
            shown = ", ".join("—" if np.isnan(value) else f"{value:.0f}" for value in others)
            contested = "—" if reading.found == 0 else f"{reading.contested:.0%}"
            cells.append(f"{reading.found}/{reading.columns}, {contested}; {shown}")
        lines.append(f"| {hour:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(options):
    if not options.image.is_file():
        sys.exit(f"error: no image at {options.image} (git show 8f3c655:docs/imgs/full_results_unscaled.png > it)")
    try:
        result = read_figure(load(options.image), options)
    except ValueError as error:
        sys.exit(f"error: {error}")
    print(markdown(result, options))
    if options.overlay:
        draw_overlay(load(options.image), result, options)
        print(f"\noverlay: {options.overlay}")


if __name__ == "__main__":
    main(tyro.cli(Options))
