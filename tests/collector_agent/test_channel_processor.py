from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from collector_agent import ChannelFullException, ChannelProcessor, Context, Event, FileChannel, MemoryChannel
from collector_agent.interceptors.host import HostInterceptor
from collector_agent.interceptors.regex_filter import RegexFilterInterceptor
from collector_agent.interceptors.static import StaticInterceptor
from collector_agent.interceptors.timestamp import TimestampInterceptor
from collector_agent.selectors.multiplexing import MultiplexingChannelSelector
from collector_agent.selectors.replicating import ReplicatingChannelSelector


def memory(name: str, capacity: int = 100) -> MemoryChannel:
    channel = MemoryChannel(name)
    channel.configure(
        Context({"capacity": str(capacity), "transactionCapacity": str(capacity), "keep-alive": "0"})
    )
    channel.start()
    return channel


def bodies(channel: MemoryChannel | FileChannel) -> list[bytes]:
    with channel.transaction() as tx:
        return [e.body for e in tx.take_batch(1000)]


def replicating(
    channels: list[MemoryChannel | FileChannel], optional: str = ""
) -> ReplicatingChannelSelector:
    selector = ReplicatingChannelSelector()
    selector.configure(Context({"optional": optional} if optional else {}), {c.name: c for c in channels})
    return selector


def test_replicating_puts_every_event_in_every_channel() -> None:
    c1, c2 = memory("c1"), memory("c2")
    ChannelProcessor(replicating([c1, c2])).process_batch([Event({}, b"a"), Event({}, b"b")])
    assert bodies(c1) == bodies(c2) == [b"a", b"b"]


def test_fan_out_to_required_channels_is_all_or_nothing(tmp_path: Path) -> None:
    roomy = memory("roomy", 100)
    durable = FileChannel("durable")
    durable.configure(Context({"dataDirs": str(tmp_path), "minimumRequiredSpace": "1048576"}))
    durable.start()
    tight = memory("tight", 2)
    processor = ChannelProcessor(replicating([roomy, durable, tight]))
    processor.process_batch([Event({}, b"1"), Event({}, b"2")])
    with pytest.raises(ChannelFullException):
        processor.process_batch([Event({}, b"3")])  # tight is full: nobody gets it
    assert bodies(roomy) == [b"1", b"2"]
    assert bodies(durable) == [b"1", b"2"]
    assert bodies(tight) == [b"1", b"2"]
    durable.stop()
    reopened = FileChannel("durable")
    reopened.configure(Context({"dataDirs": str(tmp_path), "minimumRequiredSpace": "1048576"}))
    reopened.start()
    assert reopened.size == 0  # the refused event was not left behind on disk either
    reopened.stop()


def test_a_failing_optional_channel_does_not_fail_the_put() -> None:
    required, optional = memory("req"), memory("opt", 1)
    processor = ChannelProcessor(replicating([required, optional], optional="opt"))
    processor.process_batch([Event({}, b"a"), Event({}, b"b")])  # opt cannot take two
    assert bodies(required) == [b"a", b"b"]
    assert bodies(optional) == []
    assert processor.optional_failures == 1


def multiplexing(channels: list[MemoryChannel], **settings: str) -> MultiplexingChannelSelector:
    selector = MultiplexingChannelSelector()
    selector.configure(Context(settings, "a1.sources.r1.selector."), {c.name: c for c in channels})
    return selector


def test_multiplexing_routes_by_header_with_default_and_optional() -> None:
    ca, az, both = memory("ca"), memory("az"), memory("both")
    selector = multiplexing(
        [ca, az, both],
        header="State",
        **{
            "mapping.CA": "ca",
            "mapping.AZ": "az",
            "mapping.NY": "ca az",
            "optional.CA": "both",
            "default": "both",
        },
    )
    ChannelProcessor(selector).process_batch(
        [
            Event({"State": "CA"}, b"ca"),
            Event({"State": "AZ"}, b"az"),
            Event({"State": "NY"}, b"ny"),
            Event({"State": "TX"}, b"tx"),
            Event({}, b"none"),
            Event({"State": ""}, b"empty"),
        ]
    )
    assert bodies(ca) == [b"ca", b"ny"]
    assert bodies(az) == [b"az", b"ny"]
    assert bodies(both) == [b"tx", b"none", b"empty", b"ca"]  # defaults, then the optional copy


def test_multiplexing_refuses_a_channel_the_source_does_not_have() -> None:
    with pytest.raises(ValueError, match=r"a1\.sources\.r1\.selector\.mapping\.CA: channel 'zz'"):
        multiplexing([memory("ca")], **{"mapping.CA": "zz"})


def test_interceptors_run_in_order_before_the_selector() -> None:
    out = memory("out")
    timestamp = TimestampInterceptor()
    timestamp.configure(Context({}))
    static = StaticInterceptor()
    static.configure(Context({"key": "dc", "value": "par"}))
    host = HostInterceptor()
    host.configure(Context({"useIP": "false", "hostHeader": "agent"}))
    keep_errors = RegexFilterInterceptor()
    keep_errors.configure(Context({"regex": "^ERROR"}))
    processor = ChannelProcessor(replicating([out]), [timestamp, static, host, keep_errors])
    processor.process_batch(
        [Event({"dc": "kept"}, b"ERROR disk"), Event({}, b"INFO fine"), Event({}, b"ERROR net")]
    )
    with out.transaction() as tx:
        got = tx.take_batch(10)
    assert [e.body for e in got] == [b"ERROR disk", b"ERROR net"]
    assert got[0].headers["dc"] == "kept"  # static preserves existing by default
    assert got[1].headers["dc"] == "par"
    assert all(re.fullmatch(r"\d{13}", e.headers["timestamp"]) for e in got)
    assert all(e.headers["agent"] == socket.gethostname() for e in got)


def test_interceptor_options() -> None:
    timestamp = TimestampInterceptor()
    timestamp.configure(Context({"headerName": "ts", "preserveExisting": "true"}))
    assert timestamp.intercept([Event({"ts": "1"})])[0].headers["ts"] == "1"
    static = StaticInterceptor()
    static.configure(Context({"key": "k", "value": "new", "preserveExisting": "false"}))
    assert static.intercept([Event({"k": "old"})])[0].headers["k"] == "new"
    drop = RegexFilterInterceptor()
    drop.configure(Context({"regex": "debug", "excludeEvents": "true"}))
    assert [e.body for e in drop.intercept([Event({}, b"a debug line"), Event({}, b"keep")])] == [b"keep"]
    host = HostInterceptor()
    host.configure(Context({}))
    assert re.fullmatch(r"[\d.]+", host.intercept([Event()])[0].headers["host"])
    with pytest.raises(ValueError, match="regex"):
        RegexFilterInterceptor().configure(Context({"regex": "("}))


def test_everything_filtered_out_is_not_an_error() -> None:
    out = memory("out")
    drop_all = RegexFilterInterceptor()
    drop_all.configure(Context({"regex": ".*", "excludeEvents": "true"}))
    ChannelProcessor(replicating([out]), [drop_all]).process_batch([Event({}, b"x")])
    assert out.size == 0
