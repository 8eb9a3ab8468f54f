"""Dashboards: saved dashboards as JSON files in a directory (``saved.py``: the format, its
limits and the directory), the shipped examples (``examples/``), and a query result drawn
as a PNG (``render.py``). The page that shows them and their HTTP routes are
:mod:`query_dsl.http`'s (``web.py``, ``static/``). See docs/dashboards.md.
"""

from __future__ import annotations

from query_dsl.dashboards.render import LEGEND_SERIES, MAX_POINTS, MAX_SERIES, render_png, series_labels
from query_dsl.dashboards.saved import (
    EXAMPLES,
    MAX_DASHBOARDS,
    MAX_FILE_BYTES,
    MAX_PANELS,
    NAME_PATTERN,
    Dashboard,
    DashboardDirectory,
    DashboardSummary,
    Panel,
)

__all__ = [
    "EXAMPLES",
    "LEGEND_SERIES",
    "MAX_DASHBOARDS",
    "MAX_FILE_BYTES",
    "MAX_PANELS",
    "MAX_POINTS",
    "MAX_SERIES",
    "NAME_PATTERN",
    "Dashboard",
    "DashboardDirectory",
    "DashboardSummary",
    "Panel",
    "render_png",
    "series_labels",
]
