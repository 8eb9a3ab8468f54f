"""``analyze`` on the executors: the part of a query that works series by series, and the
reduce over it, run where the samples are; only their answer comes to the driver.

A *chain* is a ``fetch`` followed by per-series steps (``map``, ``bucketize``, ``filter``,
``where_last``), their arguments constants, possibly ended by a ``reduce``. What the
language does to a series in such a chain depends on that series alone, so:

1. the samples of the fetch's range are read where they lie and those of the selected
   series kept (``mapInArrow``: the selector decided once per series and task);
2. they are grouped by a hash of their series into groups of about
   :data:`CELLS_PER_GROUP` bucket cells, each series whole in one group
   (``applyInArrow``), where the query language's own evaluator runs the chain's
   per-series part over the group's samples (:class:`~spark_jobs.history.FrameSource`):
   the code the query API runs, vectorized over the group's series;
3. each group answers a row per series (its key: the per-series steps keep a series' name
   and labels, so the key of the fetch) and a row per value that is not NaN
   (:data:`GROUP_ROWS`);
4. a reduce puts each series in its equivalence class in Spark SQL, from the ``k=v``
   pairs of its canonical key (a class is the pairs of the ``by`` labels, or all but the
   ``without`` ones: a missing label is a value of its own), and aggregates per class and
   instant, partially before the shuffle;
   each aggregate of the language has an exact Spark counterpart (:data:`AGGREGATES`:
   ``percentile`` is exact and interpolates as numpy does; ``first`` and ``last`` take
   the member with the smallest and greatest key, the order of the members in a fetch);
   the pairs and name a class's members share are counted in Spark too.

The driver then receives a row per class and instant (a reduce) or the chain's series (no
reduce): the answer. The rest of a query (operators between chains, ``top``, a reduce of a
reduce...) runs on the driver over those answers, through the evaluator's ``delegate``
hook (:class:`Distributor`). The time axis and the fetch's range come from evaluating the
chain over no series on the driver, which also checks the query's arguments before Spark
starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import functions as F

from bookkeeper.wire import parse_series_shared
from query_dsl import Call, Duration, Evaluator, Limits, Matrix, Node, QueryTypeError, Word
from spark_jobs.history import FrameSource, ParquetSource, last_in_buckets, matching_series
from vhms import FetchResult

__all__ = ["AGGREGATES", "CELLS_PER_GROUP", "GROUP_ROWS", "Chain", "Distributor", "chain_of"]

PER_SERIES = frozenset({"map", "bucketize", "filter", "where_last"})
# bucket cells (series x buckets of the fetch) of one group: 16 MiB of float64, which the
# evaluator's steps copy a few times
CELLS_PER_GROUP = 1 << 21
_VERDICTS_MAX = 1 << 20  # selector verdicts a task remembers (its series), then forgets
SAMPLE_ROWS = "series string, ts_ms long, type tinyint, value double"
# a head row per series and a row per value that is not NaN
GROUP_ROWS = "head boolean, series string, ts_ms long, value double"
# a canonical key: name{k=v,...}, values escaped (no brace, comma or equals sign in them)
_NAME = r"^(.*)\{[^{}]*\}$"
_PAIRS = r"\{([^{}]*)\}$"

# the language's aggregates (query_dsl's AGGREGATES) in Spark SQL, over the values that
# are not NaN of a class at an instant; count is 0 where none is, the others NaN
AGGREGATES: dict[str, Callable[[tuple[float, ...]], Any]] = {
    "sum": lambda _: F.sum("value"),
    "mean": lambda _: F.avg("value"),
    "min": lambda _: F.min("value"),
    "max": lambda _: F.max("value"),
    "count": lambda _: F.count("value"),
    "median": lambda _: F.percentile("value", F.lit(0.5)),
    "percentile": lambda params: F.percentile("value", F.lit(params[0] / 100)),
    "stddev": lambda _: F.stddev_pop("value"),
    "first": lambda _: F.min_by("value", "series"),
    "last": lambda _: F.max_by("value", "series"),
}


def _constant(node: Node) -> bool:
    if isinstance(node, list):
        return all(_constant(item) for item in node)
    return isinstance(node, float | str | Duration | Word)


def _constant_arguments(call: Call) -> bool:
    return all(_constant(arg) for arg in call.args[1:]) and all(_constant(v) for _, v in call.kwargs)


def _per_series(node: Node) -> bool:
    if not isinstance(node, Call):
        return False
    if node.name == "fetch":
        return all(_constant(arg) for arg in node.args) and _constant_arguments(node)
    return (
        node.name in PER_SERIES
        and bool(node.args)
        and _per_series(node.args[0])
        and _constant_arguments(node)
    )


@dataclass(frozen=True)
class Chain:
    """A fetch and its per-series steps (``series``), and the reduce over them if any."""

    series: Call
    reduce: Call | None = None


def chain_of(node: Node) -> Chain | None:
    """The chain ``node`` is, or None if it is not one (see the module doc)."""
    if isinstance(node, Call) and node.name == "reduce" and node.args and _per_series(node.args[0]):
        return Chain(node.args[0], node) if _constant_arguments(node) else None
    return Chain(node) if _per_series(node) else None


def _text(node: Node) -> str:
    return node.name if isinstance(node, Word) else str(node)


@dataclass(frozen=True)
class _Reduce:
    """A reduce's arguments (already checked by the evaluator on the driver)."""

    aggregate: str
    params: tuple[float, ...]
    by: tuple[str, ...] | None
    without: tuple[str, ...] | None

    @classmethod
    def of(cls, call: Call) -> _Reduce:
        kwargs = dict(call.kwargs)
        by, without = kwargs.get("by"), kwargs.get("without")
        return cls(
            _text(call.args[1]),
            tuple(float(p.ms) if isinstance(p, Duration) else float(p) for p in call.args[2:]),
            None if by is None else tuple(_text(label) for label in by),
            None if without is None else tuple(_text(label) for label in without),
        )

    def classes(self) -> Any:
        """The class of each series (a Spark column over ``series``): the ``k=v`` pairs of its
        key that ``reduce_matrix`` classes on, so equal exactly when it puts two series in
        one class (a missing label is a value of its own)."""
        if self.by is None and self.without is None:
            return F.lit("")
        labels = F.array(*(F.lit(label) for label in (self.by or self.without or ())))
        inside = self.by is not None
        kept = F.filter(
            _pairs(), lambda pair: F.array_contains(labels, F.substring_index(pair, "=", 1)) == inside
        )
        return F.array_join(kept, ",")


