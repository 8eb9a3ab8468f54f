"""Events as Kafka records and back, in Flume's two forms.

- Flume's event format (``useFlumeEventFormat`` of the sink and source, ``parseAsFlumeEvent``
  of the channel): the value is an ``AvroFlumeEvent`` (``{headers: map<string>, body:
  bytes}``, Avro binary without a container), what Flume's Kafka components write and read,
  so a Flume agent reads our records and we read theirs.
- Plain: the value is the event's body. Flume drops the headers there; we carry them as
  Kafka record headers (UTF-8), so nothing of an event is lost either way.

A record that cannot be an event (a value that is not a whole ``AvroFlumeEvent``, one whose
headers map declares more than :data:`MAX_HEADERS` entries, a header that is not UTF-8) is
foreign:
:func:`event_from_record` raises :class:`~collector_agent.exceptions.ForeignRecordError`
naming why, and the component sets the record aside as a dead letter.

Work bounded by what was sent: fastavro builds a dict entry and two strings per header
(about 20 bytes of memory per byte of a record of short headers: a 1.3 MB record of 200,000
headers peaked at 25 MiB), so the headers' declared counts are read first, stepping over at
most :data:`MAX_HEADERS` entries, and a record past it is refused before it is decoded.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from fastavro import schemaless_reader, schemaless_writer

from collector_agent.avro_ipc import AVRO_FLUME_EVENT
from collector_agent.event import Event
from collector_agent.exceptions import ForeignRecordError

__all__ = ["MAX_HEADERS", "KafkaHeaders", "RecordHeaders", "event_from_record", "record_from_event"]

MAX_HEADERS = 1000

RecordHeaders = list[tuple[str, str | bytes | None]]  # what the producer takes
KafkaHeaders = (
    Sequence[tuple[str, str | bytes | None]] | dict[str, str | bytes | None]
)  # what a message gives


def record_from_event(event: Event, flume_format: bool) -> tuple[bytes, RecordHeaders | None]:
    """``(value, record headers)`` of ``event``."""
    if flume_format:
        out = io.BytesIO()
        schemaless_writer(out, AVRO_FLUME_EVENT, {"headers": event.headers, "body": event.body})
        return out.getvalue(), None
    if not event.headers:
        return event.body, None
    return event.body, [(name, value.encode()) for name, value in event.headers.items()]


def event_from_record(value: bytes | None, headers: KafkaHeaders | None, flume_format: bool) -> Event:
    """The event a record holds; ``ForeignRecordError`` for a record that is not one."""
    value = value or b""
    if flume_format:
        declared = _declared_headers(value)
        if declared > MAX_HEADERS:
            raise ForeignRecordError(
                f"a value of {len(value)} bytes is not an AvroFlumeEvent of at most {MAX_HEADERS} headers:"
                f" it declares {declared} so far"
            )
        source = io.BytesIO(value)
        try:
            decoded = schemaless_reader(source, AVRO_FLUME_EVENT, None)
        except Exception as exc:  # fastavro raises whatever the bytes lead it to (EOF, UnicodeError...)
            raise ForeignRecordError(
                f"a value of {len(value)} bytes is not an AvroFlumeEvent: {exc!r}"
            ) from None
        if source.tell() != len(value) or not isinstance(decoded, dict):
            raise ForeignRecordError(
                f"a value of {len(value)} bytes is not one AvroFlumeEvent "
                f"({len(value) - source.tell()} bytes left over)"
            )
        return Event(dict(decoded["headers"]), bytes(decoded["body"]))
    event_headers: dict[str, str] = {}
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    for name, raw in pairs:
        try:
            event_headers[name] = raw if isinstance(raw, str) else (raw or b"").decode()
        except UnicodeDecodeError:
            raise ForeignRecordError(f"record header {name!r} is not UTF-8 text") from None
    return Event(event_headers, value)


def _long(data: bytes, pos: int) -> tuple[int, int]:
    """An Avro long (zig-zag varint) at ``pos`` and the position after it; ``(0, past the
    end)`` when the bytes end first (fastavro's decoding names that refusal)."""
    value = shift = 0
    while pos < len(data) and shift < 70:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    return 0, len(data) + 1


def _declared_headers(value: bytes) -> int:
    """How many headers the map's blocks declare, read until the map ends or the count
    passes :data:`MAX_HEADERS` (at most that many entries stepped over)."""
    pos = declared = 0
    while pos <= len(value):
        count, pos = _long(value, pos)
        if count == 0:
            return declared
        declared += abs(count)
        if declared > MAX_HEADERS:
            return declared
        if count < 0:  # a block that gives its size in bytes: stepped over whole
            size, pos = _long(value, pos)
            pos += max(size, 0)
            continue
        for _ in range(2 * count):  # a key and a value, each a length and its bytes
            length, pos = _long(value, pos)
            pos += max(length, 0)
    return declared
