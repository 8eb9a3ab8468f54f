"""VHMS errors, one tree rooted at :class:`VhmsError`.

::

    VhmsError
    ├── SelectorError         (also ValueError)  a selector that does not parse; says where
    ├── ResolutionError       (also ValueError)  a bad resolution or aggregate specification
    ├── LimitExceededError                       a configured limit refused the work
    │   ├── SeriesLimitError                     the store holds max_series already
    │   └── FetchLimitError                      too many series or points for one query
    ├── SnapshotError                            a snapshot that cannot be written or read
    ├── DataDirInUseError                        another live process holds the data directory
    ├── WalError                                 the write-ahead log could not make an ingest durable
    │   └── WalPolicyError    (also ValueError)  an unknown fsync policy
    ├── UnavailableError                         no live member of a shard could do the work
    │   └── CatchingUpError                      a member still catching up from its peer refused a read
    └── ProtocolVersionError                     a peer of another ingest protocol version
"""

from __future__ import annotations

__all__ = [
    "CatchingUpError",
    "DataDirInUseError",
    "FetchLimitError",
    "LimitExceededError",
    "ProtocolVersionError",
    "ResolutionError",
    "SelectorError",
    "SeriesLimitError",
    "SnapshotError",
    "UnavailableError",
    "VhmsError",
    "WalError",
    "WalPolicyError",
]


class VhmsError(Exception):
    """Root of every error the VHMS package raises."""


class SelectorError(VhmsError, ValueError):
    """A series selector that does not parse; the message shows where."""


class ResolutionError(VhmsError, ValueError):
    """A resolution or aggregate specification that does not parse."""


class LimitExceededError(VhmsError):
    """A configured limit refused the work."""


class SeriesLimitError(LimitExceededError):
    """New series refused: the store already holds ``max_series``."""


class FetchLimitError(LimitExceededError):
    """A query would return more series or points than allowed."""


class DataDirInUseError(VhmsError):
    """Another live process holds the shard's data directory; the message names its PID."""


class SnapshotError(VhmsError):
    """A snapshot could not be written, or read back intact."""


class WalError(VhmsError):
    """An ingest the write-ahead log could not make durable (a write or fsync failed, the
    log is closed, or the wait passed its timeout): it is not acknowledged, the writer
    sends it again."""


class WalPolicyError(WalError, ValueError):
    """An fsync policy other than ``always`` and ``periodic``."""


class UnavailableError(VhmsError):
    """No live VHMS shard, or no member of a shard answered (the message says which)."""


class CatchingUpError(UnavailableError):
    """A member that is still catching up from a peer of its shard (``vhms.server.catchup``)
    refuses reads: the sharded client asks the shard's next member."""


class ProtocolVersionError(VhmsError):
    """A peer speaks another ingest protocol version (``vhms.thrift``); the message names both."""
