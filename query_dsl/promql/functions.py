"""Functions of instant vectors and scalars, elementwise or per evaluation time: ``abs``,
``round``, ``clamp``, ``label_replace``, ``histogram_quantile``... Each takes the engine's
evaluated arguments and the evaluation times and answers a value. Every function but
``label_replace``, ``label_join``, ``sort``, ``sort_desc`` and ``vector`` drops the metric
name, as in Prometheus. ``timestamp``, ``absent`` and ``absent_over_time`` are the engine's
(:mod:`.engine`): they need the samples' times or the selector, not only values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import re2

from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.promql.dates import PARTS, part_values
from query_dsl.promql.labels import with_label
from query_dsl.promql.values import NAN_VALUE, Scalar, String, Value, absent, present, settle
from query_dsl.series_table import SeriesTable, remembered
from vhms import VhmsError, parse_selector

__all__ = ["ELEMENTWISE", "INSTANT_FUNCTIONS", "InstantFunction"]

InstantFunction = Callable[[list[Value], np.ndarray], Value]


def _round_half_up(values: np.ndarray, to: np.ndarray | float = 1.0) -> np.ndarray:
    """Go's ``math.Floor(v*(1/to) + 0.5) / (1/to)``: halves round up, as Prometheus does."""
    inverse = 1.0 / np.asarray(to)
    return np.floor(values * inverse + 0.5) / inverse


ELEMENTWISE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "ceil": np.ceil,
    "floor": np.floor,
    "exp": np.exp,
    "sqrt": np.sqrt,
    "ln": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "sgn": np.sign,
    "deg": np.degrees,
    "rad": np.radians,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
}


def _vector(arg: Value) -> Matrix:
    assert isinstance(arg, Matrix)  # the parser checked the types
    return arg


def _scalar(arg: Value) -> np.ndarray:
    assert isinstance(arg, Scalar)  # the parser checked the types
    return arg.values


def _string(arg: Value) -> str:
    assert isinstance(arg, String)  # the parser checked the types
    return arg.value


def _nameless(m: Matrix, values: np.ndarray) -> Matrix:
    """``values`` computed from ``m``'s, without the name: no sample where ``m`` had none,
    :data:`NAN_VALUE` for every NaN computed."""
    return Matrix.from_table(m.table.with_name(""), m.timestamps, settle(values, absent(m.values)), m.step_ms)


def _elementwise(function: Callable[[np.ndarray], np.ndarray]) -> InstantFunction:
    def run(args: list[Value], times: np.ndarray) -> Value:
        m = _vector(args[0])
        with np.errstate(all="ignore"):
            return _nameless(m, function(m.values))

    return run


def _clamp(args: list[Value], times: np.ndarray) -> Value:
    m, low, high = _vector(args[0]), _scalar(args[1]), _scalar(args[2])
    with np.errstate(all="ignore"):
        values = np.maximum(np.minimum(m.values, high[None, :]), low[None, :])
    clamped = _nameless(m, values)
    return clamped.with_values(np.where((low > high)[None, :], np.nan, clamped.values))  # none: as Prometheus


def _clamp_one(maximum: bool) -> InstantFunction:
    def run(args: list[Value], times: np.ndarray) -> Value:
        m, bound = _vector(args[0]), _scalar(args[1])[None, :]
        with np.errstate(all="ignore"):
            values = np.minimum(m.values, bound) if maximum else np.maximum(m.values, bound)
        return _nameless(m, values)

    return run


def _round(args: list[Value], times: np.ndarray) -> Value:
    m = _vector(args[0])
    to = _scalar(args[1])[None, :] if len(args) > 1 else 1.0
    with np.errstate(all="ignore"):
        return _nameless(m, _round_half_up(m.values, to))


def _scalar_of(args: list[Value], times: np.ndarray) -> Value:
    m = _vector(args[0])
    found = present(m.values)
    single = found.sum(axis=0) == 1
    values = np.where(found, m.values, 0.0).sum(axis=0) if len(m) else np.zeros(len(times))
    return Scalar(np.where(single, values, np.nan))


