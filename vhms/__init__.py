"""VHMS, the VarHistoryMemStore: recent history of every series in multi-resolution rings.

See README.md beside this file and docs/vhms.md.
"""

from __future__ import annotations

from vhms.exceptions import (
    ConfigurationError,
    LimitExceededError,
    QueryLimitError,
    SelectorError,
    SeriesLimitError,
    SnapshotError,
    VhmsError,
)
from vhms.resolutions import DEFAULT_RESOLUTIONS, Resolution, parse_resolutions
from vhms.selector import Matcher, Selector, parse_selector
from vhms.snapshot import load_snapshot, restore_or_empty, save_snapshot
from vhms.store import FetchResult, Store

__all__ = [
    "DEFAULT_RESOLUTIONS",
    "ConfigurationError",
    "FetchResult",
    "LimitExceededError",
    "Matcher",
    "QueryLimitError",
    "Resolution",
    "Selector",
    "SelectorError",
    "SeriesLimitError",
    "SnapshotError",
    "Store",
    "VhmsError",
    "load_snapshot",
    "parse_resolutions",
    "parse_selector",
    "restore_or_empty",
    "save_snapshot",
]
