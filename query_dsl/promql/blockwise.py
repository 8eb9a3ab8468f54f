"""What the engine computes a block of series at a time. Aggregations: ``sum by (...)
(rate(x[5m]))`` and its kin (a range function of ``ranges.VECTORIZED``), and ``avg by (...)
(x)`` over an instant selector, for the operators of ``aggregation.FUSED_OPS`` without a
parameter: each block reduced before the next is computed (``aggregation.aggregate_blocks``).
Instant selectors: each block's reading written into the answer before the next is read.

From a store of this process, each block is fetched before the next too
(:func:`~query_dsl.promql.selection.fetch_blocks`): a query over a million series then holds
a few tens of MB of samples at a time, not arrays of hundreds of MB that the C library maps
afresh for each query and the kernel faults in again, page by page (at a million series
that, not the arithmetic, was most of the time of these queries).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from query_dsl.matrix import Matrix
from query_dsl.promql import aggregation
from query_dsl.promql.ast import Aggregation, Call, Expr, MatrixSelector, Paren, VectorSelector
from query_dsl.promql.instant import LOOKBACK_MS, latest_at
from query_dsl.promql.labels import ensure_unique
from query_dsl.promql.ranges import VECTORIZED, evaluate_range, rate_blocks
from query_dsl.promql.selection import Samples, fetch_blocks
from query_dsl.promql.values import RangeValue, is_nan_value
from query_dsl.series_table import SeriesTable

if TYPE_CHECKING:
    from query_dsl.promql.engine import Engine

__all__ = ["fused_aggregate", "instant_by_blocks"]


# a block of a selector's series x buckets read at once: 8 MiB a float64 array, under glibc's
# 32 MiB ceiling past which an allocation is a mapping of its own (unmapped when freed and
# faulted in again by the next query), and small enough that the passes over a block (the
# read's copy, the NaN scan, the pick, the reduction) find it in a 32 MiB L3 cache with its
# sample times: a million series' gauge span, topk and count 4-8% faster than at 16 MiB
_FETCH_BLOCK_CELLS = 1 << 20


class _NanSample(Exception):
    """A block holds a NaN sample: a sum over it is NaN, which the block reduce cannot say."""


def _bare(expr: Expr) -> Expr:
    while isinstance(expr, Paren):
        expr = expr.expr
    return expr


def fused_aggregate(engine: Engine, expr: Aggregation, times: np.ndarray) -> Matrix | None:
    """``expr`` computed by blocks of series when it is one of the module doc's; else None
    (the engine's general way). A range function's series must share one name (so that
    dropping it leaves their label sets distinct, as Prometheus's check of a function's
    answer requires)."""
    if expr.param is not None or expr.op not in aggregation.FUSED_OPS:
        return None
    inner = _bare(expr.expr)
    step = int(times[1] - times[0]) if len(times) > 1 else engine.step_ms
    if isinstance(inner, VectorSelector):
        return _instant(engine, expr, inner, times, step)
    if not (isinstance(inner, Call) and inner.name in VECTORIZED):
        return None
    engine.check()
    arg = _bare(inner.args[0])
    if isinstance(arg, MatrixSelector):
        ends = engine.moved(times, arg.vector.at, arg.vector.offset_ms)
        found = None
        if not engine.shared(arg.vector):
            found = read_blocks(engine, arg.vector, int(ends.min()) - arg.range_ms, int(ends.max()))
        if found is not None and _one_name(found[0].names.codes):
            table, width, blocks = found
            engine.need_range_of(inner.name, len(table), width, len(times))
            rates = (
                (first + start, part)
                for first, samples in blocks
                for start, part in rate_blocks(inner.name, samples, ends, arg.range_ms, engine.check)
            )
            return aggregation.aggregate_blocks(expr, table.with_name(""), times, step, rates)
    window = engine.window(inner.args[0], times, trim=False)
    assert isinstance(window, RangeValue)  # the parser checked the types
    samples = window.samples
    engine.need_range(inner.name, samples, len(times))
    table = samples.table.with_name("")
    if not _one_name(samples.table.names.codes):  # label sets may clash: the two steps
        values = evaluate_range(
            inner.name, samples, window.ends, window.range_ms, np.zeros((0, len(times))), engine.check
        )
        value = Matrix.from_table(table, times, values, step)
        ensure_unique(value)
        return aggregation.aggregate(expr, value, None)
    whole = rate_blocks(inner.name, samples, window.ends, window.range_ms, engine.check)
    return aggregation.aggregate_blocks(expr, table, times, step, whole)


def _one_name(codes: np.ndarray) -> bool:
    return not len(codes) or bool((codes == codes[0]).all())


def _instant(
    engine: Engine, expr: Aggregation, selector: VectorSelector, times: np.ndarray, step: int
) -> Matrix | None:
    """An aggregation of an instant selector by blocks of series fetched one after another;
    None where the selector's samples do not come by blocks, or a block holds a NaN sample."""
    if engine.shared(selector):
        return None
    at = engine.moved(times, selector.at, selector.offset_ms)
    found = read_blocks(engine, selector, int(at[0]) - LOOKBACK_MS, int(at[-1]))
    if found is None:
        return None
    table, width, blocks = found

    def values(blocks: Iterator[tuple[int, Samples]]) -> Iterator[tuple[int, np.ndarray]]:
        for first, samples in blocks:
            if not first:  # one block's reading at a time
                engine.need_instant(len(samples.values), width, len(times))
            out, _ = latest_at(samples, at, LOOKBACK_MS, False, view=True)  # reduced, not kept
            if _holds_nan_sample(samples, out):
                raise _NanSample
            yield first, out

    try:
        return aggregation.aggregate_blocks(expr, table, times, step, values(blocks))
    except _NanSample:
        return None


def _holds_nan_sample(samples: Samples, out: np.ndarray) -> bool:
    """Whether ``out``, read from ``samples``, may hold a NaN sample: looked for among the
    samples' NaN cells where they are known (a few columns: the buckets before the data),
    else in ``out``."""
    if samples.full:
        return False
    if samples.gaps is not None:
        return bool(is_nan_value(samples.values[:, samples.gaps]).any())
    return bool(is_nan_value(out).any())


def instant_by_blocks(
    engine: Engine, selector: VectorSelector, at: np.ndarray, with_times: bool
) -> tuple[SeriesTable, np.ndarray, np.ndarray | None] | None:
    """An instant selector's reading at ``at`` (``engine``'s ``_instant``: its table, values
    ``[series, at]`` and, ``with_times``, its samples' times), a block of series at a time;
    None where the samples do not come by blocks."""
    found = read_blocks(engine, selector, int(at[0]) - LOOKBACK_MS, int(at[-1]))
    if found is None:
        return None
    table, width, blocks = found
    engine.need(len(table) * len(at), 1 + with_times, f"a selector's {len(table)} series at {len(at)} times")
    out: np.ndarray | None = None
    when = np.empty((len(table), len(at))) if with_times else None
    for first, samples in blocks:
        if not first:  # one block's reading at a time
            engine.need_instant(len(samples.values), width, len(at))
        part, part_when = latest_at(samples, at, LOOKBACK_MS, with_times)
        if when is None and len(part) == len(table):  # one block: its answer (new) is the whole
            return table, part, None
        if out is None:
            out = np.empty((len(table), len(at)))
        out[first : first + len(part)] = part
        if when is not None and part_when is not None:
            when[first : first + len(part)] = part_when
    return table, np.empty((0, len(at))) if out is None else out, when


def read_blocks(
    engine: Engine, selector: VectorSelector, low_ms: int, high_ms: int
) -> tuple[SeriesTable, int, Iterator[tuple[int, Samples]]] | None:
    """A selector's untrimmed samples a block of series at a time
    (:func:`~query_dsl.promql.selection.fetch_blocks`: the table, the buckets, the blocks),
    the engine's limits checked and two blocks' samples charged (the one read and the one
    reduced); None where the source answers every series at once."""
    found = fetch_blocks(engine.source, selector, low_ms, high_ms, _FETCH_BLOCK_CELLS, trim=False)
    if found is None:
        return None
    table, width, blocks = found
    engine.within_limits(len(table), len(table) * width)
    cells = min(len(table) * width, _FETCH_BLOCK_CELLS)
    engine.need_samples(2 * cells, f"a block of the {len(table)} series a selector picks")

    def read() -> Iterator[tuple[int, Samples]]:
        for first, samples in blocks:
            engine.check()
            engine.take_in(samples)
            yield first, samples

    return table, width, read()
