"""Values' texts (query_dsl/promql/texts.py) are numpy's shortest positional formatting, Go's
``strconv.FormatFloat(v, 'f', -1, 64)``, byte for byte: one at a time and by arrays, for
values of every exponent."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from query_dsl.promql.texts import value_strs, value_texts

# enough values for the array path (fewer are written one at a time)
MANY = 200


def _reference(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return np.format_float_positional(value, unique=True, trim="-")


def _check(values: np.ndarray) -> None:
    expected = [_reference(v) for v in values.tolist()]
    assert value_strs(values) == expected
    texts, index = value_texts(values)
    data = texts.data.tobytes().decode()
    assert [data[texts.offsets[i] : texts.offsets[i + 1]] for i in index.tolist()] == expected


def _edges() -> np.ndarray:
    """Subnormals, the normals' edge, 2^53 +- 1, 2^63, the largest, powers of ten and their
    neighbours, values whose shortest text has 17 digits, each also negative."""
    tens = 10.0 ** np.arange(-323, 309)
    powers = 2.0 ** np.arange(-1074, 1024)
    centres = np.concatenate(
        [
            tens,
            powers,
            [5e-324, 2.2250738585072014e-308, 2.0**53 - 1, 2.0**53 + 2, 2.0**63, 2.0**64, 1e23, 1e22],
            [1.7976931348623157e308, 1e-4, 1e16, 0.1 + 0.2, 2.0 / 3.0, 1.2345678901234567e-300],
        ]
    )
    with np.errstate(over="ignore"):
        around = np.concatenate([centres, np.nextafter(centres, 0), np.nextafter(centres, np.inf)])
    around = around[np.isfinite(around) & (around != 0)]
    return np.concatenate([around, -around, [0.0, -0.0, np.nan, np.inf, -np.inf]])


def test_edges_are_numpy_s() -> None:
    _check(_edges())


def test_random_bit_patterns_are_numpy_s() -> None:
    rng = np.random.default_rng(27)
    values = rng.integers(0, 2**64, 30_000, dtype=np.uint64).view(np.float64)
    _check(values)
    magnitude = np.abs(values)
    outside = values[(magnitude >= 1e16) | (magnitude < 1e-4)]
    _check(outside)
    for count in (47, 61, 95, 96, 97):  # one at a time below texts._FEW, by arrays from it
        _check(outside[:count])


def test_many_of_one_kind() -> None:
    for value in (np.nan, np.inf, -0.0, 1e300, -3e-310, 12345e16, 0.00001):
        _check(np.full(MANY, value))
    _check(np.array([], dtype=np.float64))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(), min_size=1, max_size=40))
def test_any_floats_are_numpy_s(values: list[float]) -> None:
    _check(np.array(values, dtype=np.float64))
    _check(np.resize(np.array(values, dtype=np.float64), MANY))


def test_arrays_of_one_class_and_their_edges() -> None:
    """What the few reductions tell (every value whole, or every one a fraction of one
    sign and 10^-4 or more) and the arrays just outside it."""
    rng = np.random.default_rng(5)
    fractions = rng.uniform(1e-4, 1e9, MANY) + 0.5
    for values in (fractions, -fractions, np.round(fractions), -np.round(fractions)):
        _check(values)
        for edge in (1e-4, np.nextafter(1e-4, 0), 0.0, -0.0, 3.0, -2.5, 1e16, np.nextafter(1e16, 0), np.nan):
            _check(np.append(values, edge))


def test_whole_values_among_fractions() -> None:
    """Whole values and fractions together (a product of gauges, a rate with zeros): the
    floats' texts with the whole ones' ``.0`` dropped, up to 10^16 and from 10^-4."""
    rng = np.random.default_rng(9)
    fractions = rng.uniform(1e-4, 1e6, MANY) + 0.25
    wholes = np.array([0.0, 1.0, 2.0**53, 2.0**53 + 2, 9999999999999998.0, 1e15, 123456789012345.0, 7.0])
    for values in (fractions, -fractions):
        for picked in (wholes, -wholes[1:], wholes[:1], np.array([1e-4, 1e16, -0.0, 5e-5, np.nan, np.inf])):
            for edge in picked:
                _check(np.append(values, edge))
                _check(np.insert(values, 7, edge))
        _check(np.concatenate([values, wholes]))
        _check(np.concatenate([wholes, values, wholes]))
