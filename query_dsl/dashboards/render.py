"""A query result drawn as a PNG, for e-mails and chat: matplotlib's object API on the Agg
canvas (no display, no pyplot global state, so server threads can draw at once), in
:mod:`query_dsl.dashboards.figure`, imported with the first chart (matplotlib takes a second
to import: a query API that draws no chart does not pay it).

A chart has a title, a line per series on a UTC time axis and a legend of at most
``LEGEND_SERIES`` series (then "and N more"); a number is drawn as large text. More than
``MAX_SERIES`` series or ``MAX_POINTS`` points (series x instants) are refused
(``QueryLimitError``): narrow the range, ``bucketize()``, ``reduce()`` or ``top()`` first.
"""

from __future__ import annotations

import io

from query_dsl.exceptions import QueryLimitError
from query_dsl.matrix import Matrix

__all__ = ["LEGEND_SERIES", "MAX_POINTS", "MAX_SERIES", "check_size", "render_png", "series_labels"]

MAX_SERIES = 500
# a noisy line costs matplotlib about 20 us a point: 200,000 points draw in about 4 s at worst
MAX_POINTS = 200_000
LEGEND_SERIES = 10


def series_labels(result: Matrix) -> list[str]:
    """Short legend labels: only the labels that differ between series (and the name if
    names differ), so ``http.requests{dc=par,method=GET,status=200}`` reads ``method=GET, status=200``."""
    varying = sorted(
        {k for labels in result.labels for k in labels if len({lab.get(k) for lab in result.labels}) > 1}
    )
    names_differ = len(set(result.names)) > 1
    out = []
    for name, labels in zip(result.names, result.labels, strict=True):
        parts = ", ".join(f"{k}={labels[k]}" for k in varying if k in labels)
        if names_differ or not parts:
            parts = f"{name}{{{parts}}}" if parts else name
        out.append(parts)
    return out


def render_png(result: Matrix | float, *, title: str, width: int = 800, height: int = 400) -> bytes:
    """``result`` as a ``width`` x ``height`` pixel PNG."""
    from query_dsl.dashboards.figure import draw  # matplotlib, on the first chart only

    out = io.BytesIO()
    draw(result, title=title, width=width, height=height).savefig(out, format="png")
    return out.getvalue()


def check_size(result: Matrix) -> None:
    """``QueryLimitError`` if ``result`` has more series or points than a chart draws."""
    series, points = len(result.names), result.values.size
    if series > MAX_SERIES:
        raise QueryLimitError(
            f"a rendered chart draws at most {MAX_SERIES} series, this query gives {series:,}: "
            "reduce() or top() first"
        )
    if points > MAX_POINTS:
        raise QueryLimitError(
            f"a rendered chart draws at most {MAX_POINTS:,} points (series x instants), this query gives "
            f"{points:,}: narrow the range, bucketize() or reduce() first"
        )
