"""The engine's pending and firing alerts across restarts: one JSON file.

Format (version 1)::

    {"version": 1, "saved_ms": 1700000000000,
     "alerts": [{"rule", "series", "labels", "annotations", "state": "pending"|"firing",
                 "value", "active_since_ms", "fired_ms", "last_notified_ms", ...}]}

``value`` is a number, or ``"+Inf"``/``"-Inf"`` (JSON has no infinities). A save writes
``<file>.tmp``, fsyncs it, renames it over the file and fsyncs the directory, so a crash
leaves the old state or the new one, never half of one. A file that cannot be used (not
JSON, another version, a wrong shape, over ``MAX_STATE_BYTES``) is renamed to
``<file>.corrupt-<ms>`` with a warning and the engine starts with no alerts: a lost state
costs a repeated notification, a crash would cost every later one.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from query_dsl.alerts.model import Alert, AlertState

__all__ = ["MAX_STATE_BYTES", "STATE_VERSION", "StateFile"]

log = logging.getLogger(__name__)

STATE_VERSION = 1
MAX_STATE_BYTES = 256 << 20


class StateFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> list[Alert]:
        """The saved alerts; none when there is no file; a corrupt file is set aside."""
        try:
            with open(self.path, "rb") as state:
                data = state.read(MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return []
        try:
            if len(data) > MAX_STATE_BYTES:
                raise ValueError(f"larger than {MAX_STATE_BYTES} bytes")
            document = json.loads(data)
            if not isinstance(document, dict) or document.get("version") != STATE_VERSION:
                version = document.get("version") if isinstance(document, dict) else None
                raise ValueError(f"not a version {STATE_VERSION} alert state (version {version!r})")
            records = document.get("alerts")
            if not isinstance(records, list):
                raise ValueError("no list of alerts")
            return [_alert(record) for record in records]
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time() * 1000)}")
            os.replace(self.path, aside)
            log.warning(
                "alert state %s is unusable (%s): moved to %s, starting afresh", self.path, exc, aside
            )
            return []

    def save(self, alerts: Iterable[Alert], now_ms: int) -> None:
        """Replace the file atomically; ``OSError`` if it cannot be written."""
        document = {
            "version": STATE_VERSION,
            "saved_ms": now_ms,
            "alerts": [alert.to_dict() for alert in alerts],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(document, out, allow_nan=False)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a power loss only once its directory is synced
        finally:
            os.close(directory)


def _alert(record: Any) -> Alert:
    if not isinstance(record, dict):
        raise ValueError(f"an alert is a mapping, got {type(record).__name__}")
    state = AlertState(record["state"])
    if state not in (AlertState.PENDING, AlertState.FIRING):
        raise ValueError(f"a saved alert is pending or firing, got {state.value}")
    labels, annotations = record["labels"], record.get("annotations") or {}
    for mapping in (labels, annotations):
        if not isinstance(mapping, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
        ):
            raise ValueError("labels and annotations map text to text")
    return Alert(
        rule=_text(record["rule"]),
        series=_text(record["series"]),
        labels=labels,
        state=state,
        value=float(record["value"]),
        active_since_ms=_ms(record["active_since_ms"]),
        fired_ms=_optional_ms(record.get("fired_ms")),
        last_notified_ms=_optional_ms(record.get("last_notified_ms")),
        annotations=annotations,
        keep_firing_since_ms=_optional_ms(record.get("keep_firing_since_ms")),
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {value!r}")
    return value


def _ms(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected epoch ms, got {value!r}")
    return value


def _optional_ms(value: Any) -> int | None:
    return None if value is None else _ms(value)
