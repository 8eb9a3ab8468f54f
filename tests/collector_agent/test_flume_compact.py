"""The one-pass compact codec of Flume's calls gives thriftpy2's bytes and thriftpy2's
events, charges the Thrift source's limits, and leaves every other frame to the general
path (the limits' walk, then thriftpy2)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TCompactProtocolFactory
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TCyMemoryBuffer

from bookkeeper.wire.frames import input_protocol
from collector_agent import Event
from collector_agent._flume_thrift import flume_thrift
from collector_agent.exceptions import RequestRefusedError
from collector_agent.flume_compact import read_call, write_append_batch
from collector_agent.flume_limits import RequestLimits, check_request

COMPACT = TCompactProtocolFactory()
LIMITS = RequestLimits()
texts = st.text(max_size=20)
events_strategy = st.lists(
    st.builds(Event, st.dictionaries(texts, texts, max_size=4), st.binary(max_size=300)), max_size=40
)


def thriftpy2_request(api: str, events: list[Event], seqid: int) -> bytes:
    out: Any = TCyMemoryBuffer()
    protocol = COMPACT.get_protocol(out)
    protocol.write_message_begin(api, TMessageType.CALL, seqid)
    thrift_events = [flume_thrift.ThriftFlumeEvent(headers=e.headers, body=e.body) for e in events]
    service = flume_thrift.ThriftSourceProtocol
    if api == "append":
        args = service.append_args(thrift_events[0])
    else:
        args = service.appendBatch_args(thrift_events)
    args.write(protocol)
    protocol.write_message_end()
    return bytes(out.getvalue())


def thriftpy2_events(frame: bytes) -> tuple[str, int, list[Event]]:
    protocol = input_protocol(COMPACT, frame)
    api, _, seqid = protocol.read_message_begin()
    args = getattr(flume_thrift.ThriftSourceProtocol, api + "_args")()
    args.read(protocol)
    found = [args.event] if api == "append" else args.events
    return api, seqid, [Event(dict(e.headers), bytes(e.body)) for e in found]


@settings(max_examples=100, deadline=None)
@given(events_strategy, st.integers(0, 0x7FFFFFFF))
def test_the_batch_is_thriftpy2s_bytes_and_reads_back_as_thriftpy2_reads_it(
    events: list[Event], seqid: int
) -> None:
    frame = write_append_batch(events, seqid)
    assert frame == thriftpy2_request("appendBatch", events, seqid)
    assert read_call(frame, LIMITS) == ("appendBatch", seqid, events)
    assert thriftpy2_events(frame) == ("appendBatch", seqid, events)


def test_append_reads_its_one_event() -> None:
    event = Event({"k": "välue"}, b"body")
    assert read_call(thriftpy2_request("append", [event], 7), LIMITS) == ("append", 7, [event])


@settings(max_examples=200, deadline=None)
@given(events_strategy.filter(bool), st.data())
def test_a_damaged_frame_is_read_as_the_general_path_reads_it_or_left_to_it(
    events: list[Event], data: st.DataObject
) -> None:
    """Whatever the one pass takes, the limits' walk passes and thriftpy2 decodes alike."""
    frame = bytearray(write_append_batch(events, 1))
    for _ in range(data.draw(st.integers(1, 3))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(frame)))
    damaged = bytes(frame[:cut])
    found = read_call(damaged, LIMITS)
    if found is not None:
        check_request(damaged, True, LIMITS)
        assert thriftpy2_events(damaged) == found


def regular(events: list[Event]) -> bytes:
    return write_append_batch(events, 1)


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (regular([Event({"a": "b"}, b"x")]).replace(b"\x1b\x01\x88", b"\x1b\x01\x89"), "map of other types"),
        (regular([Event({"a": "\xff"}, b"x")]).replace(b"\xc3\xbf", b"\xff\xfe"), "header not UTF-8"),
        (regular([Event({}, b"x")]).replace(b"\x1b\x00\x18\x01x", b"\x18\x01x\x1b\x00"), "fields in reverse"),
        (regular([Event({"a": "b"}, b"x")]) + b"\x00", "bytes after the arguments"),
        (regular([Event({"a": "b"}, b"x")])[:-3], "cut short"),
        (regular([Event({}, b"x")]).replace(b"appendBatch", b"appendBatcH"), "another method"),
    ],
)
def test_other_layouts_are_left_to_the_general_path(frame: bytes, why: str) -> None:
    assert read_call(frame, LIMITS) is None, why


def test_past_a_limit_the_general_path_refuses_naming_why() -> None:
    events = [Event({"k": "v"}, bytes(100)) for _ in range(20)]
    frame = regular(events)
    few = RequestLimits(max_batch_events=19)
    assert read_call(frame, few) is None
    with pytest.raises(RequestRefusedError, match="exceeds the maximum of 19"):
        check_request(frame, True, few)
    # what the walk charges this frame, to the byte: one under it is refused by both
    cost = 64 + 20 * 64 + 20 * (64 + 3 * 64 + 2 + 64 + 100)
    assert read_call(frame, RequestLimits(max_decoded_bytes=cost)) is not None
    check_request(frame, True, RequestLimits(max_decoded_bytes=cost))
    small = RequestLimits(max_decoded_bytes=cost - 1)
    assert read_call(frame, small) is None
    with pytest.raises(RequestRefusedError, match="decoding would pass the limit"):
        check_request(frame, True, small)


def test_a_huge_declared_map_is_left_to_the_general_path_before_anything_is_built() -> None:
    """2^28 headers declared, and bytes for 500,000 distinct ones: nothing of them is built."""
    entries = b"".join(b"\x06%06d\x01v" % i for i in range(500_000))
    frame = b"\x82\x21\x01\x0bappendBatch\x19\x1c\x1b\x80\x80\x80\x80\x01\x88" + entries + b"\x18\x00\x00\x00"
    tracemalloc.start()
    try:
        assert read_call(frame, LIMITS) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(frame) + 1024 * 1024  # the frame's copy, no headers
    with pytest.raises(RequestRefusedError):
        check_request(frame, True, LIMITS)
