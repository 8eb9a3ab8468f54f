"""Aggregates across a set of values (NaN skipped), shared by ``reduce`` and ``bucketize``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from query_dsl.exceptions import QueryTypeError

__all__ = ["AGGREGATES", "aggregate", "check_aggregate"]


def _quiet(function: Callable[..., Any]) -> Callable[..., np.ndarray]:
    def run(values: np.ndarray, axis: int, *params: float) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN
            return function(values, axis, *params)

    return run


def _sum(values: np.ndarray, axis: int) -> np.ndarray:
    out = np.nansum(values, axis=axis)
    return np.where(np.isnan(values).all(axis=axis), np.nan, out)


def _last(values: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(values, axis, -1)
    present = ~np.isnan(moved)
    index = moved.shape[-1] - 1 - np.argmax(present[..., ::-1], axis=-1)
    out = np.take_along_axis(moved, index[..., None], axis=-1)[..., 0]
    return np.where(present.any(axis=-1), out, np.nan)


def _first(values: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(values, axis, -1)
    present = ~np.isnan(moved)
    index = np.argmax(present, axis=-1)
    out = np.take_along_axis(moved, index[..., None], axis=-1)[..., 0]
    return np.where(present.any(axis=-1), out, np.nan)


AGGREGATES: dict[str, tuple[int, Callable[..., np.ndarray]]] = {
    "sum": (0, _sum),
    "mean": (0, _quiet(lambda v, a: np.nanmean(v, axis=a))),
    "min": (0, _quiet(lambda v, a: np.nanmin(v, axis=a))),
    "max": (0, _quiet(lambda v, a: np.nanmax(v, axis=a))),
    "count": (0, lambda v, a: (~np.isnan(v)).sum(axis=a).astype(np.float64)),
    "median": (0, _quiet(lambda v, a: np.nanmedian(v, axis=a))),
    "percentile": (1, _quiet(lambda v, a, q: np.nanpercentile(v, q, axis=a))),
    "stddev": (0, _quiet(lambda v, a: np.nanstd(v, axis=a))),
    "last": (0, _last),
    "first": (0, _first),
}


def check_aggregate(name: str, params: tuple[float, ...] = ()) -> None:
    """``QueryTypeError`` unless ``name`` is an aggregate and ``params`` suit it."""
    if name not in AGGREGATES:
        raise QueryTypeError(f"unknown aggregate {name!r} (known: {', '.join(sorted(AGGREGATES))})")
    arity = AGGREGATES[name][0]
    if len(params) != arity:
        raise QueryTypeError(f"aggregate {name} takes {arity} parameter(s), got {len(params)}")
    if name == "percentile" and not 0 <= params[0] <= 100:
        raise QueryTypeError(f"percentile {params[0]} is not within 0..100")


def aggregate(name: str, values: np.ndarray, axis: int, params: tuple[float, ...] = ()) -> np.ndarray:
    check_aggregate(name, params)
    return AGGREGATES[name][1](values, axis, *params)
