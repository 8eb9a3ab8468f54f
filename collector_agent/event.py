"""The unit of data that flows through the agent: headers and a body."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Event"]


@dataclass(slots=True)
class Event:
    """An event as Flume has it: string headers and an opaque body."""

    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def size(self) -> int:
        """Bytes the body takes, what byte capacities count (as Flume does)."""
        return len(self.body)
