"""The ``.artimon`` line format (``/var/run/artimon/<module>.artimon``).

One variable per line, fields separated by one space::

    <ts_ms> <name>{<k>=<v>,...} <value>

- ``ts_ms``: epoch milliseconds, digits only.
- labels: as in :func:`bookkeeper.labels.format_labels` (sorted, values percent-encoded);
  the file carries the framework labels too, so a line stands on its own.
- value, by type: INTEGER ``-?[0-9]+``; DOUBLE a number with ``.`` or an exponent, or
  ``NaN``, ``Infinity``, ``-Infinity``; BOOLEAN ``true``/``false`` (``T``/``F`` accepted);
  STRING ``'...'`` percent-encoded (``'``, ``%`` and whitespace encoded).
- blank lines and lines starting with ``#`` are skipped.

Rejections (``TextFormatError`` with the line number): a line without three fields, a
timestamp that is not digits, a bad name or label (the name rules of
:mod:`bookkeeper.labels`), a value of none of the forms above, a line over 64 KiB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from urllib.parse import quote, unquote

from bookkeeper.batch import Sample
from bookkeeper.exceptions import InvalidLabelError, InvalidNameError, TextFormatError
from bookkeeper.labels import format_series, parse_series, validate_labels
from bookkeeper.vartype import VarType

__all__ = ["MAX_LINE_LENGTH", "format_line", "format_value", "parse_line", "parse_lines"]

MAX_LINE_LENGTH = 64 * 1024
_INT_RE = re.compile(r"-?[0-9]+\Z")
_FLOAT_RE = re.compile(r"-?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?\Z")
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_BOOLEANS = {"true": True, "T": True, "false": False, "F": False}
_STRING_SAFE = '!"#$&()*+,-./:;<=>?@[\\]^_`{|}~'


def format_value(vartype: VarType, value: int | float | bool | str) -> str:
    """The text of ``value`` for a variable of ``vartype``."""
    if vartype is VarType.INTEGER:
        return str(int(value))
    if vartype is VarType.DOUBLE:
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return repr(number)
    if vartype is VarType.BOOLEAN:
        return "true" if value else "false"
    return "'" + quote(str(value), safe=_STRING_SAFE) + "'"


def format_line(sample: Sample) -> str:
    """One line (without the newline) for ``sample``."""
    series = format_series(sample.name, sample.labels)
    return f"{sample.timestamp_ms} {series} {format_value(sample.type, sample.value)}"


def _parse_value(text: str) -> tuple[VarType, int | float | bool | str]:
    if _INT_RE.match(text):
        return VarType.INTEGER, int(text)
    if _FLOAT_RE.match(text):
        return VarType.DOUBLE, float(text)
    if text in _SPECIAL_FLOATS:
        return VarType.DOUBLE, _SPECIAL_FLOATS[text]
    if text in _BOOLEANS:
        return VarType.BOOLEAN, _BOOLEANS[text]
    if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        try:
            return VarType.STRING, unquote(text[1:-1], errors="strict")
        except UnicodeDecodeError:
            raise ValueError(f"STRING value {text[:80]} has a bad percent-escape") from None
    raise ValueError(f"value {text[:80]!r} is none of INTEGER, DOUBLE, BOOLEAN, 'STRING'")


def parse_line(line: str, lineno: int = 1) -> Sample:
    """Parse one line; ``TextFormatError`` naming ``lineno`` if it is not well formed."""
    if len(line) > MAX_LINE_LENGTH:
        raise TextFormatError(f"line {lineno}: longer than {MAX_LINE_LENGTH} characters")
    fields = line.strip().split(" ")
    if len(fields) != 3:
        raise TextFormatError(f"line {lineno}: expected '<ts_ms> name{{labels}} value', got {line[:120]!r}")
    ts_text, series, value_text = fields
    if not ts_text.isascii() or not ts_text.isdigit():
        raise TextFormatError(f"line {lineno}: timestamp {ts_text[:40]!r} is not epoch ms digits")
    try:
        name, labels = parse_series(series)
        validate_labels(labels)
        vartype, value = _parse_value(value_text)
    except (InvalidNameError, InvalidLabelError, ValueError) as exc:
        raise TextFormatError(f"line {lineno}: {exc}") from None
    return Sample(name, labels, vartype, value, int(ts_text))


def parse_lines(lines: Iterable[str]) -> Iterator[Sample]:
    """Parse lines, skipping blanks and ``#`` comments; the first bad line raises."""
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            yield parse_line(stripped, lineno)
