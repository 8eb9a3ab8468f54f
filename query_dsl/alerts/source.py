"""Where the engine's queries run: anything with ``query(text, start_ms, end_ms)``.

:class:`query_dsl.Client` is one already (through the HTTP query API);
:class:`EvaluatorSource` runs queries in this process over a ``DataSource`` (a store, or
the VHMS shards found in ZooKeeper).
"""

from __future__ import annotations

from typing import Protocol

from query_dsl.evaluator import Evaluator, Limits
from query_dsl.matrix import Matrix
from query_dsl.sources import DataSource

__all__ = ["EvaluatorSource", "QuerySource"]


class QuerySource(Protocol):
    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        """The query's value with ``end_ms`` as "now" (``None``: the wall clock) and
        ``start_ms`` as the default range start (``None``: an hour before the end)."""
        ...


class EvaluatorSource:
    """Queries evaluated in this process over ``source``, within ``limits``."""

    def __init__(self, source: DataSource, limits: Limits | None = None) -> None:
        self.source = source
        self.limits = limits

    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        evaluator = Evaluator(
            self.source, now_ms=end_ms, start_ms=start_ms, end_ms=end_ms, limits=self.limits
        )
        return evaluator.evaluate(query)
