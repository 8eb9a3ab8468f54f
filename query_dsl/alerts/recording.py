"""Recording rules: each evaluation runs every rule's PromQL at one instant and writes the
result back into VHMS as new series, as Prometheus's recording rules do.

Every series of the result becomes ``<record>{<its labels>, <the rule's labels>}`` (its
``__name__`` dropped, the rule's labels over its own) with the result's value at the
evaluation time; a scalar result is one series with the rule's labels only. The samples go
through a :class:`SampleWriter`, VHMS's ingest client (:class:`vhms.ShardedClient`: the
consistent-hash placement and replicas the agent's vhms sink uses, so the written series
land where readers look), never into a store's memory directly. A rule whose result holds
two series with the same labels once the rule's are applied fails, as in Prometheus
(``vector contains metrics with the same labelset after applying rule labels``); a failing
rule is logged and reported, the others still run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from bookkeeper.wire import IngestColumns, format_series
from query_dsl.alerts.rules import RecordingRule
from query_dsl.evaluator import Limits
from query_dsl.matrix import Matrix
from query_dsl.promql import instant_query
from query_dsl.promql.values import Scalar
from query_dsl.sources import DataSource

__all__ = ["Recorder", "SampleWriter"]

log = logging.getLogger(__name__)


class SampleWriter(Protocol):
    def ingest(self, columns: IngestColumns) -> tuple[int, int]:
        """Store the samples; ``(stored, refused)``."""
        ...


class Recorder:
    """Evaluates ``rules`` over ``source`` and writes their series through ``writer``."""

    def __init__(
        self,
        rules: Sequence[RecordingRule],
        source: DataSource,
        writer: SampleWriter,
        limits: Limits | None = None,
    ) -> None:
        self.rules = list(rules)
        self.source = source
        self.writer = writer
        self.limits = limits
        self.written = 0

    def series(self, rule: RecordingRule, now_ms: int) -> IngestColumns:
        """What ``rule`` records at ``now_ms`` (``QueryError`` if its query fails)."""
        result = instant_query(self.source, rule.expr, now_ms / 1000, limits=self.limits)
        keys: list[str] = []
        values: list[float] = []
        if isinstance(result.value, Matrix):
            for labels, points in result.series():
                labels.pop("__name__", None)
                keys.append(format_series(rule.record, {**labels, **rule.labels}))
                values.append(points[-1][1])
        elif isinstance(result.value, Scalar):
            keys.append(format_series(rule.record, dict(rule.labels)))
            values.append(float(result.value.values[-1]))
        else:
            raise ValueError(
                f"a recording rule's expression must give a vector or a scalar, not {result.result_type}"
            )
        if len(set(keys)) != len(keys):
            raise ValueError("vector contains metrics with the same labelset after applying rule labels")
        return IngestColumns.from_keys(
            keys, np.array(values, dtype=np.float64), np.full(len(keys), now_ms, dtype=np.int64)
        )

    def evaluate(self, now_ms: int) -> dict[str, str]:
        """Run every rule at ``now_ms``; the errors by record name (empty when all went well)."""
        errors: dict[str, str] = {}
        for rule in self.rules:
            try:
                columns = self.series(rule, now_ms)
                if len(columns):
                    stored, _ = self.writer.ingest(columns)
                    self.written += stored
            except Exception as exc:  # a query or a write that fails must not stop the other rules
                errors[rule.record] = f"{type(exc).__name__}: {exc}"
                log.warning("recording rule %s failed: %s", rule.record, errors[rule.record])
        return errors
