"""The dead-letter file: events set aside instead of blocking the flow, one JSON line each
(``time_ms``, the component, its headers, the body in base64, and why when known), appended
to ``<directory>/<component>.jsonl`` and fsynced before the caller lets the events go
(commits a take, commits a Kafka offset), so a dead letter is never lost either."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from collector_agent.event import Event

__all__ = ["write_dead_letters"]


def write_dead_letters(
    directory: Path, component: str, events: Sequence[Event], *, role: str = "sink", reason: str = ""
) -> Path:
    """Append ``events`` to ``directory/<component>.jsonl`` and fsync it; the file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{component}.jsonl"
    with open(path, "a", encoding="utf-8") as out:
        for event in events:
            record: dict[str, object] = {
                "time_ms": int(time.time() * 1000),
                role: component,
                "headers": event.headers,
                "body_base64": base64.b64encode(event.body).decode(),
            }
            if reason:
                record["reason"] = reason
            out.write(json.dumps(record) + "\n")
        out.flush()
        os.fsync(out.fileno())
    return path
