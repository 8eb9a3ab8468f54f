"""Durations as Prometheus writes them: one or more ``<integer><unit>`` parts, ``1h30m``,
``500ms``, ``2w``; units ``ms s m h d w y`` (a day is 24 h, a week 7 d, a year 365 d).

The one parser of durations for the query languages, the alert rules, the Prometheus API's
``step`` and ``timeout`` and VHMS's resolutions; each caller wraps the ``ValueError`` in its
own error and applies its own bounds (a caller that also takes a bare number of seconds,
as the Prometheus API does, tries that first).
"""

from __future__ import annotations

import re

__all__ = ["parse_duration"]

_UNITS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
    "y": 31_536_000_000,
}
_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")


def parse_duration(text: str) -> int:
    """``1h30m``, ``500ms``, ``2w`` in milliseconds; ``ValueError`` for anything else (an
    empty text, a bare number, a unit unknown, a space)."""
    position, total = 0, 0
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        total += int(match[1]) * _UNITS[match[2]]
        position = match.end()
    if position != len(text) or not text:
        raise ValueError(f"{text!r} is not a duration like 5m, 1h30m or 500ms")
    return total
