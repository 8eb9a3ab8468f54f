"""Resolutions: how long each ring's buckets are, how many it keeps, how it aggregates.

Text form, as in ``artimon vhms --resolutions``: comma-separated ``<step>:<slots>[:<aggregate>]``
with steps whole seconds written as durations (``90s``, ``5m``, ``1h30m``:
:func:`bookkeeper.ground.parse_duration`); default ``60s:60,5m:48,15m:96,1h:72`` (an hour
of minutes to three days of hours). The finest resolution keeps, per bucket, the sample
with the greatest timestamp (``last``) and every coarser one aggregates the finest one's
buckets: that is what makes a replayed sample change nothing. Coarser steps must be
multiples of the finest.

Aggregates of a coarse bucket, over the finest buckets inside it:

| aggregate | value | cost at ingest |
|---|---|---|
| ``last`` (default) | the latest one | a write; a recomputation only for a late sample |
| ``min``, ``max`` | the smallest, the largest | a recomputation over the bucket's finest buckets |
| ``sum``, ``count``, ``mean`` | their sum, how many, their mean | the same |

Every aggregate takes 8 bytes per open bucket and series, a few once the bucket is closed
and sealed (:mod:`vhms.server.coarse`); the finest ring takes 2 more bytes per bucket (4 above
a 65.536 s step) for the time of its sample within the bucket.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bookkeeper.ground import parse_duration
from vhms.exceptions import ResolutionError

__all__ = ["AGGREGATES", "DEFAULT_RESOLUTIONS", "Resolution", "parse_resolutions"]

AGGREGATES = ("last", "min", "max", "sum", "count", "mean")
DEFAULT_RESOLUTIONS = "60s:60,5m:48,15m:96,1h:72"
_SPEC_RE = re.compile(r"([0-9a-z]+):(\d+)(?::([a-z]+))?\Z")


@dataclass(frozen=True)
class Resolution:
    step_s: int
    slots: int
    aggregate: str = "last"

    @property
    def step_ms(self) -> int:
        return self.step_s * 1000

    @property
    def span_s(self) -> int:
        return self.step_s * self.slots

    def __str__(self) -> str:
        return f"{self.step_s}s:{self.slots}:{self.aggregate}"


def _whole_seconds(text: str) -> int | None:
    """A duration such as ``5m`` in whole seconds, or None."""
    try:
        ms = parse_duration(text)
    except ValueError:
        return None
    return None if ms % 1000 else ms // 1000


def parse_resolutions(text: str = DEFAULT_RESOLUTIONS) -> list[Resolution]:
    """Parse the text form; ``ResolutionError`` names the part that is wrong."""
    resolutions = []
    for part in (p.strip() for p in text.split(",")):
        match = _SPEC_RE.match(part)
        step = _whole_seconds(match[1]) if match else None
        if match is None or step is None:
            raise ResolutionError(
                f"resolution {part!r} is not <step>:<slots>[:<aggregate>] with a step in whole seconds"
                " (e.g. 5m:48:max)"
            )
        _, slots, aggregate = match.groups()
        if step <= 0 or int(slots) <= 0:
            raise ResolutionError(f"resolution {part!r}: step and slots must be positive")
        if aggregate and aggregate not in AGGREGATES:
            raise ResolutionError(f"resolution {part!r}: aggregate {aggregate!r} is not one of {AGGREGATES}")
        resolutions.append(Resolution(step, int(slots), aggregate or "last"))
    resolutions.sort(key=lambda r: r.step_s)
    finest = resolutions[0]
    if finest.aggregate != "last":
        raise ResolutionError(
            f"the finest resolution ({finest.step_s}s) keeps the last sample: its aggregate is last"
        )
    for resolution in resolutions[1:]:
        if resolution.step_s % finest.step_s or resolution.step_s == finest.step_s:
            raise ResolutionError(
                f"resolution {resolution.step_s}s is not a larger multiple of the finest ({finest.step_s}s)"
            )
    return resolutions
