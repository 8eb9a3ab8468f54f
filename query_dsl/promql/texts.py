"""Values and times as Prometheus's JSON writes them: a value as Go's
``strconv.FormatFloat(v, 'f', -1, 64)`` with ``+Inf``/``-Inf``/``NaN`` (:func:`format_value`), a
time (ms) as seconds, a whole number without a fraction.

Go's text is Python's where it matters most: ``str`` of the integer for a whole number,
``repr`` for another without an exponent (10^-4 <= |v| < 10^16), and both are what orjson
writes over a numpy array in one C loop (checked on millions of values; an exponent, which
neither writes in that range, sends its values to ``repr``). Outside that range Go writes the
same shortest digits positionally: orjson's digits (one C loop, where ``repr`` and numpy's
positional formatting spend most of a microsecond per value) moved by their exponent with
numpy over the text's bytes (:func:`_positional`); NaN, infinities and -0 are constants. Two
forms: :func:`value_strs`, a ``str`` each (small answers), and :func:`value_texts`, every text
in one buffer with its offsets (wide answers: no Python object per value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import orjson

__all__ = ["Texts", "format_value", "second_texts", "value_strs", "value_texts"]

_COMMA = ord(",")
_ZERO = ord("0")
# what :func:`_positional` copies the "0." and zeros around the digits from (5e-324: 323 zeros)
_ZEROS = b"0." + b"0" * 330
# fewer values than this outside 10^-4 <= |v| < 10^16 are written one at a time (the point
# moved in a Python str, about 0.47 us each; the arrays' way costs 43 us for 48 values, 49 for
# 100, 64 for 200: one at a time is cheaper up to about 100, a range query's 61 steps among them)
_FEW = 96
# and more than this by parts (the arrays of a part stay in the cache: twice as fast at 20,000)
_CHUNK = 1024
# mixed whole values and fractions: at most this many whole ones are cut one at a time
_FEW_WHOLE = 64
# NaN, +Inf, -Inf and -0 by a code each (see _special_codes)
_SPECIAL = np.array(["NaN", "+Inf", "-Inf", "-0"], dtype=object)


def format_value(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'f', -1, 64)`` with Prometheus's ``+Inf``/``-Inf``/``NaN``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return np.format_float_positional(value, trim="-")


@dataclass(frozen=True, slots=True)
class Texts:
    """Texts in one buffer: text ``i`` is ``data[offsets[i]:offsets[i + 1]]`` (ASCII)."""

    data: np.ndarray  # uint8
    offsets: np.ndarray  # int64, one more than the texts, the first 0

    @classmethod
    def of(cls, texts: list[str]) -> Texts:
        """From a ``str`` each (ASCII)."""
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
        return cls(np.frombuffer("".join(texts).encode(), dtype=np.uint8), offsets)

    @classmethod
    def join(cls, parts: list[Texts]) -> Texts:
        """The texts of ``parts``, one after another."""
        starts = np.cumsum([0, *(len(part.data) for part in parts)])[:-1].tolist()
        offsets = [np.zeros(1, dtype=np.int64)]
        offsets += [part.offsets[1:] + start for part, start in zip(parts, starts, strict=True)]
        return cls(
            np.concatenate([np.zeros(0, np.uint8), *(part.data for part in parts)]), np.concatenate(offsets)
        )

    def __len__(self) -> int:
        return len(self.offsets) - 1


def _numbers(values: np.ndarray) -> bytes:
    """orjson's text of ``values`` (int64, or float64 that are not whole): ``[a,b,...]``."""
    return orjson.dumps(np.ascontiguousarray(values), option=orjson.OPT_SERIALIZE_NUMPY)


def _split(text: bytes, count: int) -> Texts:
    """orjson's ``[a,b,...]`` of ``count`` numbers as their texts (the commas dropped)."""
    raw = np.frombuffer(text, dtype=np.uint8)[1:-1]
    separator = raw == _COMMA
    commas = np.flatnonzero(separator)
    offsets = np.empty(count + 1, dtype=np.int64)
    offsets[0], offsets[-1] = 0, len(raw) - len(commas)
    offsets[1:-1] = commas - np.arange(len(commas))
    return Texts(raw[~separator], offsets)


