"""Rows of text written field by field into one buffer by numpy: how the wide answers
(``query_dsl.promql.body``, ``query_dsl.http.answer``) are written with no Python object per
row and no pyarrow in the serving process (issue 27).

Every row is the same fields in order; a field is, per row, one text of a dictionary (a
constant, a label's ``"k":"v"`` picked by its code, a value's text) or nothing (code -1).
The rows' lengths are summed first, so every piece's place is known, then the fields are
written a block of rows at a time (``BLOCK_BYTES`` of text: the rows being written stay in
the cache), each field's pieces of the block by a few numpy copies of fixed-size items
(``V<size>``, read and written over byte strides: ``_items``):

- **padded**: a field whose every row has a short piece (a label's ``"k":"v"``, a value's
  text) is one copy of its widest size, each piece followed by what follows it in the
  dictionary, when every such item ends before the next padded piece begins
  (``_padded_fields``); what the items cover past their piece is another field's, written
  exactly after them;
- **exact**: the others' pieces grouped by length, a copy per length (a pass each for a few
  lengths, one stable sort for many).

No two copies of one kind meet, so the order in which numpy makes the items of one copy
does not matter.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["Dictionary", "RowsText", "TextRows", "dictionary"]

BLOCK_BYTES = 1 << 21  # text written per block of rows (a few MiB: the cache's)
_FEW_LENGTHS = 12  # up to this many lengths in a field's block: a pass each, else one sort
_WIDEST = 64  # a field of texts up to this long may be written padded (see _padded_fields)


class Dictionary:
    """Texts in one buffer, text ``i`` ``data[starts[i]:starts[i] + sizes[i]]`` (spans in any
    order, maybe with bytes between them): what a field's codes pick from (made once, picked
    by many fields)."""

    __slots__ = ("_padded", "data", "narrowest", "sizes", "starts", "widest")

    def __init__(self, data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
        self.data = data  # uint8
        self.starts = starts  # int64
        self.sizes = sizes  # int64
        self.widest = int(sizes.max()) if len(sizes) else 0
        self.narrowest = int(sizes.min()) if len(sizes) else 0
        self._padded: np.ndarray | None = None

    @classmethod
    def of(cls, data: np.ndarray, offsets: np.ndarray) -> Dictionary:
        """Texts one after another: text ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""
        return cls(data, offsets[:-1], np.diff(offsets))

    def padded(self) -> np.ndarray:
        """``data`` and ``widest`` bytes more (each text can be read as ``widest`` bytes)."""
        if self._padded is None:
            self._padded = np.concatenate([self.data, np.zeros(self.widest, dtype=np.uint8)])
        return self._padded


def dictionary(texts: list[bytes]) -> Dictionary:
    """``texts`` as a :class:`Dictionary`."""
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    return Dictionary.of(np.frombuffer(b"".join(texts), dtype=np.uint8), offsets)


@dataclass(frozen=True, slots=True)
class _Field:
    texts: Dictionary
    codes: np.ndarray | None  # per row its text (-1: none); None: text 0 in every row
    at: np.ndarray | None  # the rows that have the field (ascending), a code each; None: every row
    absent: bool  # whether a code is -1
    uniform: bool  # every piece as long, ``texts.widest``

    @classmethod
    def of(cls, texts: Dictionary, codes: np.ndarray | None, at: np.ndarray | None) -> _Field:
        absent = codes is not None and bool((codes < 0).any())
        uniform = not absent and (codes is None or texts.widest == texts.narrowest)
        return cls(texts, codes, at, absent, uniform)

    def _codes(self, codes: np.ndarray, rows: slice) -> tuple[np.ndarray, np.ndarray | slice]:
        """The codes of the pieces in ``rows`` and which of ``rows`` they are in."""
        if self.at is None:
            return codes[rows], slice(None)
        low, high = np.searchsorted(self.at, [rows.start, rows.stop]).tolist()
        return codes[low:high], self.at[low:high] - rows.start

    def _lengths(self, codes: np.ndarray) -> np.ndarray | int:
        if self.uniform:
            return self.texts.widest
        sizes = self.texts.sizes
        return np.where(codes < 0, 0, sizes[codes]) if self.absent else sizes[codes]

    def lengths(self, rows: slice) -> tuple[np.ndarray | slice, np.ndarray | int]:
        """Which of ``rows`` have a piece and the pieces' lengths (an int when all as long)."""
        if self.codes is None or (self.uniform and self.at is None):
            return slice(None), self.texts.widest
        codes, where = self._codes(self.codes, rows)
        return where, self._lengths(codes)

    def pieces(self, rows: slice) -> tuple[np.ndarray | slice, np.ndarray | int, np.ndarray | int]:
        """:meth:`lengths` and the pieces' starts in the texts (an int for a constant)."""
        if self.codes is None:
            return slice(None), self.texts.widest, 0
        codes, where = self._codes(self.codes, rows)
        return where, self._lengths(codes), self.texts.starts[codes]

    def write_padded(self, out: np.ndarray, places: np.ndarray, begins: np.ndarray | int) -> None:
        """Each piece as ``widest`` bytes: the piece and what follows it in the texts."""
        widest = self.texts.widest
        _items(out, widest)[places] = _items(self.texts.padded(), widest)[begins]

    def write(
        self, out: np.ndarray, places: np.ndarray, lengths: np.ndarray | int, begins: np.ndarray | int
    ) -> None:
        """Each piece exactly."""
        data = self.texts.data
        if isinstance(lengths, int):
            if lengths and len(places):
                _items(out, lengths)[places] = _items(data, lengths)[begins]
        else:
            _copy(out, places, data, np.broadcast_to(begins, lengths.shape), lengths)


