"""The PromQL evaluator: walks a syntax tree over the evaluation times of a query (one for
an instant query, ``start, start + step, ... end`` for a range query), every instant vector
a :class:`~query_dsl.matrix.Matrix` on those times, as the DSL's values are.

Selectors read through the same :class:`~query_dsl.sources.DataSource` as the DSL. An
instant selector answers, at each time ``t``, each series' latest sample in
``[t - 5m, t]`` (the lookback), none if that sample is a stale marker (the series
ended); ``offset`` moves ``t`` back, ``@`` pins it. A range
selector gives each window ``[t - range, t]`` to a function of :mod:`.ranges`; a subquery
evaluates its expression at the multiples of its step and gives those points the same way.

Limits (:class:`query_dsl.Limits`): series and points per selector, and wall time, checked
between steps and inside the loops over evaluation times: a :class:`QueryLimitError`. Memory:
each step charges the query's :class:`~query_dsl.QueryBudget` with its estimate (its
value and its temporaries, from its input's series and the evaluation times) before it
allocates, and keeps only its value's bytes when it ends (:mod:`query_dsl.budget`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from query_dsl.budget import QueryBudget
from query_dsl.evaluator import Limits
from query_dsl.exceptions import QueryLimitError, QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.promql import aggregation, binary, folding
from query_dsl.promql.ast import (
    Aggregation,
    BinaryOp,
    Call,
    Expr,
    LabelMatcher,
    MatrixSelector,
    NumberLiteral,
    Paren,
    StringLiteral,
    Subquery,
    Unary,
    VectorSelector,
    repeated_selectors,
)
from query_dsl.promql.blockwise import fused_aggregate, instant_by_blocks
from query_dsl.promql.functions import INSTANT_FUNCTIONS
from query_dsl.promql.instant import LOOKBACK_MS, latest_at
from query_dsl.promql.labels import absent_table, ensure_unique
from query_dsl.promql.ranges import (
    RANGE_NAMES,
    VECTORIZED,
    block_series,
    evaluate_range,
    range_temporaries,
)
from query_dsl.promql.selection import (
    Samples,
    coarse_warning,
    fetch_samples,
    reads_sample_times,
)
from query_dsl.promql.values import RangeValue, Scalar, String, Value, absent, present, stored_nan_samples
from query_dsl.series_table import SeriesTable
from query_dsl.sources import DataSource

__all__ = ["DEFAULT_SUBQUERY_STEP_MS", "LOOKBACK_MS", "Engine"]

DEFAULT_SUBQUERY_STEP_MS = 60_000

# What a step allocates, in float64 cells of its input's [series, times] (measured against
# tracemalloc by tests/query_dsl/test_budget.py): its value and the temporaries numpy makes.
_CELL = 8
_INSTANT_CELLS = 9  # a selector's value at each time: latest, picked, when, ok, ... per cell
_RATE_CELLS = 24  # rate & co by blocks: the block's windows' first, last, times, counts
_ELEMENTWISE_CELLS = 4  # an instant function or an operator: value, masks and the answer
_AGGREGATE_CELLS = 4  # a reduce: sorted copies and the classes' sums (count_values charges its own)
_TOPK_CELLS = 6  # topk/bottomk: keys, two argsorts, the mask and the answer
_SAMPLE_CELLS = 3  # a fetch's samples: values, own times, stale marks


def _value_bytes(value: Value) -> int:
    """What a step's value holds on to."""
    if isinstance(value, Matrix | Scalar):
        return int(value.values.nbytes)
    if isinstance(value, RangeValue):
        samples = value.samples
        extra = sum(a.nbytes for a in (samples.exact, samples.stale) if a is not None)
        return int(samples.values.nbytes + samples.times.nbytes + extra)
    return 0