def _classes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``values`` are written as integers (whole, |v| < 10^16, not -0) and which by
    ``repr`` (not whole, 10^-4 <= |v| < 10^16); the rest are neither."""
    magnitude = np.abs(values)
    with np.errstate(invalid="ignore"):
        plain = ((magnitude >= 1e-4) & (magnitude < 1e16)) | ((values == 0) & ~np.signbit(values))
        whole = plain & (values == np.trunc(values))
    return whole, plain & ~whole


def _integer_texts(values: np.ndarray) -> Texts:
    return _split(_numbers(values.astype(np.int64)), len(values)) if len(values) else Texts.of([])


def _fraction_texts(values: np.ndarray) -> Texts:
    if not len(values):
        return Texts.of([])
    text = _numbers(values)
    if b"e" in text:
        return Texts.of(list(map(repr, values.tolist())))
    return _split(text, len(values))


def _positional(values: np.ndarray) -> bytes:
    """Go's texts of ``values`` (float64, |v| >= 10^16 or 0 < |v| < 10^-4) as ``[a,b,...]``:
    orjson's shortest digits, copied in pieces with the decimal point moved by the exponent
    (``-1.2345e+16`` as ``-`` ``1`` ``2345`` and 12 zeros, ``5e-324`` as ``0.`` and 323 zeros
    then ``5``); a text orjson writes without an exponent (``0.00001``) is Go's already. At most
    ``_CHUNK`` values (:func:`_gather`'s positions are int32)."""
    text = _numbers(values)
    raw = np.frombuffer(text + _ZEROS, dtype=np.uint8)
    zeros = len(text)
    ends = np.append(np.flatnonzero(raw[:zeros] == _COMMA), zeros - 1)
    starts = np.concatenate([[1], ends[:-1] + 1])
    # each text's pieces (a start in raw, a length): the whole text and its comma, or six
    piece_starts = np.zeros((len(values), 6), dtype=np.int64)
    lengths = np.zeros((len(values), 6), dtype=np.int64)
    piece_starts[:, 0], lengths[:, 0] = starts, ends + 1 - starts
    marks = np.flatnonzero(raw[:zeros] == ord("e"))
    if len(marks):
        owners = np.searchsorted(ends, marks)
        piece_starts[owners], lengths[owners] = _exponent_pieces(
            raw, starts[owners], marks, ends[owners], zeros
        )
    return _gather(raw, np.append(0, piece_starts), np.append(1, lengths))


def _exponent_pieces(
    raw: np.ndarray, starts: np.ndarray, marks: np.ndarray, ends: np.ndarray, zeros: int
) -> tuple[np.ndarray, np.ndarray]:
    """The six pieces (starts, lengths) of each text with an exponent (``marks``: its "e"): the
    sign, "0." and the zeros before the digits (from ``zeros``), the first digit, the digits
    after the point, the zeros after them, the comma (or "]")."""
    first = starts + (raw[starts] == ord("-"))
    at = ends[:, None] - np.arange(3, 0, -1)
    written = raw[at].astype(np.int64) - _ZERO
    written[at <= marks[:, None] + 1] = 0  # the exponent's sign and before: not its digits
    exponent = written @ np.array([100, 10, 1])
    exponent[raw[marks + 1] == ord("-")] *= -1
    after = np.maximum(marks - first - 2, 0)  # the digits after the point (none: "5e-324")
    small = exponent < 0
    piece_starts = np.empty((len(marks), 6), dtype=np.int64)
    lengths = np.ones((len(marks), 6), dtype=np.int64)
    piece_starts[:, 0], lengths[:, 0] = starts, first - starts
    piece_starts[:, 1], lengths[:, 1] = zeros, np.where(small, 1 - exponent, 0)
    piece_starts[:, 2] = first
    piece_starts[:, 3], lengths[:, 3] = first + 2, after
    piece_starts[:, 4], lengths[:, 4] = zeros + 2, np.where(small, 0, exponent - after)
    piece_starts[:, 5] = ends
    return piece_starts, lengths


def _gather(raw: np.ndarray, piece_starts: np.ndarray, lengths: np.ndarray) -> bytes:
    """The pieces ``raw[start:start + length]`` (some empty) one after another, by one index:
    each piece's shift repeated over its length, plus the position (int32: a part of
    ``_CHUNK`` values is far below 2^31 bytes, and int32 takes a quarter of int64's time)."""
    ends = np.cumsum(lengths)
    shifts = (piece_starts - ends + lengths).astype(np.int32)
    return raw[np.repeat(shifts, lengths) + np.arange(int(ends[-1]), dtype=np.int32)].tobytes()


def _special_codes(values: np.ndarray) -> np.ndarray:
    """The index in ``_SPECIAL`` of each of ``values`` (NaN, infinities, -0)."""
    return np.where(np.isnan(values), 0, np.where(values == np.inf, 1, np.where(values == -np.inf, 2, 3)))


def _rest_strs(values: np.ndarray) -> list[str]:
    """:func:`format_value` of each of ``values`` (NaN, infinities, -0 and those outside
    10^-4 <= |v| < 10^16: the values :func:`_classes` leaves)."""
    written = np.isfinite(values) & (values != 0)
    if written.all():
        return _positional_strs(values)
    out = _SPECIAL[_special_codes(values)]
    if written.any():
        out[written] = _positional_strs(values[written])
    texts: list[str] = out.tolist()
    return texts


def _positional_strs(values: np.ndarray) -> list[str]:
    """:func:`_positional`'s texts, a ``str`` each, by parts of ``_CHUNK`` values; fewer than
    ``_FEW`` values by :func:`_positional_text` over orjson's digits, one ``str`` at a time."""
    if len(values) < _FEW:
        return list(map(_positional_text, _numbers(values).decode()[1:-1].split(",")))
    return [
        text
        for start in range(0, len(values), _CHUNK)
        for text in _positional(values[start : start + _CHUNK]).decode()[1:-1].split(",")
    ]


def value_texts(values: np.ndarray) -> tuple[Texts, np.ndarray]:
    """:func:`format_value` of each of ``values`` (1-D): the texts, and the index of each
    value's text among them (the texts are grouped by how they are written)."""
    whole, fraction = _classes(values)
    if whole.all():
        return _integer_texts(values), np.arange(len(values))
    if fraction.all():
        return _fraction_texts(values), np.arange(len(values))
    rest = ~(whole | fraction)
    texts = Texts.join(
        [
            _integer_texts(values[whole]),
            _fraction_texts(values[fraction]),
            Texts.of(_rest_strs(values[rest])),
        ]
    )
    index = np.empty(len(values), dtype=np.int64)
    start = 0
    for group in (whole, fraction, rest):
        count = int(group.sum())
        index[group] = np.arange(start, start + count)
        start += count
    return texts, index


def second_texts(times_ms: np.ndarray) -> tuple[Texts, np.ndarray]:
    """Times (ms, int64, 1-D) as seconds as JSON writes them (``repr`` of ``ms // 1000`` when
    whole, of ``ms / 1000`` else), as :func:`value_texts` answers."""
    return value_texts(times_ms / 1000)


def value_strs(values: np.ndarray) -> list[str]:
    """:func:`format_value` of each of ``values`` (1-D), a ``str`` each."""
    kind, ints = _one_class(values)
    if kind == "whole":
        return _numbers(ints).decode()[1:-1].split(",")
    if kind == "fraction":
        return _fraction_strs(values)
    mixed = _mixed_strs(values, ints) if kind == "mixed" else None
    if mixed is not None:
        return mixed
    if kind is None and np.isnan(values).all():  # NaN samples only (ln or sqrt of negatives)
        return ["NaN"] * len(values)
    whole, fraction = _classes(values)
    if whole.all():
        return _integer_strs(values)
    if fraction.all():
        return _fraction_strs(values)
    rest = ~(whole | fraction)
    if rest.all():
        return _rest_strs(values)
    out = np.empty(len(values), dtype=object)
    out[whole] = _integer_strs(values[whole])
    out[fraction] = _fraction_strs(values[fraction])
    out[rest] = _rest_strs(values[rest])
    texts: list[str] = out.tolist()
    return texts


def _positional_text(text: str) -> str:
    """orjson's text of a number of 10^16 or more or under 10^-4 (``-1.25e-7``, ``1e+16``,
    ``0.00001``: one digit before the point where it writes an exponent) without an exponent
    (``-0.000000125``, ``10000000000000000``), as Go's ``FormatFloat(v, 'f', -1, 64)``."""
    mantissa, e, exponent = text.partition("e")
    if not e:  # written without one already (0.00001): Go's text
        return text
    whole, _, fraction = mantissa.partition(".")
    sign = "-" if whole[0] == "-" else ""
    power = int(exponent)
    if power >= 0:  # 16 or more: past the digits of any fraction
        return whole + fraction + "0" * (power - len(fraction))
    return sign + "0." + "0" * (-power - 1) + whole[len(sign) :] + fraction


def _one_class(values: np.ndarray) -> tuple[str | None, np.ndarray]:
    """``whole`` where every one of ``values`` is written as an integer, ``fraction`` where
    every one by ``repr`` (:func:`_classes`' two classes), ``mixed`` where each is one or the
    other; told by a few reductions where none is NaN, infinite, -0, past 10^16 or under
    10^-4 but 0 (gauges of bytes, counters, rates): what the many masks of ``_classes``
    would say; else None (ask them). With it, ``values`` as int64 where that is exact (whole,
    under 10^16; truncated else)."""
    if not len(values):
        return None, values
    # the ufuncs' reductions and a count called straight: ``min()``, ``all()`` and ``any()`` go
    # through numpy's Python wrappers, most of their cost on a small answer's values
    low, high = float(np.minimum.reduce(values)), float(np.maximum.reduce(values))  # NaN if any is
    if not (low > -1e16 and high < 1e16):
        return None, values
    ints = values.astype(np.int64)
    whole = ints == values  # exact under 10^16: a whole value's integer, a fraction's truncated
    wholes = np.count_nonzero(whole)
    if wholes == len(values):
        plus = low > 0 or high < 0 or not np.signbit(values[values == 0]).any()
        return ("whole" if plus else None), ints
    if not (low >= 1e-4 or high <= -1e-4):  # some may lie under 10^-4: only +0 may
        tiny = np.abs(values) < 1e-4
        if tiny.any() and ((values[tiny] != 0).any() or np.signbit(values[tiny]).any()):
            return None, ints
    return ("mixed" if wholes else "fraction"), ints


def _mixed_strs(values: np.ndarray, ints: np.ndarray) -> list[str] | None:
    """The texts of whole values and fractions (:func:`_one_class`'s ``mixed``, ``ints`` its
    int64 of them): orjson's text of every one as a float, the whole ones' ``.0`` dropped
    (the shortest digits of a float under 10^16 that is whole are its integer's); None where
    orjson writes an exponent. A few whole ones are cut one at a time: a ``bytes.replace``
    of the whole text cost 10 us for 732 values, a cut 0.1."""
    text = _numbers(values)
    if b"e" in text:
        return None
    whole = np.flatnonzero(ints == values)
    if len(whole) > _FEW_WHOLE:
        return text[1:-1].replace(b".0,", b",").removesuffix(b".0").decode().split(",")
    texts = text.decode()[1:-1].split(",")
    for at in whole.tolist():
        texts[at] = texts[at][:-2]
    return texts


def _integer_strs(values: np.ndarray) -> list[str]:
    return _numbers(values.astype(np.int64)).decode()[1:-1].split(",") if len(values) else []


def _fraction_strs(values: np.ndarray) -> list[str]:
    if not len(values):
        return []
    text = _numbers(values).decode()
    if "e" in text:
        return list(map(repr, values.tolist()))
    return text[1:-1].split(",")
