"""The Artimon query language: map/reduce over label equivalence classes.

See README.md beside this file and docs/dsl.md.
"""

from __future__ import annotations

from query_dsl.apply import apply_op
from query_dsl.bucketize import bucketize
from query_dsl.dashboards import EXAMPLES, Dashboard, DashboardDirectory
from query_dsl.evaluator import Evaluator, Limits
from query_dsl.exceptions import (
    AlertRuleError,
    DashboardError,
    DashboardNotFoundError,
    MatchingError,
    NotifyError,
    QueryError,
    QueryLimitError,
    QuerySyntaxError,
    QueryTypeError,
)
from query_dsl.filters import filter_selector, top, where_last
from query_dsl.http.answer import strings_answer
from query_dsl.http.api import create_app, to_csv
from query_dsl.http.client import Client
from query_dsl.http.self_metrics import Collector, metrics_app
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
    "Node",
    "NotifyError",
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
