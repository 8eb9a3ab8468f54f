"""The small-answer writer (query_dsl/promql/small_body.py) writes the columnar writer's bytes
(query_dsl/promql/body.py), which are the same written whole or a block at a time, and values'
texts are Go's (``format_value``)."""

from __future__ import annotations

import numpy as np
import pytest

from query_dsl import text_rows
from query_dsl.promql import body, format_value, small_body
from query_dsl.promql.small_body import metric_texts, small_matrix_body, small_vector_body
from query_dsl.promql.texts import value_strs, value_texts
from query_dsl.series_table import SeriesTable
from query_dsl.text_rows import RowsText


def _written(text: bytes | RowsText) -> bytes:
    """A body's text written whole, checked against the same text written a block at a time."""
    if isinstance(text, bytes):
        return text
    whole = bytes(text.whole())
    for block_bytes in (1, 300, 1 << 20):  # a row a block, a few rows, all
        assert b"".join(bytes(piece) for piece in text.blocks(block_bytes)) == whole
    return whole


def matrix_body(table: SeriesTable, times: np.ndarray, values: np.ndarray, kept: np.ndarray) -> bytes:
    return _written(body.matrix_body(table, times, values, kept))


def vector_body(table: SeriesTable, time_ms: int, values: np.ndarray) -> bytes:
    return _written(body.vector_body(table, time_ms, values))


def _table(count: int) -> SeriesTable:
    names = [f"m{i % 3}" if i % 5 else "" for i in range(count)]
    labels = [
        {"instance": f"i{i % 7}", **({"le": str(i)} if i % 2 else {}), 'é"\\x': 'q"\\\n'}
        for i in range(count)
    ]
    return SeriesTable.from_lists(names, labels)


def _full_table(count: int) -> SeriesTable:
    """Every series named and with every label (the columnar writer's shorter path)."""
    return SeriesTable.from_lists(
        ["up"] * count, [{"host": f"h{i // 4}", "i": str(i % 4)} for i in range(count)]
    )


@pytest.mark.parametrize(
    ("series", "times", "seed", "full"),
    [
        (1, 61, 1, False),
        (12, 61, 2, False),
        (30, 7, 3, False),
        (5, 1, 4, False),
        (12, 61, 5, True),
        (30, 7, 6, True),
    ],
)
def test_the_small_writer_writes_the_columnar_bytes(series: int, times: int, seed: int, full: bool) -> None:
    rng = np.random.default_rng(seed)
    table = _full_table(series) if full else _table(series)
    axis = np.arange(times) * 10_000 + 1_700_000_000_123
    values = np.round(rng.normal(size=(series, times)) * 10.0 ** rng.integers(-6, 18), rng.integers(0, 5))
    values[rng.random((series, times)) < 0.1] = np.nan
    values[0, 0], values[-1, -1] = -0.0, np.inf
    kept = np.ones((series, times), dtype=bool) if full else rng.random((series, times)) < 0.9
    kept[np.arange(series), rng.integers(0, times, series)] = True  # every series has a point
    own = axis[None, :] + rng.integers(0, 1000, (series, times))
    metrics = metric_texts(table)
    assert metric_texts(table) is metrics  # made once per table
    for stamps in (axis, own, np.repeat(axis[None, :], series, axis=0)):
        expected = matrix_body(table, stamps, values, kept)
        for cells in (kept, None) if full else (kept,):  # None: every cell, as kept all true
            assert small_matrix_body(metrics, stamps, values, cells, value_strs) == expected
            for _ in range(2):  # the texts between the values made for the table, then kept
                assert small_matrix_body(metrics, stamps, values, cells, value_strs, table) == expected
    at = 1_700_000_000_500
    last = values[:, -1]
    assert small_vector_body(metrics, at, last, value_strs) == vector_body(table, at, last)
    empty = _table(0)
    assert small_vector_body(metric_texts(empty), at, last[:0], value_strs) == vector_body(
        empty, at, last[:0]
    )


