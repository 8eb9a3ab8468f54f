"""VHMS, the VarHistoryMemStore: recent history of every series in multi-resolution rings.

This is VHMS's **client surface**, what writers and readers share: the sharded client
(:class:`ShardedClient`, :class:`VhmsClient`; :class:`LocalClient` reads a store of this
process through the same calls), placement (:class:`HashRing`), selectors,
resolutions, fetch results by label columns (:class:`FetchResult`; the columns themselves are
``bookkeeper.ground.LabelColumn``),
the error tree and the limits. The **server surface** (the store, its index, the
write-ahead log, snapshots and the Thrift/HTTP service) is :mod:`vhms.server`.
See README.md beside this file and docs/vhms.md.
"""

from __future__ import annotations

from vhms.client import Address, ShardedClient, VhmsClient, merge_results
from vhms.exceptions import (
    CatchingUpError,
    DataDirInUseError,
    FetchLimitError,
    LimitExceededError,
    ProtocolVersionError,
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
from vhms.results import NAME, CoarseSpan, FetchResult
from vhms.selector import MAX_SELECTOR_LENGTH, Matcher, Selector, parse_selector

__all__ = [
    "DEFAULT_RESOLUTIONS",
    "MAX_PROGRAM_SIZE",
    "MAX_REGEX_LENGTH",
    "MAX_SELECTOR_LENGTH",
    "NAME",
    "Address",
    "CatchingUpError",
    "CoarseSpan",
    "DataDirInUseError",
    "FetchLimitError",
    "FetchResult",
    "HashRing",
    "LimitExceededError",
    "LocalClient",
    "Matcher",
    "ProtocolVersionError",
    "Resolution",
    "ResolutionError",
    "Selector",
    "SelectorError",
    "SeriesLimitError",
    "ShardedClient",
    "SnapshotError",
    "UnavailableError",
    "VhmsClient",
    "VhmsError",
    "WalError",
    "WalPolicyError",
    "merge_results",
    "parse_resolutions",
    "parse_selector",
]
