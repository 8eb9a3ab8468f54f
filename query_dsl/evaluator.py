"""Evaluate a query (text or syntax tree) against a data source.

Functions (see docs/dsl.md): ``fetch``, ``map``, ``bucketize``, ``reduce``, ``histogram_quantile``, ``apply``,
``filter``, ``top``, ``bottom``, ``where_last``; operators ``+ - * / % ^``, comparisons,
``and or unless`` with PromQL's matching modifiers. Limits: series and points per query,
bytes (each fetch charges the query's :class:`~query_dsl.QueryBudget` for what it and the
steps after it make of its points) and wall time, each a ``QueryLimitError`` naming the
limit. The wall time is checked between steps and inside the steps whose cost grows with
the data (a filter's regexes over many label values, a reduce or bucketize one class or
bucket at a time, window mappers by slices of series); a fetch is bounded before it starts
by the store's limits. Times are epoch ms within ``[0, MAX_TIME_MS]``, durations at most 100
years (``QueryTypeError``, ``QuerySyntaxError``): what reaches VHMS always fits its int64
milliseconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from query_dsl.apply import apply_op
from query_dsl.bucketize import bucketize
from query_dsl.budget import DEFAULT_QUERY_BYTES, QueryBudget
from query_dsl.exceptions import QueryError, QueryLimitError, QueryTypeError
from query_dsl.filters import filter_selector, top, where_last
from query_dsl.histogram_quantile import histogram_quantile
from query_dsl.mappers import MAPPERS, TWO_POINT_MAPPERS, apply_mapper, window_buckets
from query_dsl.matrix import Matrix
from query_dsl.parser import BinaryOp, Call, Duration, Negate, Node, Word, parse
from query_dsl.reduce import FUSED_AGGREGATES, reduce_matrix, reduce_windows
from query_dsl.series_table import SeriesTable
from query_dsl.shared_calls import SharedCalls
from query_dsl.sources import DataSource
from query_dsl.windows import PREFIX_WINDOWS
from vhms import LimitExceededError, VhmsError

__all__ = ["FUNCTIONS", "MAX_TIME_MS", "Evaluator", "Limits", "Value"]

Value = Matrix | float
MAX_TIME_MS = 2**53  # the API's bound too: about the year 287,000, and exact in a float64
FETCH_CELLS = 4  # float64s a fetched point costs the query's budget (tests/query_dsl/test_budget.py)


@dataclass(frozen=True)
class Limits:
    """A query's limits: series per selector, points read, wall time, and ``max_bytes``, its
    working set's budget (:class:`query_dsl.QueryBudget`)."""

    max_series: int = 200_000
    max_points: int = 50_000_000
    timeout_s: float = 30.0
    max_bytes: int = DEFAULT_QUERY_BYTES


def _in_range(ms: float, what: str) -> int:
    """``ms`` as an epoch-ms time, ``QueryTypeError`` unless it is within ``[0, MAX_TIME_MS]``."""
    if not 0 <= ms <= MAX_TIME_MS:  # NaN too
        raise QueryTypeError(f"{what}: {ms:g} is not a time within 0 (1970) and {MAX_TIME_MS} epoch ms")
    return int(ms)


def _time(value: Any, now_ms: int, what: str) -> int:
    if isinstance(value, float | int) and not isinstance(value, bool):
        return _in_range(value, what)
    if isinstance(value, Duration):
        return _in_range(now_ms - value.ms, what)  # a duration as a time: that long ago
    if isinstance(value, Word | str):
        text = value.name if isinstance(value, Word) else value
        if text == "now":
            return now_ms
        try:
            return _in_range(datetime.fromisoformat(text).timestamp() * 1000, what)
        except (ValueError, OverflowError, OSError):  # not ISO 8601, or a year the clock cannot hold
            raise QueryTypeError(
                f"{what}: {text[:100]!r} is not epoch ms, an ISO 8601 time, a duration ago or now"
            ) from None
    raise QueryTypeError(f"{what}: {value!r} is not a time")


