"""``map``: per-series functions over the time axis, vectorized over every series.

Windows are counted in buckets of the matrix's step: ``window=10m`` on 1-minute buckets is
the 10 buckets ending at each instant, ``(t - 10m, t]``. NaN is "no value": window
functions skip it and give NaN where a window holds no value.

| mapper | value at t |
|---|---|
| ``delta`` | last value in the window minus the first (a gauge's change) |
| ``increase`` | sum of the increments in the window; a decrease is a reset (the new value counts) |
| ``rate`` | ``increase`` per second over the time between the window's first and last values |
| ``abs``, ``log``, ``log10``, ``clamp(min, max)`` | element-wise |
| ``mean``, ``min``, ``max``, ``median``, ``percentile(q)``, ``sum``, ``count`` | moving statistic |
| ``fill_previous`` | the last value seen at or before t |
| ``fill_zero`` | NaN replaced by 0 |
| ``timeshift(d)`` | the value at ``t - d`` (shifts the series later by d) |

``delta``, ``increase``, ``rate`` and the moving ``mean``, ``sum`` and ``count`` are
differences of prefix sums, computed on the time-major layout (:mod:`query_dsl.windows`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.windows import PREFIX_WINDOWS, PrefixWindow, ffill_index

__all__ = ["MAPPERS", "TWO_POINT_MAPPERS", "apply_mapper", "window_buckets"]

# Mappers that compare two values of a window: a window of one bucket gives them nothing.
TWO_POINT_MAPPERS = frozenset({"delta", "increase", "rate"})

# series x instants x window cells of one slice: 32 MiB of float64 for a median's copy
_SLICE_CELLS = 1 << 22
_MAX_SHIFT_MS = 2**53  # beyond any time axis: epoch ms stay below it


def window_buckets(window_ms: int | None, step_ms: int, mapper: str) -> int:
    if window_ms is None:
        raise QueryTypeError(f"map({mapper}) needs a window, e.g. map({mapper}, 10m)")
    if window_ms <= 0 or window_ms % step_ms:
        raise QueryTypeError(
            f"map({mapper}): window {window_ms} ms is not a positive multiple of the step {step_ms} ms"
        )
    return window_ms // step_ms


def _prefix_window(function: PrefixWindow) -> Callable[[Matrix, int], np.ndarray]:
    """A :mod:`query_dsl.windows` function as a mapper of a matrix."""
    return lambda m, window: _time_major_blocks(m, function, window, None)


def _time_major_blocks(
    m: Matrix, function: PrefixWindow, window: int, check: Callable[[], None] | None
) -> np.ndarray:
    """``function`` over the time-major ``values.T`` (contiguous rows when the values come
    from a fetch), by blocks of series of at most ``_SLICE_CELLS`` cells (column slices: views,
    never copies) written into one time-major answer, ``check`` called before each block
    after the first; the answer is handed on transposed, in the layout a fetch gives."""
    time_major = m.values.T
    out = np.empty(time_major.shape)
    per_block = max(1, _SLICE_CELLS // max(len(time_major), 1))
    with np.errstate(all="ignore"):
        for start in range(0, len(m), per_block):
            if check is not None and start:
                check()
            block = slice(start, start + per_block)
            function(time_major[:, block], window, m.step_ms, out[:, block])
    return out.T


def _moving(function: Callable[..., np.ndarray]) -> Callable[[Matrix, int], np.ndarray]:
    def compute(m: Matrix, window: int) -> np.ndarray:
        padded = np.concatenate([np.full((len(m), window - 1), np.nan), m.values], axis=1)
        view = np.lib.stride_tricks.sliding_window_view(padded, window, axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows give NaN
            return function(view, axis=2)

    return compute


def _fill_previous(m: Matrix) -> np.ndarray:
    last = ffill_index(m.values)
    return np.where(last >= 0, np.take_along_axis(m.values, np.clip(last, 0, None), axis=1), np.nan)


def _timeshift(m: Matrix, shift: float) -> np.ndarray:
    if not abs(shift) <= _MAX_SHIFT_MS:  # NaN too
        raise QueryTypeError(f"timeshift of {shift} ms is not within ±{_MAX_SHIFT_MS} ms")
    shift_ms = int(shift)
    if shift_ms % m.step_ms:
        raise QueryTypeError(f"timeshift of {shift_ms} ms is not a multiple of the step {m.step_ms} ms")
    k = shift_ms // m.step_ms
    out = np.full_like(m.values, np.nan)
    width = m.values.shape[1]
    if 0 <= k < width:
        out[:, k:] = m.values[:, : width - k]
    elif -width < k < 0:
        out[:, :k] = m.values[:, -k:]
    return out


# name -> (needs a window, extra numeric parameters, function)
MAPPERS: dict[str, tuple[bool, int, Callable[..., np.ndarray]]] = {
    **{name: (True, 0, _prefix_window(function)) for name, function in PREFIX_WINDOWS.items()},
    "min": (True, 0, _moving(np.nanmin)),
    "max": (True, 0, _moving(np.nanmax)),
    "median": (True, 0, _moving(np.nanmedian)),
    "percentile": (True, 1, lambda m, w, q: _moving(lambda v, axis: np.nanpercentile(v, q, axis=axis))(m, w)),
    "abs": (False, 0, lambda m: np.abs(m.values)),
    "log": (False, 0, lambda m: np.log(np.where(m.values > 0, m.values, np.nan))),
    "log10": (False, 0, lambda m: np.log10(np.where(m.values > 0, m.values, np.nan))),
    "clamp": (False, 2, lambda m, lo, hi: np.clip(m.values, lo, hi)),
    "fill_previous": (False, 0, _fill_previous),
    "fill_zero": (False, 0, lambda m: np.nan_to_num(m.values, nan=0.0)),
    "timeshift": (False, 1, _timeshift),
}


def _apply_callable(
    m: Matrix, function: Callable[..., np.ndarray], window_ms: int | None, check: Callable[[], None] | None
) -> Matrix:
    """A Python function as a mapper (Artimon's closures). Without a window it gets the
    values ``[series, instants]`` and returns an array of that shape; with one it is called
    once per instant with the window's values ``[series, window]`` and returns a value per
    series: a loop over instants, never over series."""
    values = np.array(m.values, dtype=np.float64)
    with np.errstate(all="ignore"):
        if window_ms is None:
            out = np.asarray(function(values), dtype=np.float64)
        else:
            window = window_buckets(window_ms, m.step_ms, getattr(function, "__name__", "function"))
            out = np.full(values.shape, np.nan)
            for column in range(values.shape[1]):
                if check is not None and column % 64 == 0:
                    check()
                result = np.asarray(
                    function(values[:, max(0, column - window + 1) : column + 1]), dtype=np.float64
                )
                if result.shape != (len(m),):
                    raise QueryTypeError(
                        f"a mapper with a window returns one value per series, not shape {result.shape}"
                    )
                out[:, column] = result
    if out.shape != values.shape:
        raise QueryTypeError(
            f"a mapper returns an array of the values' shape {values.shape}, not {out.shape}"
        )
    return m.with_values(out)


def apply_mapper(
    m: Matrix,
    name: str | Callable[..., np.ndarray],
    window_ms: int | None = None,
    params: tuple[float, ...] = (),
    check: Callable[[], None] | None = None,
) -> Matrix:
    """``map(name, window, *params)`` over every series of ``m``; ``name`` may also be a
    Python function (:func:`_apply_callable`), as Artimon's mappers were closures.

    A window longer than the time axis is cut to it (the windows hold the same values). A
    moving ``min``, ``max``, ``median`` or ``percentile`` looks at series x instants x window
    cells (``median`` copies them), the prefix-sum windows (:mod:`query_dsl.windows`) at
    series x instants; when those pass ``_SLICE_CELLS`` the series go through in slices,
    ``check`` called before each (the evaluator's deadline: whatever it raises stops them).
    Mappers work series by series, so slices change nothing in the result."""
    if callable(name):
        if params:
            raise QueryTypeError("a Python mapper takes no parameters: close over them")
        return _apply_callable(m, name, window_ms, check) if len(m) else m
    if name not in MAPPERS:
        raise QueryTypeError(f"unknown mapper {name!r} (known: {', '.join(sorted(MAPPERS))})")
    needs_window, arity, function = MAPPERS[name]
    if len(params) != arity:
        raise QueryTypeError(f"map({name}) takes {arity} parameter(s), got {len(params)}")
    if name == "percentile" and not 0 <= params[0] <= 100:
        raise QueryTypeError(f"percentile {params[0]} is not within 0..100")
    if not len(m):
        return m
    if needs_window:
        width = max(len(m.timestamps), 1)
        window = min(window_buckets(window_ms, m.step_ms, name), width)
        per_slice = max(1, _SLICE_CELLS // (width * window))
        if name in PREFIX_WINDOWS:
            values = _time_major_blocks(m, PREFIX_WINDOWS[name], window, check)
        elif len(m) <= per_slice:
            values = function(m, window, *params)
        else:
            parts = []
            for start in range(0, len(m), per_slice):
                if check is not None:
                    check()
                rows = np.arange(start, min(start + per_slice, len(m)))
                parts.append(function(m.select(rows), window, *params))
            values = np.vstack(parts)
    else:
        if window_ms is not None:
            raise QueryTypeError(f"map({name}) takes no window")
        with np.errstate(all="ignore"):
            values = function(m, *params)
    return m.with_values(values)
