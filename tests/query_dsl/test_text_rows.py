"""Rows of text written by numpy (query_dsl/text_rows.py) are the rows a plain join writes:
constants, picked texts of one or of many lengths, pieces that some rows lack, fields of some
rows only, in one block of rows or many (where a padded piece runs into the next block)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from query_dsl import text_rows
from query_dsl.text_rows import Dictionary, TextRows, dictionary


def _words(rng: np.random.Generator, count: int, longest: int) -> list[bytes]:
    return [
        bytes(rng.integers(33, 127, int(rng.integers(1, longest + 1)), dtype=np.uint8)) for _ in range(count)
    ]


@pytest.mark.parametrize("block_bytes", [64, 1000, 1 << 21])
@pytest.mark.parametrize("seed", range(6))
def test_the_rows_are_a_plain_join_s(block_bytes: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_rows, "BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 400))
    fields = TextRows(rows)
    expected: list[list[bytes]] = [[] for _ in range(rows)]
    for _ in range(int(rng.integers(1, 7))):
        kind = rng.integers(0, 4)
        if kind == 0:  # a constant
            text = _words(rng, 1, 12)[0]
            fields.constant(text)
            codes: list[int | None] = [0] * rows
            texts = [text]
        elif kind == 3:  # a field of some rows only
            texts = _words(rng, int(rng.integers(1, 30)), int(rng.choice([3, 20, 90])))
            at = np.flatnonzero(rng.random(rows) < 0.4)
            picked = rng.integers(0, len(texts), len(at))
            fields.pick(dictionary(texts), picked, at=at)
            codes = [None] * rows
            for row, code in zip(at.tolist(), picked.tolist(), strict=True):
                codes[row] = code
        else:  # a text a row, of one length or many, some rows without (kind 2)
            texts = _words(rng, int(rng.integers(1, 50)), int(rng.choice([1, 8, 70])))
            picked = rng.integers(0, len(texts), rows)
            if kind == 2:
                picked[rng.random(rows) < 0.2] = -1
            fields.pick(dictionary(texts), picked)
            codes = [None if code < 0 else code for code in picked.tolist()]
        for row, code in enumerate(codes):
            if code is not None:
                expected[row].append(texts[code])
    text, starts = fields.join(b"<head>", b"|", b"<tail>")
    lines = [b"".join(parts) for parts in expected]
    assert bytes(text) == b"<head>" + b"|".join(lines) + b"<tail>"
    assert starts[0] == len(b"<head>") and starts[-1] == len(text) - len(b"<tail>")
    assert [bytes(text[a:b]) for a, b in itertools.pairwise(starts.tolist())] == [
        (b"|" if row else b"") + line for row, line in enumerate(lines)
    ]


def test_spans_of_one_buffer_are_picked_where_they_lie() -> None:
    data = np.frombuffer(b"[[1,2],[],[30]]", dtype=np.uint8)
    rows = TextRows(3)
    rows.constant(b"(")
    rows.pick(Dictionary(data, np.array([2, 8, 11]), np.array([3, 0, 2])), np.arange(3))
    rows.constant(b")")
    assert bytes(rows.join(b"", b",", b"")[0]) == b"(1,2),(),(30)"


def test_no_rows_are_the_head_and_the_tail() -> None:
    rows = TextRows(0)
    rows.constant(b"x")
    assert bytes(rows.join(b"[", b",", b"]")[0]) == b"[]"
