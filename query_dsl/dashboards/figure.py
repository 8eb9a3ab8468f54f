"""The chart of :func:`query_dsl.dashboards.render_png`: matplotlib's object API on the Agg
canvas (no display, no pyplot global state, so server threads can draw at once)."""

from __future__ import annotations

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont, get_font
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from query_dsl.dashboards.render import LEGEND_SERIES, check_size, series_labels
from query_dsl.matrix import Matrix

__all__ = ["draw"]

_DPI = 100
_LABEL_CHARS = 48
_TITLE_CHARS = 100
_SCALES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def draw(result: Matrix | float, *, title: str, width: int = 800, height: int = 400) -> Figure:
    """The figure :func:`render_png` saves."""
    if isinstance(result, Matrix):
        check_size(result)
    figure = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.set_title(_drawable(title, _TITLE_CHARS), loc="left", fontsize="medium")
    if not isinstance(result, Matrix):
        axes.set_axis_off()
        axes.text(0.5, 0.5, f"{result:.6g}", ha="center", va="center", fontsize=40, transform=axes.transAxes)
    elif not result.names:
        axes.set_axis_off()
        axes.text(0.5, 0.5, "no series", ha="center", va="center", color="gray", transform=axes.transAxes)
    else:
        times = result.timestamps.astype("datetime64[ms]")
        with rc_context({"date.converter": "concise"}):  # ticks like "14:30", the day once
            for row, label in zip(result.values, series_labels(result), strict=True):
                marker = "o" if _isolated_points(row) else None  # a lone point draws no line
                axes.plot(
                    times,
                    row,
                    linewidth=1.2,
                    marker=marker,
                    markersize=3,
                    label=_drawable(label, _LABEL_CHARS),
                )
            if len(times) == 1:  # else matplotlib spans years around a single instant
                step = np.timedelta64(max(result.step_ms, 1), "ms")
                axes.set_xlim(times[0] - step, times[0] + step)
        axes.set_xlabel("UTC", fontsize="small", color="gray")
        axes.yaxis.set_major_formatter(FuncFormatter(_short))
        axes.grid(alpha=0.3)
        shown = min(len(result.names), LEGEND_SERIES)
        more = len(result.names) - shown
        handles, labels = axes.get_legend_handles_labels()
        handles, labels = handles[:shown], labels[:shown]
        if more:
            handles.append(Line2D([], [], linestyle="none"))
            labels.append(f"and {more} more")
        axes.legend(
            handles,
            labels,
            fontsize="small",
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            frameon=False,
        )
        if np.isnan(result.values).all():
            axes.text(0.5, 0.5, "no values", ha="center", va="center", color="gray", transform=axes.transAxes)
    return figure


def _isolated_points(row: np.ndarray) -> bool:
    """Whether ``row`` has a value with no value beside it (a line cannot show it)."""
    finite = np.isfinite(row)
    before = np.concatenate(([False], finite[:-1]))
    after = np.concatenate((finite[1:], [False]))
    return bool((finite & ~before & ~after).any())


def _short(value: float, _position: int | None = None) -> str:
    """An axis label as the page writes values: 400G rather than 4e11, 0.25 rather than 250m."""
    size = abs(value)
    for scale, suffix in _SCALES:
        if size >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.4g}"


def _drawable(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters; a character the font lacks (a
    control character, a script DejaVu Sans does not cover) becomes "?" where matplotlib
    would warn, and "$" stays a dollar rather than starting mathtext."""
    font = get_font(findfont(FontProperties()))
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return "".join(c if font.get_char_index(ord(c)) else "?" for c in text).replace("$", r"\$")
