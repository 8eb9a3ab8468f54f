"""PromQL on Artimon's query engine: parse with :func:`parse`, run with
:func:`instant_query` or :func:`range_query` over the same sources as the DSL.

See README beside ``query_dsl`` and docs/promql.md.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from query_dsl.budget import QueryBudget
from query_dsl.evaluator import Limits
from query_dsl.exceptions import PromQLSyntaxError, QueryLimitError, QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.promql.ast import Aggregation, Call, Expr, LabelMatcher, Paren, repeated_selectors
from query_dsl.promql.engine import LOOKBACK_MS, Engine
from query_dsl.promql.parser import parse, value_type
from query_dsl.promql.result import PromQLResult, format_value
from query_dsl.promql.signatures import MATRIX, SCALAR, STRING, VECTOR
from query_dsl.promql.values import RangeValue, Scalar, String, present, settle
from query_dsl.series_table import SeriesTable
from query_dsl.sources import DataSource
from vhms import LimitExceededError, VhmsError

__all__ = [
    "LOOKBACK_MS",
    "MAX_POINTS_PER_SERIES",
    "PromQLResult",
    "PromQLSyntaxError",
    "format_value",
    "instant_query",
    "parse",
    "range_query",
]

MAX_POINTS_PER_SERIES = 11_000  # Prometheus's own limit on a range query's resolution


_NAMES = {MATRIX: "range vector", STRING: "string"}
# a scalar's answer as one series: shared, so that its order and texts are made once
_NAMELESS = SeriesTable.from_lists([""], [{}])


def _window(value: RangeValue) -> tuple[Matrix, np.ndarray]:
    """A range vector's samples in its (single) window, and their own times."""
    samples, end = value.samples, int(value.ends[-1])
    own = samples.sample_times()
    inside = (own >= end - value.range_ms) & (own <= end)
    values = np.where(inside, samples.values, np.nan)
    columns = np.flatnonzero(present(values).any(axis=0))
    window = Matrix.from_table(samples.table, samples.times[columns], values[:, columns], samples.step_ms)
    return window, own[:, columns]


def _order(expr: Expr) -> str:
    """How an instant vector answer is ordered: as the query sorted it (``sort``), by value
    (``topk`` highest first, ``bottomk`` lowest first), else by label set."""
    while isinstance(expr, Paren):
        expr = expr.expr
    if isinstance(expr, Call) and expr.name in ("sort", "sort_desc"):
        return "query"
    if isinstance(expr, Aggregation) and expr.op in ("topk", "bottomk"):
        return "descending" if expr.op == "topk" else "ascending"
    return "labels"


@lru_cache(maxsize=1024)  # as parse's: a dashboard's queries are asked again and again
def _walked(text: str) -> tuple[Expr, str, str, frozenset[tuple[LabelMatcher, ...]]]:
    """``text`` parsed, and what walks of its expression tell (its type, its answer's order,
    the selectors it writes more than once): the same for every evaluation."""
    expr = parse(text)
    return expr, value_type(expr), _order(expr), repeated_selectors(expr)


def _run(
    source: DataSource,
    text: str,
    start_ms: int,
    end_ms: int,
    step_ms: int,
    limits: Limits | None,
    kind: str,
    budget: QueryBudget | None,
) -> PromQLResult:
    expr, found, order, repeated = _walked(text)
    engine = Engine(source, start_ms, end_ms, step_ms, limits or Limits(), budget=budget)
    try:
        value = engine.evaluate(expr, repeated)
    except LimitExceededError as exc:
        raise QueryLimitError(str(exc)) from exc
    except VhmsError as exc:
        raise QueryTypeError(str(exc)) from exc
    except RecursionError:
        raise QueryLimitError("the query nests too deeply to evaluate") from None
    times = np.arange(start_ms, end_ms + 1, max(step_ms, 1), dtype=np.int64)
    point_times: np.ndarray | None = None
    if kind == "range" and found not in (SCALAR, VECTOR):
        raise PromQLSyntaxError(
            f"invalid expression type {_NAMES[found]!r} for range query, must be Scalar or instant Vector",
            1,
            1,
        )
    if kind == "range":
        if isinstance(value, Scalar):
            values = settle(value.values[None, :], np.zeros((1, len(times)), dtype=bool))  # a value each time
            value = Matrix.from_table(_NAMELESS, times, values, step_ms)
        result_type = "matrix"
    else:
        result_type = {SCALAR: "scalar", STRING: "string", MATRIX: "matrix"}.get(found, "vector")
        if isinstance(value, RangeValue):
            value, point_times = _window(value)
    if isinstance(value, String | Scalar | Matrix):
        return PromQLResult(result_type, value, times, engine.warnings, point_times=point_times, order=order)
    raise QueryTypeError(f"the query gives {type(value).__name__}, not an answer")


def instant_query(
    source: DataSource,
    text: str,
    time_s: float,
    *,
    limits: Limits | None = None,
    budget: QueryBudget | None = None,
) -> PromQLResult:
    """``text`` evaluated at ``time_s`` (epoch seconds), within ``budget`` (default: one of
    ``limits.max_bytes``)."""
    at = round(time_s * 1000)
    return _run(source, text, at, at, 1, limits, "instant", budget)


def range_query(
    source: DataSource,
    text: str,
    start_s: float,
    end_s: float,
    step_s: float,
    *,
    limits: Limits | None = None,
    budget: QueryBudget | None = None,
) -> PromQLResult:
    """``text`` evaluated at ``start_s, start_s + step_s, ... <= end_s`` within ``budget``;
    refuses more than :data:`MAX_POINTS_PER_SERIES` steps (``QueryLimitError``), as
    Prometheus does."""
    start, end, step = round(start_s * 1000), round(end_s * 1000), round(step_s * 1000)
    if step <= 0:
        raise QueryTypeError(
            "zero or negative query resolution step widths are not accepted. Try a positive integer"
        )
    if end < start:
        raise QueryTypeError("end timestamp must not be before start time")
    if (end - start) // step + 1 > MAX_POINTS_PER_SERIES:
        raise QueryLimitError(
            "exceeded maximum resolution of 11,000 points per timeseries. "
            "Try decreasing the query resolution (?step=XX)"
        )
    return _run(source, text, start, end, step, limits, "range", budget)
