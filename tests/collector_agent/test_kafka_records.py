"""Kafka records in Flume's event format: a record whose headers map declares more than
MAX_HEADERS entries is refused from its declared counts, before fastavro builds them."""

from __future__ import annotations

import tracemalloc

import pytest

from collector_agent import Event, ForeignRecordError
from collector_agent.kafka_records import MAX_HEADERS, event_from_record, record_from_event


def _long(value: int) -> bytes:
    zigzag, out = (value << 1) ^ (value >> 63), bytearray()
    while zigzag > 0x7F:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    return bytes(out) + bytes([zigzag])


def _entry(key: str) -> bytes:
    return _long(len(key)) + key.encode() + _long(0)


def test_headers_up_to_the_limit_pass_and_round_trip() -> None:
    event = Event({f"h{i}": "v" for i in range(MAX_HEADERS)}, b"\x00body")
    assert event_from_record(record_from_event(event, True)[0], None, True) == event


def test_a_header_bomb_is_refused_before_it_is_decoded() -> None:
    value = record_from_event(Event({f"{i:x}": "" for i in range(200_000)}, b""), True)[0]
    tracemalloc.start()
    try:
        with pytest.raises(
            ForeignRecordError, match=f"not an AvroFlumeEvent of at most {MAX_HEADERS} headers"
        ):
            event_from_record(value, None, True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000  # fastavro would have built 25 MiB of dict and strings


@pytest.mark.parametrize("sized", [False, True])
def test_headers_split_into_blocks_are_counted_across_them(sized: bool) -> None:
    """One entry a block, or blocks that give their size in bytes (a negative count)."""

    def block(i: int) -> bytes:
        entry = _entry(f"k{i}")
        return _long(-1) + _long(len(entry)) + entry if sized else _long(1) + entry

    def value(entries: int) -> bytes:
        return b"".join(block(i) for i in range(entries)) + _long(0) + _long(1) + b"x"

    assert len(event_from_record(value(MAX_HEADERS), None, True).headers) == MAX_HEADERS
    with pytest.raises(ForeignRecordError, match="declares 1001 so far"):
        event_from_record(value(MAX_HEADERS + 1), None, True)


@pytest.mark.parametrize(
    "value", [b"", b"\x02", b"\x01", b"\xff" * 12, _long(2**40) + b"ab", _long(-3) + _long(-9)]
)
def test_truncated_or_absurd_values_are_foreign(value: bytes) -> None:
    with pytest.raises(ForeignRecordError):
        event_from_record(value, None, True)
