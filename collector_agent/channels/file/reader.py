"""The ``file`` channel's reads (Flume's ``LogFile.RandomReader``): the events of stored
batches for a take.

A take asks for ranges of batches (``queue.py``); each batch is read through the log's
reader connection, decoded once (``format.py``) and kept while the batch is taken piecemeal,
up to :data:`DECODED_CACHE_BYTES` of stored blobs (the least recently read go first, and a
batch all consumed at once). Each event comes back as an :class:`~collector_agent.event.Event`
or, damaged, as ``(seq, index, Damaged)`` for the take to set aside: an event whose checksum
fails, every event of a batch that is no longer in the database or whose row is damaged,
and, in rows from before checksums, headers that are not a JSON object.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import orjson

from collector_agent.channels.file.format import Damaged, Stored, unpack_events
from collector_agent.channels.file.log import Log
from collector_agent.channels.file.queue import EventQueue, Range
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException

__all__ = ["DECODED_CACHE_BYTES", "BatchReader"]

DECODED_CACHE_BYTES = 64 * 1024 * 1024


def _headers(raw: bytes) -> Any:
    """Stored headers JSON, read by orjson, or by the standard library where orjson refuses
    (a lone surrogate's escape, which the standard library writes)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


class BatchReader:
    """Reads through ``log.reader`` under :attr:`lock` (which a close or a salvage holds
    while it replaces the connections); ``queue`` tells how many events each batch has."""

    def __init__(self, name: str, log: Log, queue: EventQueue) -> None:
        self.name = name
        self.lock = threading.Lock()
        self._log = log
        self._queue = queue
        self._decoded: OrderedDict[int, list[Stored]] = OrderedDict()
        self._decoded_bytes: dict[int, int] = {}
        self._decoded_total = 0

    def events_of(self, ranges: list[Range], events: list[Event]) -> list[tuple[int, int, Damaged]]:
        """Append the sound events of ``ranges`` to ``events``; the damaged ones, returned."""
        add = events.append
        parsed: dict[bytes, dict[str, str]] = {}
        damaged: list[tuple[int, int, Damaged]] = []
        for seq, first, last in ranges:
            stored = self._batch(seq)
            for index, item in enumerate(stored[first:last], first):
                if isinstance(item, Damaged):
                    damaged.append((seq, index, item))
                    continue
                raw_headers, body = item
                headers = parsed.get(raw_headers)
                if headers is None:
                    try:
                        headers = _headers(raw_headers)
                    except ValueError:
                        headers = None
                    if not isinstance(headers, dict):  # only where no checksum vouches for it
                        damaged.append(
                            (seq, index, Damaged("headers are not a JSON object", raw_headers + body))
                        )
                        continue
                    parsed[raw_headers] = headers
                add(Event(headers.copy(), body))
        return damaged

    def _batch(self, seq: int) -> list[Stored]:
        """The events of batch ``seq``, decoded once and cached while the batch is being
        taken piecemeal."""
        with self.lock:
            stored = self._decoded.get(seq)
            if stored is not None:
                self._decoded.move_to_end(seq)
                return stored
            conn = self._log.reader
            count = self._queue.count_of(seq)
            if conn is None or count is None:
                raise ChannelException(f"channel {self.name} was stopped or salvaged during this take")
            # fetchall ends the statement at once: an open read would hold off the writer
            rows = conn.execute("SELECT format, data FROM batches WHERE seq = ?", (seq,)).fetchall()
            version, data = rows[0] if rows else (None, None)
            if isinstance(version, int) and isinstance(data, bytes):
                stored = unpack_events(data, count, version)
                size = len(data)
            else:
                why = "the batch is missing from the database" if not rows else "the batch row is damaged"
                stored = [Damaged(why, b"")] * count
                size = 0
            self._decoded[seq] = stored
            self._decoded_bytes[seq] = size
            self._decoded_total += size
            while self._decoded_total > DECODED_CACHE_BYTES and len(self._decoded) > 1:
                self._drop(next(iter(self._decoded)))
            return stored

    def forget(self, batches: Iterable[int]) -> None:
        """Drop consumed batches from the cache."""
        with self.lock:
            for seq in batches:
                self._drop(seq)

    def clear(self) -> None:
        """Drop every decoded batch (the caller holds :attr:`lock`)."""
        self._decoded.clear()
        self._decoded_bytes.clear()
        self._decoded_total = 0

    def _drop(self, seq: int) -> None:
        if self._decoded.pop(seq, None) is not None:
            self._decoded_total -= self._decoded_bytes.pop(seq)
