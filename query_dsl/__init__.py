"""The Artimon query language: map/reduce over label equivalence classes.

The languages live at the top (the DSL) and in ``promql/``; the query API over HTTP in
``http/``, dashboards in ``dashboards/``, alerting in ``alerts/``, each with its own
``__all__``. This surface gathers what most callers need. VHMS is read through its client
surface only (:class:`vhms.LocalClient` in process, :class:`ShardedSource` over the shards).
See README.md beside this file and docs/dsl.md.
"""

from __future__ import annotations

from query_dsl.apply import apply_op
from query_dsl.bucketize import bucketize
from query_dsl.budget import MemoryBudget, QueryBudget
from query_dsl.dashboards import EXAMPLES, Dashboard, DashboardDirectory
from query_dsl.evaluator import Evaluator, Limits
from query_dsl.exceptions import (
    AlertRuleError,
    DashboardError,
    DashboardNotFoundError,
    MatchingError,
    NotifyError,
    QueryBusyError,
    QueryError,
    QueryLimitError,
    QuerySyntaxError,
    QueryTypeError,
)
from query_dsl.filters import filter_selector, top, where_last
from query_dsl.http import Client, Collector, create_app, metrics_app, strings_answer, to_csv
from query_dsl.mappers import apply_mapper
from query_dsl.matrix import Matrix
from query_dsl.parser import Call, Duration, Node, Word, parse
from query_dsl.reduce import reduce_matrix
from query_dsl.sources import DataSource, ShardedSource

__all__ = [
    "EXAMPLES",
    "AlertRuleError",
    "Call",
    "Client",
    "Collector",
    "Dashboard",
    "DashboardDirectory",
    "DashboardError",
    "DashboardNotFoundError",
    "DataSource",
    "Duration",
    "Evaluator",
    "Limits",
    "MatchingError",
    "Matrix",
    "MemoryBudget",
    "Node",
    "NotifyError",
    "QueryBudget",
    "QueryBusyError",
    "QueryError",
    "QueryLimitError",
    "QuerySyntaxError",
    "QueryTypeError",
    "ShardedSource",
    "Word",
    "apply_mapper",
    "apply_op",
    "bucketize",
    "create_app",
    "filter_selector",
    "metrics_app",
    "parse",
    "reduce_matrix",
    "strings_answer",
    "to_csv",
    "top",
    "where_last",
]