@dataclass
class Engine:
    """Evaluates expressions at ``times`` (epoch ms); ``start_ms``/``end_ms`` are what
    ``@ start()`` and ``@ end()`` mean."""

    source: DataSource
    start_ms: int
    end_ms: int
    step_ms: int
    limits: Limits = field(default_factory=Limits)
    warnings: list[str] = field(default_factory=list)
    budget: QueryBudget | None = None  # the query's; None: one of limits.max_bytes
    _deadline: float = 0.0
    _times: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    _spend: QueryBudget = field(init=False)
    # selectors written more than once and what each read: both sides of a share, one fetch
    _repeated: set[tuple[LabelMatcher, ...]] = field(default_factory=set)
    _fetched: dict[tuple[object, ...], Samples] = field(default_factory=dict)
    # an instant selector's readings (its table, values, sample times), kept for another reader
    _instants: dict[tuple[object, ...], tuple[SeriesTable, np.ndarray, np.ndarray | None]] = field(
        default_factory=dict
    )
    _held: int = 0  # the bytes of the fetches kept for another reader, charged until the end

    def __post_init__(self) -> None:
        self._spend = self.budget if self.budget is not None else QueryBudget(self.limits.max_bytes)

    def need(self, cells: int, per_cell: float, what: str) -> None:
        """Charge the budget for ``cells`` cells of ``per_cell`` float64s each, before they are made."""
        self._spend.need(int(cells * per_cell * _CELL), what)

    def evaluate(self, expr: Expr, repeated: frozenset[tuple[LabelMatcher, ...]] | None = None) -> Value:
        """``expr``'s value; ``repeated`` is :func:`repeated_selectors` of it, when known."""
        self._deadline = time.monotonic() + self.limits.timeout_s
        times = np.arange(self.start_ms, self.end_ms + 1, max(self.step_ms, 1), dtype=np.int64)
        self._times = times
        self._repeated.update(repeated_selectors(expr) if repeated is None else repeated)
        return self._eval(expr, times)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def check(self) -> None:
        if time.monotonic() > self._deadline:
            raise QueryLimitError(
                f"query timed out in expression evaluation (after {self.limits.timeout_s:g} s)"
            )

    # -- the walk ----------------------------------------------------------------------------

    def _eval(self, expr: Expr, times: np.ndarray) -> Value:
        """``expr``'s value; what its steps charged the budget, less that value, given back."""
        mark, held = self._spend.used, self._held
        value = self._node(expr, times)
        kept = _value_bytes(value) + self._held - held
        self._spend.settle(mark, kept, f"the value of {type(expr).__name__}")
        return value

    def _node(self, expr: Expr, times: np.ndarray) -> Value:
        self.check()
        if isinstance(expr, NumberLiteral):
            return Scalar(np.full(len(times), expr.value))
        if isinstance(expr, StringLiteral):
            return String(expr.value)
        if isinstance(expr, Paren):
            return self._eval(expr.expr, times)
        if isinstance(expr, Unary):
            value = self._eval(expr.expr, times)
            if isinstance(value, Scalar):
                return Scalar(-value.values)
            assert isinstance(value, Matrix)  # the parser checked the types
            self.need(value.values.size, 2, "a unary minus")
            negated = Matrix.from_table(
                value.table.with_name(""), value.timestamps, -value.values, value.step_ms
            )
            ensure_unique(negated)
            return negated
        if isinstance(expr, VectorSelector):
            return self._instant(expr, times, with_times=False)[0]
        if isinstance(expr, MatrixSelector):
            ends = self.moved(times, expr.vector.at, expr.vector.offset_ms)
            samples = self._fetch(expr.vector, int(ends.min()) - expr.range_ms, int(ends.max()))
            return RangeValue(samples, expr.range_ms, ends)
        if isinstance(expr, Subquery):
            return self._subquery(expr, times)
        if isinstance(expr, Call):
            called = self._call(expr, times)
            if isinstance(called, Matrix):
                ensure_unique(called)
            return called
        if isinstance(expr, Aggregation):
            return self._aggregate(expr, times)
        if isinstance(expr, BinaryOp):
            if folding.constant(expr):
                return folding.folded(expr, times, lambda: self._binary(expr, times))
            return self._binary(expr, times)
        raise QueryTypeError(f"cannot evaluate {expr!r}")

    def moved(self, times: np.ndarray, at: int | str | None, offset_ms: int) -> np.ndarray:
        """The times a selector reads at: pinned by ``@``, moved back by ``offset``."""
        if at == "start":
            base = np.full(len(times), self.start_ms, dtype=np.int64)
        elif at == "end":
            base = np.full(len(times), self.end_ms, dtype=np.int64)
        elif isinstance(at, int):
            base = np.full(len(times), at, dtype=np.int64)
        else:
            base = times
        return base - offset_ms

    def _fetch(self, selector: VectorSelector, low_ms: int, high_ms: int, trim: bool = True) -> Samples:
        key = (selector.matchers, low_ms, high_ms, trim)
        if key in self._fetched:
            return self._fetched[key]
        trimmed = (selector.matchers, low_ms, high_ms, True)
        if trimmed in self._fetched:  # what a range selector of the same span read serves an instant one too
            return self._fetched[trimmed]
        samples = fetch_samples(self.source, selector, low_ms, high_ms, trim=trim)
        self.need_samples(samples.values.size, f"the {len(samples.table)} series a selector picks")
        self.take_in(samples)
        self.within_limits(len(samples.table), samples.values.size)
        if selector.matchers in self._repeated:
            self._fetched[key] = samples
            self._held += _value_bytes(RangeValue(samples, 0, self._times))
        return samples

    def need_samples(self, cells: int, what: str) -> None:
        """Charge a fetch of ``cells`` samples."""
        self.need(cells, _SAMPLE_CELLS, what)

    def take_in(self, samples: Samples) -> None:
        """What a fetch's samples say: NaN samples marked, warnings of coarser rings."""
        if not samples.full:
            samples.values = stored_nan_samples(samples.values, samples.gaps)
        if samples.exact is None and reads_sample_times(self.source) and len(samples.table):
            self.warn(
                f"read VHMS's {samples.step_ms // 1000} s ring (the shards' finest rings differ): "
                "its samples are at their buckets' starts"
            )
        if len(samples.table):
            for span in samples.coarse:
                self.warn(coarse_warning(span, samples.step_ms))

    def within_limits(self, series: int, points: int) -> None:
        if series > self.limits.max_series:
            raise QueryLimitError(
                f"the selector picks {series} series, more than max_series={self.limits.max_series}"
            )
        steps = len(self._times)
        if max(points, series * steps) > self.limits.max_points:
            raise QueryLimitError(
                f"the selector reads {points} points for {steps} evaluation times, "
                f"more than max_points={self.limits.max_points}"
            )

    def shared(self, selector: VectorSelector) -> bool:
        """Whether ``selector`` is written more than once (one fetch, kept for every reader)."""
        return bool(self._repeated) and selector.matchers in self._repeated

    def need_instant(self, series: int, width: int, steps: int) -> None:
        """Charge an instant selector's reading of ``series`` series of ``width`` buckets."""
        what = f"a selector's {series} series at {steps} evaluation times"
        self.need(series * (steps * _INSTANT_CELLS + width), 1, what)

    def _instant(
        self, selector: VectorSelector, times: np.ndarray, with_times: bool = True
    ) -> tuple[Matrix, np.ndarray | None]:
        """The selector's values at ``times`` and the time of each value's sample (ms; may be
        None without ``with_times``)."""
        at = self.moved(times, selector.at, selector.offset_ms)
        step = int(times[1] - times[0]) if len(times) > 1 else self.step_ms
        low_ms, high_ms = int(at[0]) - LOOKBACK_MS, int(at[-1])
        key = (selector.matchers, at.tobytes(), with_times)
        # a query that reads each selector once keeps nothing: no lookup (a key's hash) then
        found = self._instants.get(key) if self._instants else None
        if found is None and not (
            self._fetched
            and any((selector.matchers, low_ms, high_ms, trim) in self._fetched for trim in (True, False))
        ):
            found = instant_by_blocks(self, selector, at, with_times)
        if found is None:
            # untrimmed: a sample before the lookback or after the time is never the one picked;
            # the times ascend (or are one, pinned by @)
            samples = self._fetch(selector, low_ms, high_ms, trim=False)
            self.need_instant(len(samples.values), samples.values.shape[1], len(times))
            out, when = latest_at(samples, at, LOOKBACK_MS, with_times)
            found = samples.table, out, when
        elif self.shared(selector) and key not in self._instants:
            self._instants[key] = found
            self._held += sum(part.nbytes for part in found[1:] if part is not None)
        return Matrix.from_table(found[0], times, found[1], step), found[2]

    def window(self, expr: Expr, times: np.ndarray, trim: bool) -> Value:
        """A range function's argument; a range selector untrimmed for a function that reads
        each window's edge rows by their samples' own times (``ranges.VECTORIZED``)."""
        inner = expr
        while isinstance(inner, Paren):
            inner = inner.expr
        if trim or not isinstance(inner, MatrixSelector):
            return self._eval(expr, times)
        ends = self.moved(times, inner.vector.at, inner.vector.offset_ms)
        samples = self._fetch(inner.vector, int(ends.min()) - inner.range_ms, int(ends.max()), trim=False)
        return RangeValue(samples, inner.range_ms, ends)

    def _subquery(self, expr: Subquery, times: np.ndarray) -> RangeValue:
        ends = self.moved(times, expr.at, expr.offset_ms)
        step = expr.step_ms or DEFAULT_SUBQUERY_STEP_MS
        first = -(-(int(ends.min()) - expr.range_ms) // step) * step
        last = int(ends.max())
        count = (last - first) // step + 1 if last >= first else 0
        if count * max(len(times), 1) > self.limits.max_points or count > 11_000 * 100:
            raise QueryLimitError(
                f"the subquery [{expr.range_ms} ms:{step} ms] needs {count} evaluation steps: "
                "more than the limits allow"
            )
        grid = np.arange(first, first + count * step, step, dtype=np.int64)
        if not len(grid):
            empty = SeriesTable.from_lists([], [])
            return RangeValue(Samples(empty, grid, np.zeros((0, 0)), step), expr.range_ms, ends)
        inner = self._eval(expr.expr, grid)
        assert isinstance(inner, Matrix)  # the parser checked the types
        return RangeValue(Samples(inner.table, grid, inner.values, step), expr.range_ms, ends)

    def _call(self, expr: Call, times: np.ndarray) -> Value:
        name = expr.name
        if name == "timestamp":
            return self._timestamp(expr, times)
        if name in ("absent", "absent_over_time"):
            return self._absent(expr, times)
        if name in RANGE_NAMES:
            matrix_index = 1 if name == "quantile_over_time" else 0
            scalars = [self._eval(arg, times) for i, arg in enumerate(expr.args) if i != matrix_index]
            params = np.array([s.values for s in scalars if isinstance(s, Scalar)]).reshape(
                len(scalars), len(times)
            )
            window = self.window(expr.args[matrix_index], times, trim=name not in VECTORIZED)
            assert isinstance(window, RangeValue)  # the parser checked the types
            samples = window.samples
            self.need_range(name, samples, len(times))
            values = evaluate_range(name, samples, window.ends, window.range_ms, params, self.check)
            table = samples.table if name == "last_over_time" else samples.table.with_name("")
            step = int(times[1] - times[0]) if len(times) > 1 else self.step_ms
            return Matrix.from_table(table, times, values, step)
        function = INSTANT_FUNCTIONS.get(name)
        if function is None:
            raise QueryTypeError(f"function {name}() is not supported by Artimon's PromQL engine")
        args = [self._eval(arg, times) for arg in expr.args]
        cells = max((arg.values.size for arg in args if isinstance(arg, Matrix)), default=len(times))
        self.need(cells, _ELEMENTWISE_CELLS, f"{name}() over {cells:,} points")
        return function(args, times)

    def need_range(self, name: str, samples: Samples, steps: int) -> None:
        """:meth:`need_range_of` ``samples``."""
        series, width = samples.values.shape if samples.values.ndim == 2 else (0, 0)
        self.need_range_of(name, series, width, steps)

    def need_range_of(self, name: str, series: int, width: int, steps: int) -> None:
        """Charge what ``name`` over ``series`` series of ``width`` buckets at ``steps``
        evaluation times makes: its answer, and its temporaries (by blocks of series for
        rate & co, by windows else)."""
        if name in VECTORIZED:
            block = min(series, block_series(steps))
            temporaries = block * (steps + width) * _RATE_CELLS
        else:  # the answer, and each call's stacked windows and their answer
            temporaries = series * steps + range_temporaries(series, width, steps)
        what = f"{name}() over {series:,} series x {steps:,} evaluation times"
        self.need(series * steps + temporaries, 1, what)

    def _timestamp(self, expr: Call, times: np.ndarray) -> Value:
        arg = expr.args[0]
        while isinstance(arg, Paren):
            arg = arg.expr
        if isinstance(arg, VectorSelector):
            m, when = self._instant(arg, times)
            assert when is not None  # asked with_times
            return Matrix.from_table(m.table.with_name(""), times, when / 1000.0, m.step_ms)
        value = self._eval(arg, times)
        assert isinstance(value, Matrix)  # the parser checked the types
        stamps = np.where(absent(value.values), np.nan, times[None, :] / 1000.0)
        return Matrix.from_table(value.table.with_name(""), times, stamps, value.step_ms)

    def _absent(self, expr: Call, times: np.ndarray) -> Value:
        value = self._eval(expr.args[0], times)
        if isinstance(value, RangeValue):
            samples = value.samples
            self.need_range("count_over_time", samples, len(times))
            counts = evaluate_range(
                "count_over_time",
                samples,
                value.ends,
                value.range_ms,
                np.zeros((0, len(times))),
                self.check,
            )
            found = (~np.isnan(counts)).any(axis=0)
        else:
            assert isinstance(value, Matrix)  # the parser checked the types
            found = present(value.values).any(axis=0)
        step = int(times[1] - times[0]) if len(times) > 1 else self.step_ms
        return Matrix.from_table(
            absent_table(expr.args[0]), times, np.where(found, np.nan, 1.0)[None, :], step
        )

    def _aggregate(self, expr: Aggregation, times: np.ndarray) -> Value:
        fused = fused_aggregate(self, expr, times)
        if fused is not None:
            return fused
        param: np.ndarray | str | None = None
        if expr.param is not None:
            evaluated = self._eval(expr.param, times)
            param = evaluated.value if isinstance(evaluated, String) else evaluated.values  # type: ignore[union-attr]
        value = self._eval(expr.expr, times)
        assert isinstance(value, Matrix)  # the parser checked the types
        per_cell = {"topk": _TOPK_CELLS, "bottomk": _TOPK_CELLS, "count_values": 1}.get(
            expr.op, _AGGREGATE_CELLS
        )
        self.need(value.values.size, per_cell, f"{expr.op} over {len(value):,} series x {len(times):,} times")
        return aggregation.aggregate(expr, value, param, self._spend.need)

    def _binary(self, expr: BinaryOp, times: np.ndarray) -> Value:
        left, right = self._eval(expr.lhs, times), self._eval(expr.rhs, times)
        cells = sum(side.values.size for side in (left, right) if isinstance(side, Matrix))
        self.need(cells, _ELEMENTWISE_CELLS, f"operator {expr.op} over {cells:,} points")
        if isinstance(left, Scalar) and isinstance(right, Scalar):
            return Scalar(binary.scalar_op(expr.op, left.values, right.values, expr.return_bool))
        if isinstance(left, Matrix) and isinstance(right, Scalar):
            return binary.vector_scalar_op(expr.op, left, right, expr.return_bool, scalar_left=False)
        if isinstance(left, Scalar) and isinstance(right, Matrix):
            return binary.vector_scalar_op(expr.op, right, left, expr.return_bool, scalar_left=True)
        assert isinstance(left, Matrix) and isinstance(right, Matrix) and expr.matching is not None
        return binary.vector_op(expr.op, left, right, expr.matching, expr.return_bool)
