"""VHMS errors, one tree rooted at :class:`VhmsError`.

::

    VhmsError
    ├── SelectorError         (also ValueError)  a selector that does not parse; says where
    ├── ConfigurationError    (also ValueError)  a bad resolution or aggregate specification
    ├── LimitExceededError                       a configured limit refused the work
    │   ├── SeriesLimitError                     the store holds max_series already
    │   └── QueryLimitError                      too many series or points for one query
    └── SnapshotError                            a snapshot that cannot be written or read
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "LimitExceededError",
    "QueryLimitError",
    "SelectorError",
    "SeriesLimitError",
    "SnapshotError",
    "VhmsError",
]


class VhmsError(Exception):
    """Root of every error the VHMS package raises."""


class SelectorError(VhmsError, ValueError):
    """A series selector that does not parse; the message shows where."""


class ConfigurationError(VhmsError, ValueError):
    """A resolution or aggregate specification that does not parse."""


class LimitExceededError(VhmsError):
    """A configured limit refused the work."""


class SeriesLimitError(LimitExceededError):
    """New series refused: the store already holds ``max_series``."""


class QueryLimitError(LimitExceededError):
    """A query would return more series or points than allowed."""


class SnapshotError(VhmsError):
    """A snapshot could not be written, or read back intact."""
