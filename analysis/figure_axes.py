"""A figure's frame read from its pixels: its plot areas (panels), each axis's line from pixels to values through its
tick marks, and its colour bars: steps 1 to 3 of analysis/paper_figure.py's reading of the paper's results figure,
which reads the curves inside that frame (steps 4 and 5)."""

from typing import NamedTuple

import numpy as np
from PIL import Image


class Box(NamedTuple):
    """A plot area's rows and columns (inclusive, pixels)."""

    top: int
    bottom: int
    left: int
    right: int


class Axis(NamedTuple):
    """value = intercept + slope * pixel, fitted on the tick marks; residual: the largest miss (pixels); the ticks
    with a grid line within 2 pixels, and the largest of those distances."""

    intercept: float
    slope: float
    ticks: np.ndarray
    residual: float
    grid_seen: int
    grid_offset: float | None

    def value(self, pixel):
        return self.intercept + self.slope * np.asarray(pixel, dtype=float)

    def pixel(self, value):
        return (np.asarray(value, dtype=float) - self.intercept) / self.slope


class Bar(NamedTuple):
    """A colour bar: its colours along its middle (one per column, first to last), and its ends (pixels)."""

    colours: np.ndarray
    first: int
    start: float
    end: float

    def colour(self, dt, dt_range, cells):
        """The bar's colour at dt (log scale; the cells' centres as the authors' legend draws them)."""
        share = (np.log(dt) - np.log(dt_range[0])) / (np.log(dt_range[1]) - np.log(dt_range[0]))
        position = (0.5 + share * (cells - 1)) / cells if cells else share
        x = self.start + position * (self.end - self.start)
        columns = self.first + np.arange(len(self.colours))
        return np.array([np.interp(x, columns, self.colours[:, channel]) for channel in range(3)])


def load(path):
    """The image as floats (rows, columns, RGB), transparent parts over white."""
    rgba = np.asarray(Image.open(path).convert("RGBA"), dtype=float)
    alpha = rgba[..., 3:] / 255
    return rgba[..., :3] * alpha + 255 * (1 - alpha)


def runs(flags, gap=0):
    """[(first, last)] of the runs of True, runs apart by at most `gap` False joined."""
    found = []
    for index in np.flatnonzero(flags):
        if found and index - found[-1][1] <= gap + 1:
            found[-1][1] = index
        else:
            found.append([index, index])
    return [(int(first), int(last)) for first, last in found]


def background(rgb):
    """The plot areas' grey: the commonest neutral colour between 180 and 250."""
    low, high = rgb.min(-1), rgb.max(-1)
    neutral = (high - low <= 2) & (low > 180) & (high < 250)
    values, counts = np.unique(rgb[neutral].mean(-1).round(), return_counts=True)
    return float(values[counts.argmax()])


def find_panels(rgb, min_pixels=10, gap=15, min_size=40):
    """The plot areas (Box), in reading order: the pixels of the background grey whose four neighbours are grey too
    (not the anti-aliased tick labels'); bands of rows with some, cut into spans of columns, a gap of more than
    `gap` pixels separating (the panels are 30 or more apart; within one, grid lines and curves can hide the grey
    over a few rows or columns); each span's rows from its first grey pixel to its last."""
    grey = np.abs(rgb - background(rgb)).max(-1) <= 3
    grey[1:-1, 1:-1] &= grey[:-2, 1:-1] & grey[2:, 1:-1] & grey[1:-1, :-2] & grey[1:-1, 2:]
    panels = []
    for top, bottom in runs(grey.sum(1) >= min_pixels, gap):
        band = grey[top : bottom + 1]
        for left, right in runs(band.sum(0) >= min_pixels, gap):
            rows = np.flatnonzero(band[:, left : right + 1].any(1))
            if rows[-1] - rows[0] >= min_size and right - left >= min_size:
                panel = grown(rgb, Box(top + int(rows[0]), top + int(rows[-1]), left, right))
                if panel not in panels:  # the grey in one panel seen in two bands (a wide band of curves between)
                    panels.append(panel)
    return panels


def grown(rgb, box):
    """The box out to the plot area's edges: each side moved out while the next row or column is not white over
    nine tenths of it (the curves and bands hide the grey; the edge's anti-aliased line is the area's), or is one
    or two white lines (grid lines where nothing covers them) before such a line."""
    coloured = rgb.min(-1) < 250
    top, bottom, left, right = box

    def inside(line):
        return line.mean() >= 0.9

    def step(lines, index, direction):
        for skip in (0, 1, 2):
            at = index + direction * (skip + 1)
            if 0 <= at < len(lines) and inside(lines[at]):
                return at
        return index

    while True:
        before = (top, bottom, left, right)
        columns = coloured[top : bottom + 1].T
        left, right = step(columns, left, -1), step(columns, right, 1)
        rows = coloured[:, left : right + 1]
        top, bottom = step(rows, top, -1), step(rows, bottom, 1)
        if (top, bottom, left, right) == before:
            return Box(top, bottom, left, right)


