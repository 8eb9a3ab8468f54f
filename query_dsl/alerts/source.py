"""Where the engine's queries run: anything with ``query(text, start_ms, end_ms)``.

:class:`query_dsl.Client` is one already (through the HTTP query API);
:class:`EvaluatorSource` runs queries in this process over a ``DataSource`` (a store, or
the VHMS shards found in ZooKeeper); :class:`PromQLSource` runs PromQL instant queries
(a Prometheus rule file's) the same way.
"""

from __future__ import annotations

import time
from typing import Protocol

from query_dsl.evaluator import Evaluator, Limits
from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.promql import instant_query
from query_dsl.promql.values import Scalar
from query_dsl.sources import DataSource

__all__ = ["EvaluatorSource", "PromQLSource", "QuerySource"]


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


class PromQLSource:
    """PromQL instant queries at ``end_ms`` (``None``: the wall clock) over ``source``, as a
    Prometheus server evaluates its rules: the answer's instant vector as a one-column
    matrix, a scalar as a number; a string is a ``QueryTypeError``."""

    def __init__(self, source: DataSource, limits: Limits | None = None) -> None:
        self.source = source
        self.limits = limits

    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        at_s = time.time() if end_ms is None else end_ms / 1000
        value = instant_query(self.source, query, at_s, limits=self.limits).value
        if isinstance(value, Scalar):
            return float(value.values[-1])
        if isinstance(value, Matrix):
            return value
        raise QueryTypeError(f"the PromQL query {query!r} gives a string, not a vector or a scalar")