def _pairs() -> Any:
    """The ``k=v`` pairs of a series key, in the key's (sorted) order."""
    return F.filter(F.split(F.regexp_extract("series", _PAIRS, 1), ","), lambda pair: pair != "")


@dataclass(frozen=True)
class _GroupTask:
    """What each group runs on an executor (pickled there with the query's chain)."""

    series: Call
    reduce: _Reduce | None
    now_ms: int
    start_ms: int
    end_ms: int
    step_s: int
    limits: Limits

    def function(self) -> Callable[[pa.Table], pa.Table]:
        """:meth:`run` as a plain function (Spark counts a method's ``self`` as the group key)."""

        def run(samples: pa.Table) -> pa.Table:
            return self.run(samples)

        return run

    def run(self, samples: pa.Table) -> pa.Table:
        source = FrameSource(samples, self.step_s)
        evaluator = Evaluator(
            source,
            now_ms=self.now_ms,
            start_ms=self.start_ms,
            end_ms=self.end_ms,
            limits=self.limits,
        )
        matrix = evaluator.evaluate(self.series)
        if not isinstance(matrix, Matrix):  # a chain of per-series steps keeps series
            raise QueryTypeError(f"{self.series.name}(...) gives {matrix!r}, not series")
        fetched = source.fetched
        # the steps keep or drop series, in order, never change them: all kept, the same keys
        keys = pa.array(fetched if len(matrix) == len(fetched) else matrix.series_keys(), pa.string())
        rows, columns = np.nonzero(~np.isnan(matrix.values))
        heads = pa.table(
            {
                "head": np.ones(len(keys), dtype=bool),
                "series": keys,
                "ts_ms": np.zeros(len(keys), dtype=np.int64),
                "value": np.full(len(keys), np.nan),
            }
        )
        cells = pa.table(
            {
                "head": np.zeros(len(rows), dtype=bool),
                "series": pc.take(keys, pa.array(rows)),
                "ts_ms": matrix.timestamps[columns],
                "value": matrix.values[rows, columns],
            }
        )
        return pa.concat_tables([heads, cells])