def tick_marks(rgb, box, axis):
    """The tick marks' centres (pixels along the axis) outside the plot area: below it (axis "x") or left of it
    ("y"). The strip read starts past the area's anti-aliased edge (lines mostly not white) and ends at the first
    white line, before the labels."""
    gray = rgb.mean(-1)
    if axis == "x":
        origin = max(box.left - 3, 0)
        strip = gray[box.bottom + 1 : box.bottom + 13, origin : box.right + 4]
    else:
        strip, origin = gray[box.top - 1 : box.bottom + 1, max(box.left - 12, 0) : box.left][:, ::-1].T, box.top - 1
    darkness = 255 - strip
    lines = []
    for index, line in enumerate(darkness):
        if not lines and index < 2 and (line > 5).mean() > 0.5:
            continue  # the plot area's edge
        if lines and (line <= 2).all():
            break
        lines.append(line)
    profile = np.sum(lines, axis=0) if lines else np.zeros(strip.shape[1])
    centres = []
    for first, last in runs(profile > 0.1 * profile.max()) if profile.max() > 0 else []:
        span = np.arange(max(first - 1, 0), min(last + 2, len(profile)))
        centres.append(origin + np.sum(span * profile[span]) / profile[span].sum())
    return np.array(centres)


def grid_lines(rgb, box, axis):
    """Centres of the grid lines inside the plot area (pixels along the axis): rows ("y") or columns ("x") lighter
    than those two pixels away, the median over the area."""
    gray = rgb[box.top : box.bottom + 1, box.left : box.right + 1].mean(-1)
    lines = gray if axis == "y" else gray.T
    lightness = np.median(lines[2:-2] - (lines[:-4] + lines[4:]) / 2, axis=1)
    origin = (box.top if axis == "y" else box.left) + 2
    centres = []
    for first, last in runs(lightness > 2):
        span = np.arange(first, last + 1)
        centres.append(origin + np.sum(span * lightness[span]) / lightness[span].sum())
    return np.array(centres)


def calibrate(rgb, box, axis, values):
    """The Axis through the tick marks of `axis` and the values of their labels (increasing: left to right for x,
    bottom to top for y); as a check, the ticks with a grid line within 2 pixels, and the farthest of those."""
    ticks = tick_marks(rgb, box, axis)
    if len(ticks) != len(values):
        raise ValueError(
            f"{len(ticks)} {axis} tick marks at pixels {np.round(ticks, 1).tolist()}, {len(values)} tick values given"
        )
    ordered = ticks if axis == "x" else ticks[::-1]  # y: the bottom tick (largest row) carries the first value
    slope, intercept = np.polyfit(ordered, values, 1)
    residual = float(np.max(np.abs(intercept + slope * ordered - np.asarray(values)) / abs(slope)))
    grid = grid_lines(rgb, box, axis)
    offsets = [np.min(np.abs(grid - tick)) for tick in ticks] if len(grid) else []
    seen = [offset for offset in offsets if offset <= 2]
    return Axis(float(intercept), float(slope), ordered, residual, len(seen), float(max(seen)) if seen else None)


def colour_bars(rgb, min_length=60, min_rows=3):
    """The colour bars, {"red": Bar, "blue": Bar}: rows of at least `min_length` pixels of saturated colour, each
    pixel the same (within 3) as the one below, over at least `min_rows` rows. A bar's ends are those of its
    saturated run, out by the share of the next pixel it covers (that pixel's mix with the white around it)."""
    chroma = rgb.max(-1) - rgb.min(-1)
    steady = (chroma[:-1] > 40) & (np.abs(np.diff(rgb, axis=0)).max(-1) <= 3)
    found = []  # [rows, first, last]
    for row in range(len(steady)):
        for first, last in runs(steady[row]):
            if last - first + 1 < min_length:
                continue
            group = next((bar for bar in found if bar[0][-1] == row - 1 and abs(bar[1] - first) <= 1), None)
            if group:
                group[0].append(row)
            else:
                found.append([[row], first, last])
    bars = {}
    for rows, first, last in found:
        if len(rows) < min_rows:
            continue
        rows = [*rows, rows[-1] + 1]
        colours = rgb[rows, first : last + 1].mean(0)
        middle = rows[len(rows) // 2]
        start = first - 0.5 - covered(rgb[middle, first - 1], rgb[middle, first])
        end = last + 0.5 + covered(rgb[middle, last + 1], rgb[middle, last])
        hue = "red" if colours[:, 0].mean() > colours[:, 2].mean() else "blue"
        if hue in bars:
            raise ValueError(f"two {hue} colour bars (rows {rows[0]}-{rows[-1]} and another)")
        bars[hue] = Bar(colours, first, start, end)
    if set(bars) != {"red", "blue"}:
        raise ValueError(f"colour bars found: {sorted(bars) or 'none'}; a red and a blue one expected")
    return bars


def covered(outside, inside):
    """The share of the pixel `outside` a bar's edge covers, its colour `inside`'s over white."""
    return float(np.clip(np.mean((255 - outside) / np.maximum(255 - inside, 1)), 0, 1))