@pytest.mark.parametrize("full", [False, True])
def test_the_columnar_writer_writes_the_same_bytes_whatever_its_blocks(
    full: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(7)
    series, times = 40, 9
    table = _full_table(series) if full else _table(series)
    axis = np.arange(times) * 10_000 + 1_700_000_000_123
    values = np.round(rng.normal(size=(series, times)) * 1e3, 2)
    kept = np.ones((series, times), dtype=bool) if full else rng.random((series, times)) < 0.8
    kept[np.arange(series), rng.integers(0, times, series)] = True
    own = axis[None, :] + rng.integers(0, 1000, (series, times))
    nameless = table.with_name("")  # the name an operator dropped: a column no series has

    def answers() -> list[bytes]:
        out = [
            bytes(matrix_body(t, stamps, values, kept)) for t in (table, nameless) for stamps in (axis, own)
        ]
        return out + [bytes(vector_body(t, 1_700_000_000_500, values[:, -1])) for t in (table, nameless)]

    whole = answers()
    assert whole[2] == small_matrix_body(metric_texts(nameless), axis, values, kept, value_strs)
    for block_bytes in (1, 256, 2000):  # a row a block, a few, most
        monkeypatch.setattr(text_rows, "BLOCK_BYTES", block_bytes)
        assert answers() == whole


def test_value_texts_are_go_s() -> None:
    rng = np.random.default_rng(5)
    values = np.concatenate(
        [
            rng.normal(size=5000) * 10.0 ** rng.integers(-8, 20, 5000),
            np.round(rng.normal(size=1000) * 1e6),
            [
                0.0,
                -0.0,
                np.nan,
                np.inf,
                -np.inf,
                1e16,
                -1e16,
                1e-4,
                -1e-4,
                9.999e-5,
                2.0**53,
                1e15 + 0.5,
                5e-324,
            ],
        ]
    )
    wholes = [
        np.array([3.0, 0.0, -7.0]),
        np.array([-0.0, 5.0]),
        np.array([0.0]),
        np.array([1e16 - 2, 2 - 1e16]),
    ]
    # numbers written with an exponent by repr, across the whole range (subnormals too), and
    # parts of them only: moved to positional by hand, not by numpy's Dragon4
    exponents = 10.0 ** rng.uniform(-323, 308, 3000) * rng.choice([-1.0, 1.0], 3000)
    beyond = exponents[(np.abs(exponents) >= 1e16) | (np.abs(exponents) < 1e-4)]
    odd = np.array([np.nan, -0.0, np.inf, -np.inf, 5e-324, 1e16, 1e-5])
    # whole values among fractions: a few (cut one at a time) and many (in the whole text)
    mixed = [np.array([2.5, 3.0, 0.125, 1e15]), np.where(np.arange(200) % 2, 1.5, 8.0) * np.arange(200)]
    parts = (values, values[values == np.trunc(values)], values[:0], np.array([0.5, 0.25]), *wholes, *mixed)
    for part in (*parts, exponents, beyond, odd, odd[:4]):
        expected = [format_value(v) for v in part.tolist()]
        assert value_strs(part) == expected
        texts, index = value_texts(part)
        data = texts.data.tobytes().decode()
        assert [data[texts.offsets[i] : texts.offsets[i + 1]] for i in index.tolist()] == expected


def test_the_grids_remembered_are_bounded_and_answer_as_made_anew() -> None:
    table = _full_table(3)
    values = np.arange(3 * 5, dtype=np.float64).reshape(3, 5)
    kept = np.ones(values.shape, dtype=bool)
    for first in range(small_body._GRIDS_KEPT + 10):
        axis = np.arange(5) * 10_000 + 1_700_000_000_000 + first * 1_000
        expected = matrix_body(table, axis, values, kept)
        for _ in range(2):  # made, then remembered
            assert small_matrix_body(metric_texts(table), axis, values, None, value_strs) == expected
        assert len(small_body._GRIDS) <= small_body._GRIDS_KEPT
        for _ in range(2):
            assert small_matrix_body(metric_texts(table), axis, values, None, value_strs, table) == expected
        kept_parts = table.derived("prometheus_matrix_parts", dict)
        assert len(kept_parts) <= small_body._TABLE_GRIDS_KEPT
