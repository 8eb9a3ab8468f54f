"""VHMS, the VarHistoryMemStore: recent history of every series in multi-resolution rings.

The store side (:class:`Store`, snapshots, :class:`VhmsService`) and the client side that
writers and readers share (:class:`ShardedClient`, :class:`HashRing`, :class:`FetchResult`,
and :class:`LocalClient`, which reads a store of this process through the same calls).
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
    WalError,
    WalPolicyError,
)
from vhms.local import LocalClient
from vhms.placement import HashRing
from vhms.regex import MAX_PROGRAM_SIZE, MAX_REGEX_LENGTH
from vhms.resolutions import DEFAULT_RESOLUTIONS, Resolution, parse_resolutions
from vhms.selector import MAX_SELECTOR_LENGTH, Matcher, Selector, parse_selector
from vhms.service import DEFAULT_SERVER_LIMITS, VhmsService
from vhms.snapshot import load_snapshot, restore_or_empty, save_snapshot
from vhms.store import FetchResult, LabelColumns, Store, compact_column
from vhms.wal import FSYNC_POLICIES, ReplayReport, WriteAheadLog
from vhms.wal import replay as replay_wal

__all__ = [
    "DEFAULT_RESOLUTIONS",
    "DEFAULT_SERVER_LIMITS",
    "FSYNC_POLICIES",
    "MAX_PROGRAM_SIZE",
    "MAX_REGEX_LENGTH",
    "MAX_SELECTOR_LENGTH",
    "Address",
    "DataDirInUseError",
    "FetchLimitError",
    "FetchResult",
    "HashRing",
    "LabelColumns",
    "LimitExceededError",
    "LocalClient",
    "Matcher",
    "ReplayReport",
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
    "WalError",
    "WalPolicyError",
    "WriteAheadLog",
    "compact_column",
    "load_snapshot",
    "merge_results",
    "parse_resolutions",
    "parse_selector",
    "replay_wal",
    "restore_or_empty",
    "save_snapshot",
]
