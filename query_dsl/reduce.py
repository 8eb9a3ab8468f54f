"""``reduce``: one series per equivalence class, aggregating its members at each instant.

Classes: ``by=[l1, l2]`` groups series by the values of those labels (a missing label is
its own value, "absent"); ``without=[l]`` by every label but those; neither: one class of
all series (WarpScript's ``[]``, PromQL's ``sum(x)``). The result keeps the labels that
every member shares with the same value, and the name the members share ("" otherwise).
Classes come in the order of their first member.

Classes are computed on the label codes of the matrix's series table; ``sum``, ``mean``,
``count``, ``min`` and ``max`` reduce runs of consecutive members at once (no copy of the
matrix when members are already adjacent, as a store's index order often makes them); the
others aggregate one class at a time, checking the query's deadline as they go.

``reduce(map(x, f, w), a)`` with a prefix-sum window ``f`` (``query_dsl/windows.py``) and one
of those five aggregates runs fused (:func:`reduce_windows`): the window is computed for a
block of series into one reused buffer and reduced into per-class sums (or minima, maxima)
before the next block, so no series x instants matrix is made beyond the fetch's (at a
million series x 71 instants that matrix is 568 MB, and faulting its fresh pages in cost
more than the arithmetic).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from query_dsl.aggregates import aggregate, check_aggregate
from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.series_table import SeriesTable, class_order, remembered
from query_dsl.windows import PREFIX_WINDOWS

__all__ = ["FUSED_AGGREGATES", "reduce_blocks", "reduce_matrix", "reduce_windows"]

_BLOCK_CELLS = 1 << 20  # cells of one block of a fused window and reduce: 8 MB of float64
# a grouping of this many series or fewer keeps its table's runs (what a small query's
# reduction would find each time); a larger table's block is one of many: found per block
_RUNS_KEPT = 1 << 12
_GROUPINGS_SERIES = 1 << 19  # groupings remembered per table: this many series' worth (a table of
# 65,536 series: 8 of them, 1 MiB each), at most 256 (a small table's: a dashboard's every ``by``)


@dataclass(frozen=True)
class _Grouping:
    """How a table's series fall into classes for a ``by``/``without``: each series' class,
    their count, the series in class order and where each class begins, and the table of
    one row per class (:meth:`SeriesTable.shared`). Made once per table and grouping (a
    selector's table is reused while it picks the same series: a dashboard's ``sum by``
    finds its classes and its answer's rows, their order and label texts, made); shared, its
    arrays read-only."""

    classes: np.ndarray
    count: int
    order: np.ndarray
    starts: np.ndarray
    table: SeriesTable
    runs: _Runs | None  # the whole table's runs of its classes (None: not kept, _RUNS_KEPT)


class _Runs(NamedTuple):
    """How a block's rows fall into runs of one class (:func:`_class_runs`): where each run
    starts, the runs in class order, the classes present (ascending), where each of them
    begins among the ordered runs (None: a run each) and their sizes in rows."""

    starts: np.ndarray
    order: np.ndarray
    present: np.ndarray
    first: np.ndarray | None
    sizes: np.ndarray


def _grouping(table: SeriesTable, by: list[str] | None, without: list[str] | None) -> _Grouping:
    if by is not None and without is not None:
        raise QueryTypeError("reduce takes by= or without=, not both")
    key = (None if by is None else tuple(by), None if without is None else tuple(without))
    return remembered(
        table, "reduce_groupings", key, _GROUPINGS_SERIES, lambda: _make_grouping(table, by, without)
    )


def _make_grouping(table: SeriesTable, by: list[str] | None, without: list[str] | None) -> _Grouping:
    if by is not None:
        classes, first = table.groups(by)
    elif without is not None:
        classes, first = table.groups([label for label in table.columns if label not in without])
    else:
        classes, first = (
            np.zeros(len(table), dtype=np.int64),
            np.zeros(1 if len(table) else 0, dtype=np.int64),
        )
    order, starts = class_order(classes, len(first))
    for array in (classes, order, starts):
        array.setflags(write=False)
    runs = _runs_of(classes, len(first)) if 0 < len(classes) <= _RUNS_KEPT else None
    for kept in runs or ():
        if kept is not None:
            kept.setflags(write=False)
    return _Grouping(classes, len(first), order, starts, table.shared(order, starts), runs)


def _by_runs(ufunc: np.ufunc, values: np.ndarray, classes: np.ndarray, count: int) -> np.ndarray:
    """``ufunc`` over the rows of each class: first over runs of consecutive rows of one
    class, then over each class's runs."""
    starts = np.flatnonzero(np.concatenate([[True], classes[1:] != classes[:-1]]))
    partial = ufunc.reduceat(values, starts, axis=0)
    run_class = classes[starts]
    if len(starts) == count:  # each class is one run
        out = np.empty((count, values.shape[1]))
        out[run_class] = partial
        return out
    order = np.argsort(run_class, kind="stable")
    return ufunc.reduceat(partial[order], np.searchsorted(run_class[order], np.arange(count)), axis=0)


def _fast(name: str, values: np.ndarray, classes: np.ndarray, count: int) -> np.ndarray:
    """``sum``, ``mean``, ``count``, ``min``, ``max`` per class, NaN skipped (all-NaN: NaN).

    The sums run over every instant at once; a class's sum is NaN only at the instants
    where a member has no value (or sums opposite infinities), and only those instants are
    summed again skipping the gaps, with their counts: a range whose first instants are
    empty (a window not yet full, a series that began later) costs a few columns more,
    not a second pass over the matrix."""
    if name in ("min", "max"):
        return _by_runs(np.fmin if name == "min" else np.fmax, values, classes, count)
    total = _by_runs(np.add, values, classes, count)
    seen = np.repeat(
        np.bincount(classes, minlength=count).astype(np.float64)[:, None], total.shape[1], axis=1
    )
    gappy = np.flatnonzero(np.isnan(total).any(axis=0))
    if len(gappy):
        part = values[:, gappy]
        missing = np.isnan(part)
        seen[:, gappy] = _by_runs(np.add, (~missing).astype(np.float64), classes, count)
        total[:, gappy] = _by_runs(np.add, np.where(missing, 0.0, part), classes, count)
    if name == "count":
        return seen
    result = total / seen if name == "mean" else total
    return np.where(seen > 0, result, np.nan)


_FAST = ("sum", "mean", "count", "min", "max")
FUSED_AGGREGATES = frozenset(_FAST)
_CHECK_EVERY = 64  # classes aggregated one by one between two checks of the deadline


def reduce_matrix(
    m: Matrix,
    name: str,
    by: list[str] | None = None,
    without: list[str] | None = None,
    params: tuple[float, ...] = (),
    check: Callable[[], None] | None = None,
) -> Matrix:
    """``m`` reduced by ``name`` per class; ``check`` is called between classes when they
    are aggregated one by one (the evaluator's deadline: whatever it raises stops them)."""
    check_aggregate(name, params)
    grouping = _grouping(m.table, by, without)
    classes, count, order, starts = grouping.classes, grouping.count, grouping.order, grouping.starts
    if not count:
        values = np.zeros((0, len(m.timestamps)))
    elif name in _FAST and not params:
        with np.errstate(all="ignore"):  # inf - inf is NaN, as nansum makes it
            values = _fast(name, m.values, classes, count)
    else:
        bounds = [*starts.tolist(), len(m)]
        rows = []
        for i in range(count):
            if check is not None and not i % _CHECK_EVERY:
                check()
            rows.append(aggregate(name, m.values[order[bounds[i] : bounds[i + 1]]], 0, params))
        values = np.vstack(rows)
    return Matrix.from_table(grouping.table, m.timestamps, values, m.step_ms)


def _runs_of(classes: np.ndarray, count: int) -> _Runs:
    """The runs of ``classes`` (a block's rows' classes, not empty) among ``count``."""
    starts = np.flatnonzero(np.concatenate([[True], classes[1:] != classes[:-1]]))
    run_class = classes[starts]
    order = np.argsort(run_class, kind="stable")
    ordered = run_class[order]
    first = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    present = ordered if len(first) == len(starts) else ordered[first]
    sizes = np.bincount(classes, minlength=count)[present].astype(np.float64)
    return _Runs(starts, order, present, None if len(first) == len(starts) else first, sizes)


def _class_runs(ufunc: np.ufunc, values: np.ndarray, runs: _Runs) -> np.ndarray:
    """``ufunc`` over the rows of each class present in a block (``runs``): a row each, in
    the order of ``runs.present`` (runs of consecutive rows of one class first, then each
    class's runs)."""
    partial = ufunc.reduceat(values, runs.starts, axis=0)[runs.order]
    return partial if runs.first is None else ufunc.reduceat(partial, runs.first, axis=0)


def reduce_blocks(
    table: SeriesTable,
    width: int,
    blocks: Iterable[tuple[int, np.ndarray]],
    name: str,
    by: list[str] | None = None,
    without: list[str] | None = None,
) -> tuple[SeriesTable, np.ndarray]:
    """The table and ``[classes, width]`` values of reducing by ``name`` (one of
    :data:`FUSED_AGGREGATES`) the series of ``table`` whose values come in ``blocks``: each
    ``(first series, [series, width] values)``, in order, covering them all. Each block is
    reduced into per-class sums (minima, maxima) before the next is asked for, so its
    producer may reuse one buffer. The answer is :func:`reduce_matrix`'s, but for the order
    in which the members of a class spanning blocks are added (the last bits of a sum)."""
    grouping = _grouping(table, by, without)
    classes, count = grouping.classes, grouping.count
    extreme = np.fmin if name == "min" else np.fmax if name == "max" else None
    total = np.full((count, width), np.nan) if extreme is not None else np.zeros((count, width))
    seen = np.zeros((count, width))
    with np.errstate(all="ignore"):
        for start, block in blocks:
            whole = start == 0 and len(block) == len(classes)
            runs = (
                grouping.runs
                if whole and grouping.runs is not None
                else _runs_of(classes[start : start + len(block)], count)
            )
            # the whole table's runs hold every class, in order: no picking of their rows
            present = slice(None) if runs is grouping.runs else runs.present
            if extreme is not None:
                total[present] = extreme(total[present], _class_runs(extreme, block, runs))
                continue
            part = _class_runs(np.add, block, runs)
            counted = np.repeat(runs.sizes[:, None], width, axis=1)
            gappy = np.flatnonzero(np.isnan(part).any(axis=0))
            if len(gappy):
                cells = block[:, gappy]
                missing = np.isnan(cells)
                counted[:, gappy] = _class_runs(np.add, (~missing).astype(np.float64), runs)
                part[:, gappy] = _class_runs(np.add, np.where(missing, 0.0, cells), runs)
            total[present] += part
            seen[present] += counted
        if extreme is not None or name == "count":
            values = total if extreme is not None else seen
        else:
            values = np.where(seen > 0, total / seen if name == "mean" else total, np.nan)
    return grouping.table, values


def reduce_windows(
    m: Matrix,
    mapper: str,
    window: int,
    name: str,
    by: list[str] | None = None,
    without: list[str] | None = None,
    check: Callable[[], None] | None = None,
) -> Matrix:
    """``reduce(map(m, mapper, window), name, by=..., without=...)`` fused (module doc):
    ``mapper`` one of :data:`query_dsl.windows.PREFIX_WINDOWS`, ``window`` in buckets (at
    most the instant count), ``name`` one of :data:`FUSED_AGGREGATES`; ``check`` is called
    between blocks (:func:`reduce_blocks` says how the answer may differ)."""
    time_major = m.values.T
    width = len(m.timestamps)
    per_block = max(1, _BLOCK_CELLS // max(width, 1))
    function = PREFIX_WINDOWS[mapper]

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        buffer = np.empty((width, min(per_block, len(m))))
        with np.errstate(all="ignore"):
            for start in range(0, len(m), per_block):
                if check is not None and start:
                    check()
                stop = min(start + per_block, len(m))
                out = buffer[:, : stop - start]
                function(time_major[:, start:stop], window, m.step_ms, out)
                yield start, out.T  # [series, instants], a view

    table, values = reduce_blocks(m.table, width, blocks(), name, by, without)
    return Matrix.from_table(table, m.timestamps, values, m.step_ms)
