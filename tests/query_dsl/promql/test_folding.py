"""Operators between numbers only are evaluated once per expression and number of
evaluation times (query_dsl/promql/folding.py): the value remembered is bit for bit the
walk's, and each query gets an array of its own."""

from __future__ import annotations

import numpy as np

from query_dsl.promql import folding, parse
from query_dsl.promql.engine import Engine
from query_dsl.promql.values import Scalar

CONSTANTS = [
    "1 * 2 + 4 / 6 - (10 % 7) ^ 2",
    "-(2 ^ 0.5) * 3 % 1.7",
    "(0.1 + 0.2)",
    "2 ^ -1074 / 3",
    "1 > bool 2",
]


def _value(text: str, steps: int) -> np.ndarray:
    engine = Engine(None, 0, (steps - 1) * 10_000, 10_000)  # type: ignore[arg-type]  # no selector: no source
    value = engine.evaluate(parse(text))
    assert isinstance(value, Scalar)
    return value.values


def test_numbers_only_are_folded_once_bit_for_bit() -> None:
    assert all(folding.constant(parse(text)) for text in CONSTANTS)
    assert not folding.constant(parse("1 + time()")) and not folding.constant(parse("2 * up"))
    for text in CONSTANTS:
        folding._VALUES.clear()
        walked = _value(text, 61)  # the walk's, then remembered
        again = _value(text, 61)
        assert again.tobytes() == walked.tobytes() and again is not walked
        again[:] = 0.0  # a query's own array: the remembered value stays
        assert _value(text, 61).tobytes() == walked.tobytes()
        assert _value(text, 7).tobytes() == walked[:7].tobytes()  # another length: walked again
    assert _value("1 * 2 + 4 / 6 - (10 % 7) ^ 2", 3).tolist() == [2 + 4 / 6 - 9] * 3
    assert len(folding._VALUES) <= folding.KEPT
