"""The query language's errors, one tree rooted at :class:`QueryError`.

::

    QueryError
    ├── QuerySyntaxError   (also ValueError)  text that does not parse; line and column
    │   └── PromQLSyntaxError                 PromQL text that does not parse or type-check
    ├── QueryTypeError     (also ValueError)  a function given arguments it cannot take
    ├── MatchingError      (also ValueError)  ambiguous or impossible series matching
    ├── QueryLimitError                       series, points, bytes or wall time over the limits
    │   └── QueryBusyError                    the process's memory budget stayed spent; retry later
    ├── DashboardError     (also ValueError)  a saved dashboard that is not valid, or a bad name
    │   └── DashboardNotFoundError (also LookupError)  no dashboard of that name
    ├── AlertRuleError     (also ValueError)  a rules file (or rule) that is not valid; file, rule, field
    └── NotifyError                           a notifier could not deliver; says if a retry may help
"""

from __future__ import annotations

__all__ = [
    "AlertRuleError",
    "DashboardError",
    "DashboardNotFoundError",
    "MatchingError",
    "NotifyError",
    "PromQLSyntaxError",
    "QueryBusyError",
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


class QueryBusyError(QueryLimitError):
    """The queries running hold the process's memory budget and did not give enough back in
    time; ``retry_after_s`` says when trying again may help (HTTP ``Retry-After``)."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DashboardError(QueryError, ValueError):
    """A saved dashboard's name or file is not valid (too big, not JSON, not the schema)."""


class DashboardNotFoundError(DashboardError, LookupError):
    """No dashboard file of that name in the dashboards directory."""


class AlertRuleError(QueryError, ValueError):
    """A rules file, a rule or a notifier setting is not valid. ``source`` is the file (or
    ``<dict>``), ``rule`` the rule or notifier concerned (``None`` for the file itself) and
    ``field`` the offending key; the message names all three."""

    def __init__(self, source: str, rule: str | None, field: str | None, problem: str) -> None:
        where = source + (f": {rule}" if rule else "") + (f": {field}" if field else "")
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.rule = rule
        self.field = field
        self.problem = problem


class NotifyError(QueryError):
    """A notifier could not deliver a notification. ``retryable`` is false when trying again
    cannot help (a 4xx answer, a refused recipient)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class PromQLSyntaxError(QuerySyntaxError):
    """PromQL text that does not parse or does not type-check; line and column given."""