def _word(value: Any, what: str) -> str:
    if isinstance(value, Word):
        return value.name
    if isinstance(value, str):
        return value
    raise QueryTypeError(f"{what} must be a name, got {value!r}")


def _words(value: Any, what: str) -> list[str]:
    if not isinstance(value, list):
        raise QueryTypeError(f"{what} must be a list of label names like [rack, dc], got {value!r}")
    return [_word(item, what) for item in value]


def _matrix(value: Any, what: str) -> Matrix:
    if not isinstance(value, Matrix):
        raise QueryTypeError(f"{what} needs series (e.g. from fetch), got {value!r}")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, Duration):
        return float(value.ms)
    if isinstance(value, float | int) and not isinstance(value, bool):
        return float(value)
    raise QueryTypeError(f"{what} must be a number, got {value!r}")


def _count(value: Any, what: str) -> int:
    number = _number(value, what)
    if not math.isfinite(number) or not 0 <= number <= MAX_TIME_MS:
        raise QueryTypeError(f"{what} must be a whole number from 0, got {number:g}")
    return int(number)


class Evaluator:
    """Evaluates queries over ``source``; ``start_ms``/``end_ms`` are the default range of a
    ``fetch`` that names none (else the last hour up to ``now_ms``). ``delegate``, when
    given, is offered each node of the tree before the evaluator walks it and may answer it
    itself (its value), or return None to let the evaluator do it: how ``spark_jobs``'
    ``analyze`` runs a fetch, its per-series steps and their reduce on Spark's executors."""

    def __init__(
        self,
        source: DataSource,
        *,
        now_ms: int | None = None,
        start_ms: int | None = None,
        end_ms: int | None = None,
        limits: Limits | None = None,
        delegate: Callable[[Node], Value | None] | None = None,
        budget: QueryBudget | None = None,
    ) -> None:
        self.source = source
        self.budget = budget
        self.delegate = delegate
        self.now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        self.end_ms = end_ms if end_ms is not None else self.now_ms
        self.start_ms = start_ms if start_ms is not None else self.end_ms - 3_600_000
        self.limits = limits or Limits()
        self._deadline = 0.0
        self.points_read = 0
        self.warnings: list[str] = []  # why an answer is empty, when the evaluator knows
        # the last text and its time of the STRING series the query fetched (no numbers)
        self.strings: dict[str, tuple[int, str]] = {}
        self._shared = SharedCalls([], frozenset())
        self._spend = QueryBudget(self.limits.max_bytes)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def evaluate(self, query: str | Node) -> Value:
        """The value of ``query``; :attr:`warnings` then says why parts of it are empty,
        where that is known (no series matched, a window too short for its mapper)."""
        node = parse(query) if isinstance(query, str) else query
        self._deadline = time.monotonic() + self.limits.timeout_s
        self.points_read = 0
        self.warnings = []
        self.strings = {}
        self._spend = self.budget if self.budget is not None else QueryBudget(self.limits.max_bytes)
        try:
            self._shared = SharedCalls(node, _PURE)
            result = self._eval(node)
        except LimitExceededError as exc:  # a store's limit is the query's limit to its user
            raise QueryLimitError(str(exc)) from exc
        except VhmsError as exc:  # selectors speak the store's words
            raise QueryError(str(exc)) from exc
        except RecursionError:  # parse() bounds the depth; a tree built by hand may not be
            raise QueryLimitError("the query nests too deeply to evaluate") from None
        if not isinstance(result, Matrix | float):
            raise QueryTypeError(f"the query gives {result!r}, not series or a number")
        answer: Matrix | float = result
        empty = isinstance(answer, Matrix) and len(answer) and np.isnan(answer.values).all()
        if empty and not self.warnings and not self.strings:
            self.warn(
                "every value of the answer is empty (no sample in the range, or none left by the query)"
            )
        return answer

    def _check_time(self) -> None:
        """``QueryLimitError`` once the query has run ``limits.timeout_s``: called before each
        step, and by the steps whose cost grows with the data while they run."""
        if time.monotonic() > self._deadline:
            raise QueryLimitError(f"the query ran longer than {self.limits.timeout_s:g} s")

    def _eval(self, node: Node) -> Any:
        self._check_time()
        if self.delegate is not None and (answer := self.delegate(node)) is not None:
            return answer
        if isinstance(node, float | str | Duration | Word):
            return node
        if isinstance(node, list):
            return [self._eval(item) for item in node]
        if isinstance(node, Negate):
            value = self._eval(node.operand)
            if isinstance(value, Matrix):
                return value.with_values(-value.values)
            return -_number(value, "unary minus")
        if isinstance(node, BinaryOp):
            left, right = self._eval(node.left), self._eval(node.right)
            for side in (left, right):
                if not isinstance(side, Matrix | float):
                    raise QueryTypeError(f"operator {node.op} needs series or numbers, got {side!r}")
            m = node.matching
            return apply_op(
                node.op,
                left,
                right,
                on=list(m.labels) if m.kind == "on" else None,
                ignoring=list(m.labels) if m.kind == "ignoring" else None,
                group=m.group,
                as_bool=m.as_bool,
            )
        if isinstance(node, Call):
            function = FUNCTIONS.get(node.name)
            if function is None:
                raise QueryTypeError(
                    f"unknown function {node.name!r} at line {node.line}, column {node.column} "
                    f"(known: {', '.join(sorted(FUNCTIONS))})"
                )
            key = self._shared.key(node) if function is _BUILT_IN.get(node.name) else None
            if key is not None:
                done, answer = self._shared.get(key)
                if done:
                    return answer
            fused = self._fused(node) if function is _BUILT_IN["reduce"] else None
            if fused is not None:
                answer = fused
            else:
                args = [self._eval(arg) for arg in node.args]
                kwargs = {name: self._eval(value) for name, value in node.kwargs}
                with _at(node):
                    answer = function(self, args, kwargs)
            if key is not None:
                self._shared.put(key, answer)
            return answer
        raise QueryTypeError(f"cannot evaluate {node!r}")

    # -- functions ---------------------------------------------------------------------------

    def fetch(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        _arity("fetch", args, 1, 1)
        selector = args[0]
        if not isinstance(selector, str):
            raise QueryTypeError(f"fetch takes a selector string first, got {selector!r}")
        _known("fetch", kwargs, {"last", "start", "end", "resolution"})
        end = _time(kwargs["end"], self.now_ms, "end") if "end" in kwargs else self.end_ms
        if "last" in kwargs:
            if not isinstance(kwargs["last"], Duration):
                raise QueryTypeError(f"last= takes a duration like 10m, got {kwargs['last']!r}")
            start = end - kwargs["last"].ms
        else:
            start = _time(kwargs["start"], self.now_ms, "start") if "start" in kwargs else self.start_ms
        start, end = _in_range(start, "fetch's start"), _in_range(end, "fetch's end")
        resolution: str | int = "auto"
        if "resolution" in kwargs:
            value = kwargs["resolution"]
            resolution = value.ms // 1000 if isinstance(value, Duration) else _word(value, "resolution")
        if end <= start:
            raise QueryTypeError(f"fetch needs start < end, got {start} and {end}")
        result = self.source.fetch(selector, start, end, resolution)
        points = len(result) * len(result.timestamps)
        if len(result) > self.limits.max_series:
            raise QueryLimitError(
                f"fetch({selector!r}) reads {len(result)} series, more than {self.limits.max_series}"
            )
        self.points_read += points
        if self.points_read > self.limits.max_points:
            raise QueryLimitError(
                f"the query reads {self.points_read} points, more than {self.limits.max_points}"
            )
        # held to the query's end (shared calls keep their values): the fetch, and what the
        # steps after it make of as many points (a map's answer, a reduce's sorted copies)
        self._spend.need(points * 8 * FETCH_CELLS, f"fetch({selector!r})'s {len(result):,} series")
        if not len(result):
            self.warn(f"fetch({selector!r}) matches no series")
        elif _some_row_empty(result.values):  # STRING series have text, not numbers
            self.strings.update(self.source.strings(selector))
        return Matrix.from_table(
            SeriesTable.from_fetch(result), result.timestamps, result.values, result.step_ms
        )

    def map(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        m, mapper, window, params = self._map_args(args, kwargs)
        return apply_mapper(m, mapper, window, params, check=self._check_time)

    def _map_args(
        self, args: list[Any], kwargs: dict[str, Any]
    ) -> tuple[Matrix, str, int | None, tuple[float, ...]]:
        """``map``'s matrix, mapper, window (ms) and parameters, checked."""
        _arity("map", args, 2, 5)
        _known("map", kwargs, set())
        m = _matrix(args[0], "map")
        mapper = _word(args[1], "map's function")
        rest = list(args[2:])
        window = None
        if mapper in MAPPERS and MAPPERS[mapper][0]:
            if not rest or not isinstance(rest[0], Duration):
                raise QueryTypeError(f"map({mapper}) needs a window, e.g. map({mapper}, 10m)")
            window = rest.pop(0).ms
            if mapper in TWO_POINT_MAPPERS and len(m) and window < 2 * m.step_ms:
                step = _duration_text(m.step_ms)
                self.warn(
                    f"map({mapper}, {_duration_text(window)}) over {step} buckets: a window of one bucket "
                    f"holds one value, and {mapper} needs two; use a window of at least "
                    f"{_duration_text(2 * m.step_ms)} (the range asked for picked {step} buckets)"
                )
        return m, mapper, window, tuple(_number(p, f"map({mapper})") for p in rest)

    def bucketize(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        _arity("bucketize", args, 3, 4)
        _known("bucketize", kwargs, set())
        m = _matrix(args[0], "bucketize")
        if not isinstance(args[1], Duration):
            raise QueryTypeError(f"bucketize takes a span like 15m, got {args[1]!r}")
        params = tuple(_number(p, "bucketize") for p in args[3:])
        return bucketize(m, args[1].ms, _word(args[2], "bucketize's aggregate"), params, self._check_time)

    def reduce(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        m, name, by, without, params = _reduce_args(args, kwargs)
        return reduce_matrix(m, name, by, without, params, check=self._check_time)

    def _fused(self, node: Call) -> Matrix | None:
        """``reduce(map(x, f, w), a, ...)`` in one pass (``query_dsl.reduce.reduce_windows``)
        when ``f`` is a prefix-sum window, ``a`` an aggregate it can reduce by blocks, and the
        map's answer is not wanted elsewhere (written again in the query, or a delegate's to
        take); else None, and the two calls run one after the other."""
        inner = node.args[0] if node.args else None
        if (
            self.delegate is not None
            or not isinstance(inner, Call)
            or inner.name != "map"
            or FUNCTIONS.get("map") is not _BUILT_IN["map"]
            or len(inner.args) != 3
            or not (isinstance(inner.args[1], Word) and inner.args[1].name in PREFIX_WINDOWS)
            or self._shared.key(inner) is not None
            or len(node.args) != 2
            or not (isinstance(node.args[1], Word) and node.args[1].name in FUSED_AGGREGATES)
        ):
            return None
        self._check_time()
        with _at(inner):
            m, mapper, window_ms, _ = self._map_args(
                [self._eval(arg) for arg in inner.args],
                {name: self._eval(value) for name, value in inner.kwargs},
            )
        if not len(m):
            return None
        with _at(node):
            _, name, by, without, _ = _reduce_args(
                [m, *(self._eval(arg) for arg in node.args[1:])],
                {key: self._eval(value) for key, value in node.kwargs},
            )
            window = min(window_buckets(window_ms, m.step_ms, mapper), len(m.timestamps))
            return reduce_windows(m, mapper, window, name, by, without, check=self._check_time)

    def histogram_quantile(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        _arity("histogram_quantile", args, 2, 2)
        _known("histogram_quantile", kwargs, set())
        m = _matrix(args[0], "histogram_quantile")
        return histogram_quantile(m, _number(args[1], "histogram_quantile"), check=self._check_time)

    def apply(self, args: list[Any], kwargs: dict[str, Any]) -> Value:
        _arity("apply", args, 3, 3)
        _known("apply", kwargs, {"on", "ignoring", "group", "bool"})
        op = _word(args[0], "apply's operator")
        as_bool = bool(kwargs["bool"]) if "bool" in kwargs else False
        return apply_op(
            op,
            args[1],
            args[2],
            on=_words(kwargs["on"], "on") if "on" in kwargs else None,
            ignoring=_words(kwargs["ignoring"], "ignoring") if "ignoring" in kwargs else None,
            group=_word(kwargs["group"], "group") if "group" in kwargs else None,
            as_bool=as_bool,
        )

    def filter(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        _arity("filter", args, 2, 2)
        _known("filter", kwargs, set())
        if not isinstance(args[1], str):
            raise QueryTypeError(f"filter takes a selector string, got {args[1]!r}")
        return filter_selector(_matrix(args[0], "filter"), args[1], check=self._check_time)

    def top(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        _arity("top", args, 2, 2)
        return top(_matrix(args[0], "top"), _count(args[1], "top's k"), largest=True)

    def bottom(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        _arity("bottom", args, 2, 2)
        return top(_matrix(args[0], "bottom"), _count(args[1], "bottom's k"), largest=False)

    def where_last(self, args: list[Any], kwargs: dict[str, Any]) -> Matrix:
        _arity("where_last", args, 3, 3)
        return where_last(
            _matrix(args[0], "where_last"),
            _word(args[1], "where_last's operator"),
            _number(args[2], "where_last's threshold"),
        )


def _some_row_empty(values: np.ndarray) -> bool:
    """Whether a row of ``values`` is all NaN (only the rows whose last value is NaN are
    read whole: a fetch's last column is contiguous, and few series lack it)."""
    if not values.size:
        return False
    candidates = np.flatnonzero(np.isnan(values[:, -1]))
    return bool(len(candidates)) and bool(np.isnan(values[candidates]).all(axis=1).any())


@contextmanager
def _at(node: Call) -> Iterator[None]:
    """A type error raised inside names the call and where it is written."""
    try:
        yield
    except QueryTypeError as exc:
        raise QueryTypeError(f"{node.name}(...) at line {node.line}, column {node.column}: {exc}") from None


def _reduce_args(
    args: list[Any], kwargs: dict[str, Any]
) -> tuple[Matrix, str, list[str] | None, list[str] | None, tuple[float, ...]]:
    """``reduce``'s matrix, aggregate, ``by``, ``without`` and parameters, checked."""
    _arity("reduce", args, 2, 3)
    _known("reduce", kwargs, {"by", "without"})
    m = _matrix(args[0], "reduce")
    by = _words(kwargs["by"], "by") if "by" in kwargs else None
    without = _words(kwargs["without"], "without") if "without" in kwargs else None
    params = tuple(_number(p, "reduce") for p in args[2:])
    return m, _word(args[1], "reduce's aggregate"), by, without, params


def _duration_text(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _arity(name: str, args: list[Any], low: int, high: int) -> None:
    if not low <= len(args) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise QueryTypeError(f"{name} takes {expected} positional arguments, got {len(args)}")


def _known(name: str, kwargs: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(kwargs) - allowed
    if unknown:
        raise QueryTypeError(
            f"{name} has no argument {', '.join(sorted(unknown))}"
            + (f" (it takes {', '.join(sorted(allowed))})" if allowed else "")
        )


FUNCTIONS: dict[str, Callable[[Evaluator, list[Any], dict[str, Any]], Any]] = {
    "fetch": Evaluator.fetch,
    "map": Evaluator.map,
    "bucketize": Evaluator.bucketize,
    "reduce": Evaluator.reduce,
    "histogram_quantile": Evaluator.histogram_quantile,
    "apply": Evaluator.apply,
    "filter": Evaluator.filter,
    "top": Evaluator.top,
    "bottom": Evaluator.bottom,
    "where_last": Evaluator.where_last,
}
# the functions above, pure: a call written twice in one query is evaluated once
# (:mod:`query_dsl.shared_calls`); a function registered later is called every time
_BUILT_IN = dict(FUNCTIONS)
_PURE = frozenset(_BUILT_IN)
