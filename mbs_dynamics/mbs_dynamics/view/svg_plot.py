"""Line plots of time series as a standalone SVG file: what a run ends with,
readable in any browser, without a plotting library.

    svg_plot.document("title", t, [Panel("joint positions", "rad", {"joint1": q1, ...}), ...])  # the SVG text
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

import numpy as np

# Matplotlib's tab10, so the plots look familiar.
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf")
PANEL_WIDTH, PANEL_HEIGHT = 560, 300
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 70, 130, 34, 40
COLUMNS = 2
# Points drawn per series at most: more add nothing to a 400-pixel-wide axis.
MAX_POINTS = 2000


@dataclass
class Panel:
    """One axis: its title, the unit of its values and its named series; their
    time axis (s) when not the document's."""

    title: str
    unit: str
    series: dict = field(default_factory=dict)
    time: np.ndarray | None = None


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round values (1, 2, 5 times a power of ten apart) covering [low, high]."""
    if not high > low:
        low, high = low - 1.0, high + 1.0
    raw = (high - low) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    return [first + k * step for k in range(int(math.ceil((high - first) / step)) + 1)]


def _label(value: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    if step >= 1e4 or step < 1e-3:
        return f"{value:.2g}"
    decimals = max(0, -math.floor(math.log10(step)))
    return f"{value:.{decimals}f}"


def _panel(panel: Panel, t: np.ndarray, x0: float, y0: float) -> list[str]:
    width = PANEL_WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    height = PANEL_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    left, top = x0 + MARGIN_LEFT, y0 + MARGIN_TOP
    t = t if panel.time is None else np.asarray(panel.time, dtype=float)
    values = [np.asarray(y, dtype=float) for y in panel.series.values()]
    finite = np.concatenate([y[np.isfinite(y)] for y in values]) if values else np.zeros(0)
    y_ticks = nice_ticks(float(finite.min()), float(finite.max())) if finite.size else nice_ticks(0.0, 1.0)
    t_low, t_high = (float(t[0]), float(t[-1])) if t.size > 1 and t[-1] > t[0] else (0.0, 1.0)
    t_ticks = [tick for tick in nice_ticks(t_low, t_high) if t_low - 1e-9 <= tick <= t_high + 1e-9]
    y_low, y_high = y_ticks[0], y_ticks[-1]

    def x_of(time):
        return left + (time - t_low) / (t_high - t_low) * width

    def y_of(value):
        return top + height - (value - y_low) / (y_high - y_low) * height

    out = [f'<text x="{left + width / 2:.1f}" y="{y0 + 20}" class="title">{escape(panel.title)}</text>',
           f'<rect x="{left}" y="{top}" width="{width}" height="{height}" class="axes"/>']
    for tick in y_ticks:
        y = y_of(tick)
        out.append(f'<line x1="{left}" x2="{left + width}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" class="ytick">{_label(tick, y_ticks)}</text>')
    for tick in t_ticks:
        x = x_of(tick)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + height}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{top + height + 16}" class="xtick">{_label(tick, t_ticks)}</text>')
    out.append(f'<text x="{left + width / 2:.1f}" y="{top + height + 34}" class="xtick">t (s)</text>')
    out.append(f'<text x="{x0 + 16}" y="{top + height / 2:.1f}" class="unit" '
               f'transform="rotate(-90 {x0 + 16} {top + height / 2:.1f})">{escape(panel.unit)}</text>')
    stride = max(1, t.size // MAX_POINTS)
    for k, (name, y) in enumerate(zip(panel.series, values, strict=True)):
        color = COLORS[k % len(COLORS)]
        points = " ".join(f"{x_of(a):.1f},{y_of(b):.1f}"
                          for a, b in zip(t[::stride], y[::stride], strict=True) if np.isfinite(b))
        out.append(f'<polyline points="{points}" stroke="{color}" class="line"/>')
        legend_y = top + 12 + 16 * k
        out.append(f'<line x1="{left + width + 10}" x2="{left + width + 28}" y1="{legend_y - 4}" '
                   f'y2="{legend_y - 4}" stroke="{color}" class="line"/>')
        out.append(f'<text x="{left + width + 32}" y="{legend_y}" class="legend">{escape(name)}</text>')
    return out


def document(title: str, t, panels: list[Panel]) -> str:
    """The SVG text of the panels, in rows of two, against the common time axis t (s) (or their own)."""
    t = np.asarray(t, dtype=float)
    rows = (len(panels) + COLUMNS - 1) // COLUMNS
    width, height = COLUMNS * PANEL_WIDTH, rows * PANEL_HEIGHT + 40
    body = [f'<text x="{width / 2}" y="26" class="heading">{escape(title)}</text>']
    for index, panel in enumerate(panels):
        body += _panel(panel, t, (index % COLUMNS) * PANEL_WIDTH, 40 + (index // COLUMNS) * PANEL_HEIGHT)
    style = ("text{font-family:sans-serif;font-size:11px;fill:#222}"
             ".heading{font-size:16px;text-anchor:middle}.title{font-size:13px;text-anchor:middle}"
             ".ytick{text-anchor:end}.xtick{text-anchor:middle}.unit{text-anchor:middle}"
             ".axes{fill:none;stroke:#444}.grid{stroke:#ddd}.line{fill:none;stroke-width:1.5}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">\n<style>{style}</style>\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")
