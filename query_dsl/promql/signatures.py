"""PromQL's value types and the signature of every function: what the parser checks before
anything runs (Prometheus refuses ``rate(x)`` or ``abs(x[5m])`` as bad data, not at run time).

A signature is the argument types, how many trailing arguments may be left out (or
``VARIADIC``: the last type repeats any number of times) and the result type.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MATRIX", "SCALAR", "SIGNATURES", "STRING", "VARIADIC", "VECTOR", "Signature"]

SCALAR, VECTOR, MATRIX, STRING = "scalar", "vector", "matrix", "string"
VARIADIC = -1


@dataclass(frozen=True)
class Signature:
    args: tuple[str, ...]
    returns: str
    optional: int = 0  # how many trailing arguments may be left out, or VARIADIC


def _simple(*names: str) -> dict[str, Signature]:
    return {name: Signature((VECTOR,), VECTOR) for name in names}


def _over_time(*names: str) -> dict[str, Signature]:
    return {name: Signature((MATRIX,), VECTOR) for name in names}


def _dates(*names: str) -> dict[str, Signature]:
    return {name: Signature((VECTOR,), VECTOR, optional=1) for name in names}


SIGNATURES: dict[str, Signature] = {
    **_simple(
        "abs",
        "ceil",
        "floor",
        "exp",
        "sqrt",
        "ln",
        "log2",
        "log10",
        "sgn",
        "timestamp",
        "sort",
        "sort_desc",
        "absent",
        "deg",
        "rad",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
    ),
    **_over_time(
        "rate",
        "irate",
        "increase",
        "delta",
        "idelta",
        "deriv",
        "changes",
        "resets",
        "avg_over_time",
        "min_over_time",
        "max_over_time",
        "sum_over_time",
        "count_over_time",
        "last_over_time",
        "stddev_over_time",
        "stdvar_over_time",
        "present_over_time",
        "absent_over_time",
    ),
    **_dates(
        "day_of_month", "day_of_week", "day_of_year", "days_in_month", "hour", "minute", "month", "year"
    ),
    "quantile_over_time": Signature((SCALAR, MATRIX), VECTOR),
    "predict_linear": Signature((MATRIX, SCALAR), VECTOR),
    "holt_winters": Signature((MATRIX, SCALAR, SCALAR), VECTOR),
    "clamp": Signature((VECTOR, SCALAR, SCALAR), VECTOR),
    "clamp_max": Signature((VECTOR, SCALAR), VECTOR),
    "clamp_min": Signature((VECTOR, SCALAR), VECTOR),
    "round": Signature((VECTOR, SCALAR), VECTOR, optional=1),
    "histogram_quantile": Signature((SCALAR, VECTOR), VECTOR),
    "label_replace": Signature((VECTOR, STRING, STRING, STRING, STRING), VECTOR),
    "label_join": Signature((VECTOR, STRING, STRING, STRING), VECTOR, optional=VARIADIC),
    "scalar": Signature((VECTOR,), SCALAR),
    "vector": Signature((SCALAR,), VECTOR),
    "time": Signature((), SCALAR),
    "pi": Signature((), SCALAR),
}