def _selected(selector: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The rows of the series ``selector`` selects, decided once per series and task."""

    def keep(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        verdicts: dict[str, bool] = {}
        for batch in batches:
            series = batch.column("series")
            distinct = pc.unique(series).to_pylist()
            if len(verdicts) > _VERDICTS_MAX:
                verdicts.clear()
            unseen = [key for key in distinct if key not in verdicts]
            chosen = set(matching_series(unseen, selector))
            verdicts.update((key, key in chosen) for key in unseen)
            wanted = pa.array([key for key in distinct if verdicts[key]], pa.string())
            yield batch.filter(pc.is_in(series, value_set=wanted))

    return keep


class _Probe:
    """A source of no series: what the chain's fetch asks for (selector, range, step)."""

    def __init__(self, step_s: int) -> None:
        self.step_s = step_s
        self.asked: tuple[str, int, int, int] | None = None

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        step = (self.step_s if resolution == "auto" else int(resolution)) * 1000
        self.asked = (selector, start_ms, end_ms, step)
        none = np.zeros(0, dtype=np.int64)
        timestamps, values = last_in_buckets(none, none, none.astype(float), 0, start_ms, end_ms, step)
        return FetchResult.from_keys([], timestamps, values, step)

    def series(self, selector: str) -> list[str]:
        return []

    def label_names(self) -> list[str]:
        return []

    def label_values(self, label: str) -> list[str]:
        return []

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        return {}


class Distributor:
    """The evaluator's ``delegate`` for ``analyze``: answers each chain of a query on the
    executors (see the module doc), other nodes are left to the evaluator."""

    def __init__(
        self, source: ParquetSource, *, now_ms: int, start_ms: int, end_ms: int, limits: Limits
    ) -> None:
        self.source = source
        self.now_ms = now_ms
        self.start_ms = start_ms
        self.end_ms = end_ms
        self.limits = limits

    def __call__(self, node: Node) -> Matrix | None:
        chain = chain_of(node)
        return None if chain is None else self.run(chain)

    def run(self, chain: Chain) -> Matrix:
        probe = _Probe(self.source.step_s)
        axis = Evaluator(
            probe, now_ms=self.now_ms, start_ms=self.start_ms, end_ms=self.end_ms, limits=self.limits
        ).evaluate(chain.reduce or chain.series)
        if not isinstance(axis, Matrix) or probe.asked is None:
            raise QueryTypeError(f"{chain.series.name}(...) gives {axis!r}, not series")
        selector, start_ms, end_ms, step_ms = probe.asked
        samples = self.source.samples(start_ms, end_ms)
        width = max(1, (end_ms - 1) // step_ms + start_ms // -step_ms + 1)  # the fetch's buckets
        estimate = int(samples.agg(F.approx_count_distinct("series")).first()[0])
        spark = self.source.spark
        groups = max(
            spark.sparkContext.defaultParallelism, min(estimate, -(-estimate * width // CELLS_PER_GROUP))
        )
        task = _GroupTask(
            chain.series,
            None if chain.reduce is None else _Reduce.of(chain.reduce),
            self.now_ms,
            self.start_ms,
            self.end_ms,
            self.source.step_s,
            self.limits,
        )
        answered = (
            samples.select("series", F.unix_millis("ts").alias("ts_ms"), "type", "value")
            .mapInArrow(_selected(selector), SAMPLE_ROWS)
            .withColumn("group", F.pmod(F.xxhash64("series"), F.lit(groups)))
            .groupBy("group")
            .applyInArrow(task.function(), GROUP_ROWS)
            .persist(StorageLevel.MEMORY_AND_DISK)  # read twice or thrice below: evaluated once
        )
        try:
            if task.reduce is None:
                return _series(answered, axis)
            return _reduced(answered, task.reduce, axis)
        finally:
            answered.unpersist()


def _series(answered: Any, axis: Matrix) -> Matrix:
    """The chain's series (no reduce), by key, as one fetch orders them."""
    heads = answered.where("head").select("series").orderBy("series").toPandas()
    cells = answered.where(~F.col("head")).select("series", "ts_ms", "value").toPandas()
    values = np.full((len(heads), len(axis.timestamps)), np.nan)
    if len(cells):
        rows = pd.Index(heads["series"]).get_indexer(cells["series"])
        values[rows, np.searchsorted(axis.timestamps, cells["ts_ms"])] = cells["value"].to_numpy(dtype=float)
    parsed = [parse_series_shared(key) for key in heads["series"]]
    return Matrix(
        [name for name, _ in parsed], [labels for _, labels in parsed], axis.timestamps, values, axis.step_ms
    )


def _reduced(answered: Any, reduce: _Reduce, axis: Matrix) -> Matrix:
    """One series per class, in the order of their first members, as ``reduce_matrix``."""
    heads = answered.where("head").select("series", reduce.classes().alias("cls"))
    classes = heads.groupBy("cls").agg(
        F.min("series").alias("first"),
        F.count(F.lit(1)).alias("members"),
        F.min(F.regexp_extract("series", _NAME, 1)).alias("low"),
        F.max(F.regexp_extract("series", _NAME, 1)).alias("high"),
    )
    shared = (
        heads.select("cls", F.explode(_pairs()).alias("pair"))
        .groupBy("cls", "pair")
        .count()
        .join(classes.select("cls", "members"), "cls")
        .where(F.col("count") == F.col("members"))
        .groupBy("cls")
        .agg(F.array_join(F.array_sort(F.collect_list("pair")), ",").alias("shared"))
    )
    info = classes.join(shared, "cls", "left").orderBy("first").toPandas()
    points = (
        answered.where(~F.col("head"))
        .select("series", reduce.classes().alias("cls"), "ts_ms", "value")
        .groupBy("cls", "ts_ms")
        .agg(AGGREGATES[reduce.aggregate](reduce.params).alias("value"))
        .toPandas()
    )
    values = np.full((len(info), len(axis.timestamps)), 0.0 if reduce.aggregate == "count" else np.nan)
    if len(points):
        rows = pd.Index(info["cls"]).get_indexer(points["cls"])
        values[rows, np.searchsorted(axis.timestamps, points["ts_ms"])] = points["value"].to_numpy(
            dtype=float
        )
    names = [low if low == high else "" for low, high in zip(info["low"], info["high"], strict=True)]
    labels = [
        dict(parse_series_shared(f"_{{{pairs}}}")[1]) if isinstance(pairs, str) else {}
        for pairs in info["shared"]
    ]
    return Matrix(names, labels, axis.timestamps, values, axis.step_ms)
