"""What one ``process()`` call of a pollable source or a sink reports (Flume's Status)."""

from __future__ import annotations

import enum

__all__ = ["Status"]


class Status(enum.Enum):
    READY = "READY"  # did work; call again at once
    BACKOFF = "BACKOFF"  # nothing to do or could not proceed; the runner backs off
