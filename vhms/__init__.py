"""VHMS, the VarHistoryMemStore: recent history of every series in multi-resolution rings.

The store side (:class:`Store`, snapshots, :class:`VhmsService`) and the client side that
writers and readers share (:class:`ShardedClient`, :class:`HashRing`, :class:`FetchResult`).
See README.md beside this file and docs/vhms.md.
"""

from __future__ import annotations

from vhms.client import Address, ShardedClient, VhmsClient, merge_results
from vhms.exceptions import (
    DataDirInUseError,
    FetchLimitError,
    LimitExceededError,
    ResolutionError,
    SelectorError,
    SeriesLimitError,
    SnapshotError,
    UnavailableError,
    VhmsError,
)
from vhms.placement import HashRing
from vhms.resolutions import DEFAULT_RESOLUTIONS, Resolution, parse_resolutions
from vhms.selector import Matcher, Selector, parse_selector
from vhms.service import VhmsService
from vhms.snapshot import load_snapshot, restore_or_empty, save_snapshot
from vhms.store import FetchResult, LabelColumns, Store, compact_column

__all__ = [
    "DEFAULT_RESOLUTIONS",
    "Address",
    "DataDirInUseError",
    "FetchLimitError",
    "FetchResult",
    "HashRing",
    "LabelColumns",
    "LimitExceededError",
    "Matcher",
    "Resolution",
    "ResolutionError",
    "Selector",
    "SelectorError",
    "SeriesLimitError",
    "ShardedClient",
    "SnapshotError",
    "Store",
    "UnavailableError",
    "VhmsClient",
    "VhmsError",
    "VhmsService",
    "compact_column",
    "load_snapshot",
    "merge_results",
    "parse_resolutions",
    "parse_selector",
    "restore_or_empty",
    "save_snapshot",
]
