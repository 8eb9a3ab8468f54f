"""The query language's errors, one tree rooted at :class:`QueryError`.

::

    QueryError
    ├── QuerySyntaxError   (also ValueError)  text that does not parse; line and column
    ├── QueryTypeError     (also ValueError)  a function given arguments it cannot take
    ├── MatchingError      (also ValueError)  ambiguous or impossible series matching
    ├── QueryLimitError                       series, points or wall time over the limits
    └── DashboardError     (also ValueError)  a saved dashboard that is not valid, or a bad name
        └── DashboardNotFoundError (also LookupError)  no dashboard of that name
"""

from __future__ import annotations

__all__ = [
    "DashboardError",
    "DashboardNotFoundError",
    "MatchingError",
    "QueryError",
    "QueryLimitError",
    "QuerySyntaxError",
    "QueryTypeError",
]


class QueryError(Exception):
    """Root of every error the query language raises."""


class QuerySyntaxError(QueryError, ValueError):
    """The text does not parse; the message gives line and column."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class QueryTypeError(QueryError, ValueError):
    """A function was given an argument it cannot take."""


class MatchingError(QueryError, ValueError):
    """Two sets of series cannot be matched as asked (ambiguous, or many-to-many)."""


class QueryLimitError(QueryError):
    """The query would read or compute more than the configured limits allow."""


class DashboardError(QueryError, ValueError):
    """A saved dashboard's name or file is not valid (too big, not JSON, not the schema)."""


class DashboardNotFoundError(DashboardError, LookupError):
    """No dashboard file of that name in the dashboards directory."""