# the one series without a name or labels of vector() and of a date function of the time:
# shared, so that its order and label texts are made once
_NAMELESS = SeriesTable.from_lists([""], [{}])


def _vector_of(args: list[Value], times: np.ndarray) -> Value:
    values = np.where(np.isnan(_scalar(args[0])), NAN_VALUE, _scalar(args[0]))
    return Matrix.from_table(_NAMELESS, times, values[None, :], _step(times))


def _step(times: np.ndarray) -> int:
    return int(times[1] - times[0]) if len(times) > 1 else 0


def _time(args: list[Value], times: np.ndarray) -> Value:
    return Scalar(times / 1000.0)


def _pi(args: list[Value], times: np.ndarray) -> Value:
    return Scalar(np.full(len(times), math.pi))


def _sort(descending: bool) -> InstantFunction:
    """Orders series by their value at the (single) evaluation time; a range query keeps
    Prometheus's order by labels (sorting there has no effect)."""

    def run(args: list[Value], times: np.ndarray) -> Value:
        m = _vector(args[0])
        if len(times) != 1 or not len(m):
            return m
        key = m.values[:, 0]
        order = np.argsort(-key if descending else key, kind="stable")
        nan_last = np.concatenate([order[~np.isnan(key[order])], order[np.isnan(key[order])]])
        return m.select(nan_last)

    return run


def _date(name: str) -> InstantFunction:
    def run(args: list[Value], times: np.ndarray) -> Value:
        if args:
            m = _vector(args[0])
            source, table = m.values, m.table.with_name("")
        else:
            source, table = (times / 1000.0)[None, :], _NAMELESS
        out = np.where(present(source), NAN_VALUE, np.nan)
        finite = np.isfinite(source) & (np.abs(source) < 2.5e11)
        out[finite] = part_values(name, source[finite])
        return Matrix.from_table(table, times, out, _step(times))

    return run


def _label_replace(args: list[Value], times: np.ndarray) -> Value:
    m = _vector(args[0])
    destination, replacement, source, pattern = (_string(a) for a in args[1:5])
    _check_label(destination)
    regex = _compiled(pattern)

    def labels() -> list[dict[str, str]]:
        out = []
        for full in _full_labels(m):
            value = regex.expand(full.get(source, ""), replacement)
            out.append(full if value is None else with_label(full, destination, value))
        return out

    return _relabeled(m, ("label_replace", destination, replacement, source, pattern), labels)


def _label_join(args: list[Value], times: np.ndarray) -> Value:
    m = _vector(args[0])
    destination, separator = _string(args[1]), _string(args[2])
    sources = [_string(a) for a in args[3:]]
    _check_label(destination)

    def labels() -> list[dict[str, str]]:
        return [
            with_label(full, destination, separator.join(full.get(source, "") for source in sources))
            for full in _full_labels(m)
        ]

    return _relabeled(m, ("label_join", destination, separator, *sources), labels)


def _full_labels(m: Matrix) -> list[dict[str, str]]:
    """Each series' labels, its name as ``__name__`` (where it has one)."""
    return [
        {**label_set, **({"__name__": name} if name else {})}
        for name, label_set in zip(m.names, m.labels, strict=True)
    ]


_RELABELED_SERIES = 1 << 19  # label functions' tables remembered per input table: this many series' worth


def _relabeled(m: Matrix, key: tuple[str, ...], labels: Callable[[], list[dict[str, str]]]) -> Matrix:
    """``m``'s values under the label sets ``labels`` makes (each with its name as
    ``__name__``), their table made once per ``m``'s table and ``key`` (the function and its
    arguments) and kept with it: a dashboard asks the same label_replace again over a
    selector's table, which is reused, and finds the answer's table with its order and label
    texts made (215 us a query of 3 series made them anew, 100 us finds them)."""

    def made() -> SeriesTable:
        full = labels()
        names = [label_set.pop("__name__", "") for label_set in full]
        return SeriesTable.from_lists(names, full)

    table = remembered(m.table, "promql_relabeled", key, _RELABELED_SERIES, made)
    return Matrix.from_table(table, m.timestamps, m.values, m.step_ms)


