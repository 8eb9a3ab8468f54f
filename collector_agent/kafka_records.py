"""Events as Kafka records and back, in Flume's two forms.

- Flume's event format (``useFlumeEventFormat`` of the sink and source, ``parseAsFlumeEvent``
  of the channel): the value is an ``AvroFlumeEvent`` (``{headers: map<string>, body:
  bytes}``, Avro binary without a container), what Flume's Kafka components write and read,
  so a Flume agent reads our records and we read theirs.
- Plain: the value is the event's body. Flume drops the headers there; we carry them as
  Kafka record headers (UTF-8), so nothing of an event is lost either way.

A record that cannot be an event (a value that is not a whole ``AvroFlumeEvent``, a header
that is not UTF-8, is foreign:
:func:`event_from_record` raises :class:`~collector_agent.exceptions.ForeignRecordError`
naming why, and the component sets the record aside as a dead letter.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from fastavro import schemaless_reader, schemaless_writer

from collector_agent.avro_ipc import AVRO_FLUME_EVENT
from collector_agent.event import Event
from collector_agent.exceptions import ForeignRecordError

__all__ = ["KafkaHeaders", "RecordHeaders", "event_from_record", "record_from_event"]

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