def _items(buffer: np.ndarray, size: int) -> np.ndarray:
    """``buffer`` (uint8) as items of ``size`` bytes starting at every byte (overlapping)."""
    return np.ndarray((len(buffer) - size + 1,), dtype=f"V{size}", buffer=buffer, strides=(1,))


def _copy(
    out: np.ndarray, places: np.ndarray, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> None:
    """``data[starts[i]:starts[i] + lengths[i]]`` to ``out[places[i]:...]`` for every ``i``."""
    counts = np.bincount(lengths)
    present = np.flatnonzero(counts[1:]) + 1
    if len(present) == 1 and counts[present[0]] == len(lengths):
        size = int(present[0])
        _items(out, size)[places] = _items(data, size)[starts]
        return
    sizes = present.tolist()
    if len(sizes) > _FEW_LENGTHS:
        order, bounds = np.argsort(lengths, kind="stable"), np.cumsum(counts)
        groups = [order[bounds[size - 1] : bounds[size]] for size in sizes]
    else:
        groups = [np.flatnonzero(lengths == size) for size in sizes]
    for size, chosen in zip(sizes, groups, strict=True):
        _items(out, size)[places[chosen]] = _items(data, size)[starts[chosen]]


_Plan = tuple[_Field, np.ndarray, np.ndarray | int, np.ndarray | int]  # a field's places, lengths, starts


def _padded_fields(plans: list[_Plan]) -> list[int]:
    """Which fields of a block are written padded: each row has a piece of the field, short
    and of more than one length, and each piece's ``widest`` bytes end before the next padded
    piece begins (what they cover of other pieces is written exactly after them; of the next
    block, with it): no two padded writes meet, so their order does not matter either."""
    chosen = [
        number
        for number, (field, _, lengths, _) in enumerate(plans)
        if field.codes is not None
        and field.at is None
        and 0 < field.texts.widest <= _WIDEST
        and not isinstance(lengths, int)
        and len(lengths)
        and 0 < int(lengths.min()) < field.texts.widest  # all of one length: one exact copy
    ]
    if not chosen:
        return []
    places = [plans[number][1] for number in chosen]
    fits = []
    for index, number in enumerate(chosen):
        if index + 1 < len(chosen):
            room = places[index + 1] - places[index]
        else:  # the next row's first padded piece
            room = np.append(places[0][1:], places[index][-1] + _WIDEST) - places[index]
        fits.append(bool((room >= plans[number][0].texts.widest).all()))
    return [number for number, fit in zip(chosen, fits, strict=True) if fit]


class TextRows:
    """``rows`` rows of text, their fields added in order (:meth:`constant`, :meth:`pick`),
    written by :meth:`join`."""

    def __init__(self, rows: int) -> None:
        self._rows = rows
        self._fields: list[_Field] = []

    def constant(self, text: bytes) -> None:
        """The same ``text`` in every row (one field with a constant before it)."""
        last = self._fields[-1] if self._fields else None
        if last is not None and last.codes is None:
            text = last.texts.data.tobytes() + text
            self._fields.pop()
        self._fields.append(_Field.of(dictionary([text]), None, None))

    def pick(self, texts: Dictionary, codes: np.ndarray, at: np.ndarray | None = None) -> None:
        """Text ``codes[i]`` of ``texts`` in each row (in row ``at[i]`` when ``at`` names the
        rows that have the field, ascending), none where the code is -1."""
        if not len(texts.sizes):  # every code is -1
            return
        field = _Field.of(texts, codes, at)
        if len(texts.sizes) == 1 and at is None and not field.absent:  # the same text in every row
            self.constant(texts.data[texts.starts[0] : texts.starts[0] + texts.sizes[0]].tobytes())
        else:
            self._fields.append(field)

    def join(self, head: bytes, between: bytes, tail: bytes) -> tuple[memoryview, np.ndarray]:
        """``head``, the rows with ``between`` between two, ``tail``: the text, and where each
        row begins in it (its ``between`` first) and the last ends (``rows + 1`` offsets)."""
        text = self.laid_out(head, between, tail)
        return text.whole(), text.starts

    def laid_out(self, head: bytes, between: bytes, tail: bytes) -> RowsText:
        """The text :meth:`join` writes, laid out (each row's place and the size known) and
        not yet written."""
        ends = np.full(self._rows, len(between), dtype=np.int64)
        ends[:1] = 0
        every = slice(0, self._rows)
        for field in self._fields:
            where, lengths = field.lengths(every)
            ends[where] += lengths  # an ``at`` is ascending: no row twice
        np.cumsum(ends, out=ends)
        starts = np.concatenate([np.zeros(1, dtype=np.int64), ends]) + len(head)
        return RowsText(self._fields, starts, head, between, tail)


class RowsText:
    """The text of :meth:`TextRows.join` laid out: ``size`` bytes, row ``i`` (its ``between``
    first) from ``starts[i]`` to ``starts[i + 1]``, between ``head`` and ``tail``. Written
    whole (:meth:`whole`), or a block of rows at a time into buffers of their own
    (:meth:`blocks`: a wide answer sent as it is written, never whole)."""

    __slots__ = ("_fields", "_gaps", "between", "head", "size", "starts", "tail")

    def __init__(
        self, fields: list[_Field], starts: np.ndarray, head: bytes, between: bytes, tail: bytes
    ) -> None:
        self._fields = fields
        self._gaps = _Field.of(dictionary([between]), None, None)
        self.starts = starts
        self.head, self.between, self.tail = head, between, tail
        self.size = int(starts[-1]) + len(tail)

    def wrapped(self, prefix: bytes, suffix: bytes) -> RowsText:
        """This text with ``prefix`` before it and ``suffix`` after it (an envelope)."""
        head, tail = prefix + self.head, self.tail + suffix
        return RowsText(self._fields, self.starts + len(prefix), head, self.between, tail)

    def whole(self) -> memoryview:
        """The text, written in one buffer."""
        return self._written(0, len(self.starts) - 1)

    def blocks(self, block_bytes: int) -> Iterator[memoryview]:
        """The text in pieces of about ``block_bytes`` (whole rows; the first with ``head``,
        the last with ``tail``), each written when it is asked for, in a buffer of its own."""
        rows = len(self.starts) - 1
        step = max(1, block_bytes // max(1, int(self.starts[-1] - self.starts[0]) // max(1, rows)))
        for low in range(0, max(rows, 1), step):
            yield self._written(low, min(rows, low + step))

    def _written(self, low: int, high: int) -> memoryview:
        """Rows ``low`` to ``high`` written (``head`` before row 0, ``tail`` after the last)."""
        rows = len(self.starts) - 1
        begin = int(self.starts[low]) if low else 0
        end = int(self.starts[high]) if high < rows else self.size
        out = np.empty(end - begin + _WIDEST, dtype=np.uint8)  # room for the last padded piece
        if not low:
            out[: len(self.head)] = np.frombuffer(self.head, dtype=np.uint8)
        width = max(1, int(self.starts[-1] - self.starts[0]) // max(1, rows))
        step = max(1, BLOCK_BYTES // width)
        for first in range(low, high, step):
            self._write(out, begin, slice(first, min(high, first + step)))
        if high == rows:  # after the rows: the last padded piece may run over its place
            out[end - begin - len(self.tail) : end - begin] = np.frombuffer(self.tail, dtype=np.uint8)
        return out.data[: end - begin]

    def _write(self, out: np.ndarray, origin: int, rows: slice) -> None:
        """``rows`` (a block: a few MiB of text) into ``out``, which begins at ``origin``."""
        places = self.starts[rows] - origin
        later = slice(1 if rows.start == 0 else 0, None)  # no ``between`` before the first row
        plans: list[_Plan] = [(self._gaps, places[later].copy(), len(self.between), 0)]
        places[later] += len(self.between)
        for field in self._fields:
            where, lengths, begins = field.pieces(rows)
            plans.append((field, places[where].copy(), lengths, begins))
            places[where] += lengths
        padded = _padded_fields(plans)
        for number in padded:
            field, at, _, begins = plans[number]
            field.write_padded(out, at, begins)
        for number, (field, at, lengths, begins) in enumerate(plans):
            if number not in padded:
                field.write(out, at, lengths, begins)
