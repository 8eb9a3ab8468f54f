"""One duration syntax for every caller: Prometheus's (``bookkeeper.ground.parse_duration``)."""

from __future__ import annotations

import re

import pytest

from bookkeeper.ground import parse_duration


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("500ms", 500),
        ("30s", 30_000),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("2d", 172_800_000),
        ("1w", 604_800_000),
        ("1y", 31_536_000_000),
        ("1m30s500ms", 90_500),
        ("0s", 0),
    ],
)
def test_durations_in_milliseconds(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "5", "1.5h", "5 m", "5x", "m", "-5m", "5mm", " 5m"])
def test_anything_else_is_refused_with_the_text(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{text!r} is not a duration like 5m, 1h30m or 500ms")):
        parse_duration(text)