def _check_label(label: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", label):
        raise QueryTypeError(f"invalid destination label name in label_replace(): {label!r}")


_TEMPLATE = re.compile(r"\$(?:\{([A-Za-z0-9_]*)\}|([A-Za-z0-9_]+))")


class _Pattern:
    """A user's regex in RE2 (the store's engine and limits, linear time), anchored at both
    ends as Prometheus anchors it; dropped from google-re2's module cache once compiled (a
    refused or large program must not stay pinned there: vhms/regex.py)."""

    def __init__(self, pattern: str) -> None:
        parse_selector("{l~" + '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"}')
        try:
            self.compiled = re2.compile(pattern)
        finally:
            re2.purge()

    def expand(self, text: str, replacement: str) -> str | None:
        """``replacement`` with ``$1``, ``${1}``, ``$name`` and ``${name}`` filled from the
        match of ``text`` (Go's ``Regexp.Expand``: a group that does not exist, or did not
        take part, is empty; ``$$`` is a dollar), or None when the regex does not match."""
        found = self.compiled.fullmatch(text)
        if found is None:
            return None
        groups = {str(i): found.group(i) for i in range(self.compiled.groups + 1)}
        groups.update(found.groupdict())

        def fill(part: re.Match[str]) -> str:
            return groups.get(part[1] if part[1] is not None else part[2]) or ""

        pieces = replacement.split("$$")
        return "$".join(_TEMPLATE.sub(fill, piece) for piece in pieces)


@lru_cache(maxsize=256)  # compiled once for the queries that repeat it (a dashboard's)
def _compiled(pattern: str) -> _Pattern:
    try:
        return _Pattern(pattern)
    except (VhmsError, re2.error) as exc:
        raise QueryTypeError(f"invalid regular expression in label_replace(): {pattern!r}: {exc}") from None


def _histogram_quantile(args: list[Value], times: np.ndarray) -> Value:
    q, m = _scalar(args[0]), _vector(args[1])
    le_column = m.table.columns.get("le")
    if le_column is None or not len(m):
        return Matrix.from_table(
            m.table.take(np.zeros(0, dtype=np.int64)), times, np.zeros((0, len(times))), m.step_ms
        )
    has_le = np.flatnonzero(le_column.codes >= 0)
    bounds = np.array([_parse_float(le_column.values[c]) for c in le_column.codes[has_le].tolist()])
    rows = has_le[~np.isnan(bounds)]
    bounds = bounds[~np.isnan(bounds)]
    table = m.table.take(rows).restrict(drop=("le",)).with_name("")
    classes, firsts = table.groups(list(table.columns))
    out = np.full((len(firsts), len(times)), np.nan)
    computed = np.zeros(out.shape, dtype=bool)
    for members, upper, order in _same_buckets(classes, len(firsts), bounds):
        counts = m.values[rows[order]]  # [classes, buckets, times]
        found = present(counts)
        computed[members] = found.any(axis=1)
        whole = found.all(axis=1) & ~np.isnan(counts).any(axis=1)  # every bucket, a number
        if whole.any():  # every class of these buckets at once: the columns side by side
            side_by_side = counts.transpose(1, 0, 2).reshape(len(upper), -1)
            at = whole.reshape(-1)
            part = np.full(at.shape, np.nan)
            part[at] = _bucket_quantiles(np.tile(q, len(members))[at], upper, side_by_side[:, at])
            out[members] = np.where(whole, part.reshape(whole.shape), np.nan)
        for index, column in zip(*np.nonzero(~whole & computed[members]), strict=True):
            kept = found[index, :, column]
            cell = _bucket_quantile(float(q[column]), upper[kept], counts[index, kept, column])
            out[members[index], column] = cell
    out[computed & np.isnan(out)] = NAN_VALUE
    return Matrix.from_table(table.take(firsts), times, out, m.step_ms)


def _same_buckets(
    classes: np.ndarray, count: int, bounds: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The histograms' classes grouped by their buckets' upper bounds (the same bits): each
    group's classes, their bounds ascending, and each class's rows in that order
    ``[classes, buckets]``."""
    groups: dict[bytes, list[tuple[int, np.ndarray]]] = {}
    for cls in range(count):
        members = np.flatnonzero(classes == cls)
        order = members[np.argsort(bounds[members], kind="stable")]
        groups.setdefault(bounds[order].tobytes(), []).append((cls, order))
    return [
        (np.array([cls for cls, _ in group]), bounds[group[0][1]], np.array([order for _, order in group]))
        for group in groups.values()
    ]


def _parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _bucket_quantile(q: float, upper: np.ndarray, counts: np.ndarray) -> float:
    """Prometheus's bucketQuantile over buckets sorted by upper bound."""
    if math.isnan(q):
        return math.nan
    if q < 0 or q > 1:
        return -math.inf if q < 0 else math.inf
    if not math.isinf(upper[-1]) or upper[-1] < 0:
        return math.nan
    unique, start = np.unique(upper, return_index=True)
    summed = np.add.reduceat(counts, start)
    summed = np.maximum.accumulate(summed)
    if len(unique) < 2:
        return math.nan
    observations = summed[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = int(np.searchsorted(summed[:-1], rank, side="left"))
    if b == len(unique) - 1:
        return float(unique[-2])
    if b == 0 and unique[0] <= 0:
        return float(unique[0])
    bucket_start, bucket_end, count = 0.0, float(unique[b]), float(summed[b])
    if b > 0:
        bucket_start = float(unique[b - 1])
        count -= float(summed[b - 1])
        rank -= float(summed[b - 1])
    return float(bucket_start + (bucket_end - bucket_start) * (rank / count))


def _bucket_quantiles(q: np.ndarray, upper: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`_bucket_quantile` at every column of ``counts`` ``[buckets, columns]`` at once
    (every bucket present in each, no NaN count), ``q`` per column."""
    out = np.full(len(q), np.nan)
    if math.isinf(upper[-1]) and upper[-1] > 0:
        unique, start = np.unique(upper, return_index=True)
        if len(unique) >= 2:
            summed = np.maximum.accumulate(np.add.reduceat(counts, start, axis=0), axis=0)
            observations = summed[-1]
            rank = q * observations
            b = (summed[:-1] < rank).sum(axis=0)  # searchsorted, side "left", per column
            below = np.where(b > 0, summed[np.maximum(b - 1, 0), np.arange(len(q))], 0.0)
            bucket_start = np.where(b > 0, unique[np.maximum(b - 1, 0)], 0.0)
            bucket_end = unique[np.minimum(b, len(unique) - 1)]
            count = summed[b.clip(max=len(unique) - 1), np.arange(len(q))] - below
            with np.errstate(all="ignore"):
                out = bucket_start + (bucket_end - bucket_start) * ((rank - below) / count)
            out = np.where(b == len(unique) - 1, unique[-2], out)
            out = np.where((b == 0) & (unique[0] <= 0), unique[0], out)
            out = np.where(observations == 0, np.nan, out)
    out = np.where(q < 0, -math.inf, np.where(q > 1, math.inf, out))
    return np.where(np.isnan(q), np.nan, out)


INSTANT_FUNCTIONS: dict[str, InstantFunction] = {
    **{name: _elementwise(function) for name, function in ELEMENTWISE.items()},
    "clamp": _clamp,
    "clamp_max": _clamp_one(maximum=True),
    "clamp_min": _clamp_one(maximum=False),
    "round": _round,
    "scalar": _scalar_of,
    "vector": _vector_of,
    "time": _time,
    "pi": _pi,
    "sort": _sort(descending=False),
    "sort_desc": _sort(descending=True),
    "label_replace": _label_replace,
    "label_join": _label_join,
    "histogram_quantile": _histogram_quantile,
    **{name: _date(name) for name in PARTS},
}
