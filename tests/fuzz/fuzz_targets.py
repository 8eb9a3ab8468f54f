"""Fuzz targets: one per decoder or parser that reads what a sender or an operator wrote.

Each target takes the fuzzer's bytes, hands them to its decoder as the receiver would, and
lets only the decoder's documented refusal through: any other exception is a crash the
fuzzer reports. Memory is bounded by the runner (``fuzz_runner``: libFuzzer's RSS limit per
target), time per input by its timeout; the Thrift, remote-write, OTLP and scrape targets
also check each input's allocations (tracemalloc) against the bounds docs/operations.md
states, under limits small enough for the fuzzer's inputs to reach. ``seeds`` are valid
inputs the fuzzer starts from; ``modules`` are the prefixes of the Python modules whose
branches guide it (atheris instruments them).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import json
import struct
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cramjam
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from thriftpy2.protocol import TCompactProtocolFactory, TCyBinaryProtocolFactory
from thriftpy2.thrift import TMessageType, TProcessor
from thriftpy2.transport import TCyMemoryBuffer

from bookkeeper import MalformedFrameError, Sample, SampleBatch, VarType
from bookkeeper.exceptions import TextFormatError
from bookkeeper.ground import decode_sample_batch, encode_sample_batch
from bookkeeper.textformat import parse_lines
from bookkeeper.wire.frames import input_protocol
from collector_agent import avro_ipc
from collector_agent._flume_thrift import flume_thrift
from collector_agent.channels.file.format import Damaged, pack_events, unpack_events
from collector_agent.config import load_properties, parse_agent
from collector_agent.event import Event
from collector_agent.exceptions import (
    ConfigurationError,
    ForeignRecordError,
    RequestRefusedError,
    ScrapeError,
    WriteRequestError,
)
from collector_agent.flume_compact import read_call
from collector_agent.flume_limits import RequestLimits, check_request
from collector_agent.kafka_records import event_from_record, record_from_event
from collector_agent.otlp import decode_otlp_request
from collector_agent.remote_write import decode_write_request, messages
from collector_agent.remote_write_v2 import decode_write_request_v2, messages_v2
from collector_agent.sources.exposition import ExpositionParser
from collector_agent.write_body import WriteLimits
from query_dsl.alerts import AlertRuleError, parse_rules
from query_dsl.exceptions import PromQLSyntaxError, QuerySyntaxError
from query_dsl.parser import parse as parse_dsl
from query_dsl.promql import parse as parse_promql

__all__ = ["TARGETS", "Target"]


@dataclass(frozen=True)
class Target:
    name: str
    one_input: Callable[[bytes], None]
    seeds: tuple[bytes, ...]
    modules: tuple[str, ...]
    max_len: int = 65536


# -- Flume's ThriftSourceProtocol: the request walker, then thriftpy2's decoding ------------

# a small budget, so that the fuzzer's frames (64 KiB at most) can pass it
_FLUME_LIMITS = RequestLimits(max_batch_events=10_000, max_decoded_bytes=64 * 1024)
_FLUME_PROTOCOLS = (TCompactProtocolFactory(), TCyBinaryProtocolFactory())


class _FlumeHandler:
    """What the Thrift source's handler makes of the decoded events (the last call's kept)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def append(self, event: Any) -> int:
        return self.appendBatch([event])

    def appendBatch(self, events: list[Any]) -> int:
        self.events = [Event(dict(e.headers or {}), bytes(e.body or b"")) for e in events or []]
        return 0


_FLUME_HANDLER = _FlumeHandler()
_FLUME_PROCESSOR = TProcessor(flume_thrift.ThriftSourceProtocol, _FLUME_HANDLER)


def thrift_flume(data: bytes) -> None:
    """The first byte picks the protocol (compact, binary), the rest is one request frame:
    refused by the walker (``RequestRefusedError``), or decoded by thriftpy2 as the server
    does (whatever it raises closes the connection as a bad frame: the walker's part is that
    decoding stays within its budget, checked here with tracemalloc), then made events as
    the source's handler does. A compact frame that the one-pass read
    (``collector_agent.flume_compact``) takes must be one the walker passes and thriftpy2
    decodes into the same events."""
    if not data:
        return
    compact = data[0] & 1 == 0
    factory = _FLUME_PROTOCOLS[data[0] & 1]
    frame = bytearray(data[1:])
    taken = read_call(frame, _FLUME_LIMITS) if compact else None
    try:
        check_request(frame, compact, _FLUME_LIMITS)
    except RequestRefusedError:
        if taken is not None:
            raise AssertionError("the one-pass read took a frame the walker refuses") from None
        return
    tracemalloc.start()
    try:
        api, seqid, _, run = _FLUME_PROCESSOR.process_in(input_protocol(factory, frame))
        _, peak = tracemalloc.get_traced_memory()
    except Exception:  # the server closes the connection: MalformedFrameError (bad_frames)
        if taken is not None:
            raise AssertionError("the one-pass read took a frame thriftpy2 cannot decode") from None
        return
    finally:
        tracemalloc.stop()
    if peak > _FLUME_LIMITS.max_decoded_bytes + 2 * len(frame) + 16384:  # the frame's copy, and slack
        raise AssertionError(f"a frame of {len(frame)} bytes the walker passed took {peak} bytes to decode")
    if run is not None:  # None: an unknown method, answered UNKNOWN_METHOD
        run()
    if taken is not None and taken != (api, seqid, _FLUME_HANDLER.events):
        raise AssertionError("the one-pass read and thriftpy2 read a frame differently")


def _flume_seed(factory: object, api: str, *args: object) -> bytes:
    out = TCyMemoryBuffer()
    protocol = factory.get_protocol(out)  # type: ignore[attr-defined]
    protocol.write_message_begin(api, TMessageType.CALL, 7)
    getattr(flume_thrift.ThriftSourceProtocol, api + "_args")(*args).write(protocol)
    protocol.write_message_end()
    return bytes(out.getvalue())


def _flume_seeds() -> tuple[bytes, ...]:
    event = flume_thrift.ThriftFlumeEvent(headers={"host": "a", "k": "v"}, body=b"payload")
    seeds = []
    for flag, factory in enumerate(_FLUME_PROTOCOLS):
        seeds.append(bytes([flag]) + _flume_seed(factory, "appendBatch", [event, event]))
        seeds.append(bytes([flag]) + _flume_seed(factory, "append", event))
    return tuple(seeds)


# -- Flume's AvroSourceProtocol: the handshake and request walker, then fastavro's decoding --


def avro_flume(data: bytes) -> None:
    """The first byte says whether the request opens its connection (an Avro handshake
    first), the rest is one request as the Avro source reads it: refused by the walkers
    (``RequestRefusedError``), or decoded by fastavro within the walker's budget (checked
    with tracemalloc), raising at most ``UnicodeDecodeError`` (a header that is not UTF-8:
    the source answers it an error), never anything else."""
    if not data:
        return
    request, start = data[1:], 0
    tracemalloc.start()
    try:
        if data[0] & 1:
            _, start = avro_ipc.read_handshake_request(request, _FLUME_LIMITS)
        name, params = avro_ipc.check_request(request, start, _FLUME_LIMITS)
        events = avro_ipc.decode_events(request, params, name) if name else []
        _, peak = tracemalloc.get_traced_memory()
    except (RequestRefusedError, UnicodeDecodeError):
        return
    finally:
        tracemalloc.stop()
    if peak > _FLUME_LIMITS.max_decoded_bytes + 2 * len(request) + 16384:
        raise AssertionError(
            f"a request of {len(request)} bytes the walker passed took {peak} bytes to decode"
        )
    if name == "append" and len(events) != 1:
        raise AssertionError(f"append decoded to {len(events)} events")


def _avro_seeds() -> tuple[bytes, ...]:
    events = [Event({"host": "a", "k": "v\u00e9"}, b"payload"), Event({}, b"")]
    seeds = []
    for name, params in (
        ("appendBatch", avro_ipc.encode_events(events)),
        ("append", avro_ipc.encode_events(events[:1])[1:-1]),
        ("", b""),
    ):
        for opening in (False, True):
            out = io.BytesIO()
            if opening:
                avro_ipc.write_handshake_request(out, with_protocol=name == "append")
            avro_ipc.write_call(out, name, params)
            seeds.append(bytes([opening]) + out.getvalue())
    return tuple(seeds)


# -- remote write 1.0 and 2.0, OTLP: protobuf, each request within docs/operations.md's bound

# small limits, so that the fuzzer's bodies (64 KiB at most) can reach them
_WRITE_LIMITS = WriteLimits(
    max_decoded_bytes=256 * 1024, max_series=1000, max_samples=2000, max_elements=10_000
)
# docs/operations.md §6: what decoding a request may allocate, from its limits (bytes)
_DECODED_TWICE = 2 * _WRITE_LIMITS.max_decoded_bytes + 64 * 1024  # and slack for the runtime's own
_V1_BOUND = _DECODED_TWICE + _WRITE_LIMITS.max_series * 120 + _WRITE_LIMITS.max_samples * 156
_WHOLE_PARSE_BOUND = _DECODED_TWICE + _WRITE_LIMITS.max_elements * 56 + _WRITE_LIMITS.max_samples * 156


def _our_caches() -> list[Any]:
    """The ``lru_cache``s of our modules (checked series, label sets): bounded on their own
    (docs/operations.md), their growth is not a request's cost."""
    return [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, _LRU_CACHE) and str(obj.__module__).startswith(("bookkeeper", "collector_agent"))
    ]


_CACHES: list[Any] = []
_LRU_CACHE = type(functools.lru_cache(maxsize=1)(len))


def _within(bound: int, decode: Callable[[], object], refused: type[Exception] = WriteRequestError) -> None:
    """``decode()``, refused (``refused``) or not, allocating at most ``bound``, from empty
    caches (a cache's table growing is not the request's cost)."""
    if not _CACHES:
        _CACHES.extend(_our_caches())
    for cache in _CACHES:
        cache.cache_clear()
    tracemalloc.start()
    try:
        with contextlib.suppress(refused):
            decode()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if peak > bound:
        raise AssertionError(f"decoding took {peak:,} bytes, more than the documented {bound:,}")


def _body(data: bytes) -> bytes:
    """The first byte's low bit: the rest snappy-compressed here (the fuzzer then shapes the
    protobuf inside), or sent as is (the fuzzer shapes the snappy block)."""
    if data[0] & 1:
        return bytes(data[1:])
    return bytes(cramjam.snappy.compress_raw(data[1:]))


def remote_write_v1(data: bytes) -> None:
    if data:
        body = _body(data)
        _within(_V1_BOUND, lambda: decode_write_request(body, "fuzz", _WRITE_LIMITS))


def remote_write_v2(data: bytes) -> None:
    if data:
        body = _body(data)
        _within(_WHOLE_PARSE_BOUND, lambda: decode_write_request_v2(body, "fuzz", _WRITE_LIMITS))


def otlp(data: bytes) -> None:
    promote = frozenset({"service.name"})
    _within(_WHOLE_PARSE_BOUND, lambda: decode_otlp_request(data, "fuzz", _WRITE_LIMITS, promote))


def _v1_seed() -> bytes:
    request = messages["WriteRequest"]()
    for i in range(3):
        series = request.timeseries.add()
        series.labels.add(name="__name__", value=f"http_requests_total_{i}")
        series.labels.add(name="job", value="api")
        series.samples.add(value=1.5 * i, timestamp=1_700_000_000_000 + i)
    request.metadata.add(metric_family_name="http_requests_total", help="requests", type=1)
    return request.SerializeToString()


def _v2_seed() -> bytes:
    request = messages_v2["Request"]()
    request.symbols.extend(["", "__name__", "up", "job", "api"])
    series = request.timeseries.add()
    series.labels_refs.extend([1, 2, 3, 4])
    series.samples.add(value=1.0, timestamp=1_700_000_000_000)
    return request.SerializeToString()


def _otlp_seed() -> bytes:
    request = ExportMetricsServiceRequest()
    resource = request.resource_metrics.add()
    resource.resource.attributes.add(key="service.name").value.string_value = "shop"
    metrics = resource.scope_metrics.add().metrics
    gauge = metrics.add(name="queue.depth", unit="1").gauge.data_points.add()
    gauge.time_unix_nano, gauge.as_double = 1_700_000_000_000_000_000, 3.0
    total = metrics.add(name="requests", unit="s")
    total.sum.aggregation_temporality, total.sum.is_monotonic = 2, True
    point = total.sum.data_points.add(time_unix_nano=1_700_000_000_000_000_000, as_int=4)
    point.attributes.add(key="http.method").value.string_value = "GET"
    histogram = metrics.add(name="latency", unit="ms").histogram
    histogram.aggregation_temporality = 2
    bucket = histogram.data_points.add(time_unix_nano=1_700_000_000_000_000_000, count=3, sum=1.5)
    bucket.explicit_bounds.extend([0.1, 1.0])
    bucket.bucket_counts.extend([1, 1, 1])
    summary = metrics.add(name="sizes").summary.data_points.add(count=2, sum=3.0)
    summary.quantile_values.add(quantile=0.5, value=1.0)
    return request.SerializeToString()


def _snappy_seeds(*bodies: bytes) -> tuple[bytes, ...]:
    return tuple(b"\x00" + body for body in bodies) + tuple(
        b"\x01" + bytes(cramjam.snappy.compress_raw(body)) for body in bodies
    )


# -- what scrapes read: Prometheus text and OpenMetrics, twice on one target -----------------

_CONTENT_TYPES = ("text/plain; version=0.0.4", "application/openmetrics-text; version=1.0.0")


def exposition(data: bytes) -> None:
    """The first byte picks the content type; the rest is two bodies (split at the first
    ``\\xff``) scraped in turn from one target, so the second may reuse the first's shape.
    A parse allocates at most about 1.5 KB a sample (``sample_limit`` of them) and a few
    copies of the body (docs/operations.md, the scrape's row)."""
    if not data:
        return
    parser = ExpositionParser({"job": "fuzz", "instance": "h:1"}, data[0] & 2 == 0, 4096, _SAMPLE_LIMIT)
    content_type = _CONTENT_TYPES[data[0] & 1]
    for body in data[1:].split(b"\xff", 1):
        bound = 1536 * _SAMPLE_LIMIT + 8 * len(body) + 65536
        _within(
            bound, functools.partial(parser.parse, body, content_type, "fuzz", 1_700_000_000_000), ScrapeError
        )


_SAMPLE_LIMIT = 500


_EXPOSITION_SEED = b"""# HELP http_requests_total Requests.
# TYPE http_requests_total counter
http_requests_total{method="get",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"} 3
# TYPE latency histogram
latency_bucket{le="0.1"} 1
latency_bucket{le="+Inf"} 2
latency_sum 0.3
latency_count 2
up NaN
"""
_EXPOSITION_SEED_2 = _EXPOSITION_SEED.replace(b" 3\n", b" 4\n")  # the same shape, a value changed
_OPENMETRICS_SEED = b"""# TYPE req counter
req_total{a="b"} 1 # {trace_id="x"} 1.0
req_created 1.7e9
# EOF
"""


# -- the query languages, the agent's properties, alert rules --------------------------------


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def promql(data: bytes) -> None:
    with contextlib.suppress(PromQLSyntaxError):
        parse_promql(_text(data))


def dsl(data: bytes) -> None:
    with contextlib.suppress(QuerySyntaxError):
        parse_dsl(_text(data))


def agent_properties(data: bytes) -> None:
    with contextlib.suppress(ConfigurationError):
        parse_agent(load_properties(_text(data), environ={"HOME": "/h"}), "a1")


def alert_rules(data: bytes) -> None:
    with contextlib.suppress(AlertRuleError):
        parse_rules(data, "fuzz.yaml", environ={"HOOK": "http://127.0.0.1:9/"})


_PROMQL_SEEDS = (
    b'sum by (job) (rate(http_requests_total{job="api",code=~"5.."}[5m])) / ignoring(code) group_left'
    b" sum(rate(http_requests_total[5m] offset 1h @ 1700000000))",
    b"histogram_quantile(0.9, sum by (le) (rate(latency_bucket[1m:15s]))) > bool 0.5 or vector(1)",
    b'count_values("v", topk(3, -up)) unless on(instance) label_replace(up, "a", "$1", "b", "(.*)")',
    b'{"weird.name", a!~"x|y"} and absent_over_time(up[1h]) * 1e3 - 0x10 ^ 2 % Inf',
)
_DSL_SEEDS = (
    b"select('os.cpu{dc=par}', last=5m) | bucketize(last, 1m) | mapper(rate) | reduce(sum, by=[dc])",
    b"(select('a{x~=b.*}', since=1h) + 2) * select('c{}', last=10m) | filter(top, 3)",
)
_PROPERTIES_SEED = b"""a1.sources = r1
a1.channels = c1
a1.sinks = k1
a1.sources.r1.type = thrift
a1.sources.r1.bind = 127.0.0.1
a1.sources.r1.port = 0
a1.sources.r1.channels = c1
a1.channels.c1.type = memory
a1.channels.c1.capacity = ${HOME}
a1.sinks.k1.type = logger
a1.sinks.k1.channel = c1
a1.sinkgroups = g1
a1.sinkgroups.g1.sinks = k1
a1.sinkgroups.g1.processor.type = failover
"""
_RULES_SEEDS = (
    b"""interval: 30s
receivers:
  - name: hook
    type: webhook
    url: ${HOOK}
rules:
  - name: cpu_high
    query: "select('os.cpu{}', last=5m) | reduce(max)"
    condition: "> 90"
    for: 2m
    receivers: [hook]
    annotations: {summary: "{{ $value }} on {{ $labels.host }}"}
""",
    b"""groups:
  - name: g
    rules:
      - alert: Down
        expr: up == 0
        for: 5m
        labels: {severity: page}
        annotations: {summary: "{{ $labels.instance }} down"}
      - record: job:up:sum
        expr: sum by (job) (up)
""",
)


# -- stored or carried events: the file channel's rows, Kafka records, the .artimon files ---


def file_channel(data: bytes) -> None:
    """A ``batches`` row: the first byte its format, the second its event count, then the
    blob. Reading never raises and gives one entry per event."""
    if len(data) < 2:
        return
    stored = unpack_events(data[2:], data[1], data[0] % 4)
    if len(stored) != data[1]:
        raise AssertionError(f"{len(stored)} entries for {data[1]} events")
    for entry in stored:
        if not isinstance(entry, Damaged):
            with contextlib.suppress(ValueError):  # as the channel's reader: set aside, not raised
                json.loads(entry[0])


def kafka_record(data: bytes) -> None:
    """A Kafka record's value in Flume's event format (an ``AvroFlumeEvent``)."""
    with contextlib.suppress(ForeignRecordError):
        event_from_record(data, None, True)


def sample_batch(data: bytes) -> None:
    """An event's body as the ``vhms`` and ``raw`` sinks read it: an Avro sample batch from
    any upstream agent or Flume client."""
    with contextlib.suppress(MalformedFrameError):
        decode_sample_batch(data)


def artimon_file(data: bytes) -> None:
    """A ``/var/run/artimon`` file's lines."""
    try:
        for _ in parse_lines(_text(data).split("\n")):
            pass
    except TextFormatError:
        pass


def _file_channel_seed() -> bytes:
    events = [Event({"a": "b"}, b"body"), Event({}, b""), Event({"h": "\u00e9"}, b"\x00\xff")]
    return struct.pack("BB", 2, len(events)) + pack_events(events)


_KAFKA_SEED = record_from_event(Event({"topic": "t", "k": "v"}, b"\x00body"), True)[0]
_BATCH_SEED = encode_sample_batch(
    SampleBatch.from_samples(
        "app",
        [
            Sample("os.cpu", {"dc": "par"}, VarType.DOUBLE, 12.5, 1_700_000_000_000),
            Sample("app.name", {}, VarType.STRING, "h\u00e9", 1_700_000_000_001),
            Sample("app.up", {"x": "y"}, VarType.BOOLEAN, True, 1_700_000_000_002),
        ],
    )
)
_ARTIMON_SEED = b"1700000000000 os.cpu{dc=par,host=h1} 12.5\n1700000000000 app.up{} true\n" + (
    b"1700000000001 app.name{x=y} 'hello%20world'\n1700000000002 app.count{} 42\n"
)

# lark's parsing loop, not its grammar compiler (instrumenting all of lark takes 2 s a target)
_LARK = (
    "lark.lexer",
    "lark.parsers.lalr_parser",
    "lark.parsers.lalr_parser_state",
    "lark.parse_tree_builder",
)

TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target(
            "thrift_flume",
            thrift_flume,
            _flume_seeds(),
            ("collector_agent.flume_limits", "collector_agent.flume_compact"),
        ),
        Target("avro_flume", avro_flume, _avro_seeds(), ("collector_agent.avro_ipc",)),
        Target(
            "remote_write_v1",
            remote_write_v1,
            _snappy_seeds(_v1_seed()),
            ("collector_agent.remote_write", "collector_agent.write_body", "collector_agent.protobuf_budget"),
        ),
        Target(
            "remote_write_v2",
            remote_write_v2,
            _snappy_seeds(_v2_seed()),
            (
                "collector_agent.remote_write_v2",
                "collector_agent.write_body",
                "collector_agent.protobuf_budget",
            ),
        ),
        Target(
            "otlp",
            otlp,
            (_otlp_seed(),),
            ("collector_agent.otlp", "collector_agent.write_body", "collector_agent.protobuf_budget"),
        ),
        Target(
            "exposition",
            exposition,
            (
                b"\x00" + _EXPOSITION_SEED + b"\xff" + _EXPOSITION_SEED.replace(b" 3\n", b" 4\n"),
                b"\x01" + _OPENMETRICS_SEED,
            ),
            (
                "collector_agent.sources.exposition",
                "prometheus_client.parser",
                "prometheus_client.openmetrics",
            ),
        ),
        Target("promql", promql, _PROMQL_SEEDS, ("query_dsl.promql.parser", *_LARK), max_len=4096),
        Target("dsl", dsl, _DSL_SEEDS, ("query_dsl.parser", *_LARK), max_len=4096),
        Target(
            "agent_properties",
            agent_properties,
            (_PROPERTIES_SEED,),
            ("collector_agent.config", "javaproperties"),
        ),
        Target(
            "alert_rules",
            alert_rules,
            _RULES_SEEDS,
            (
                "query_dsl.alerts.rules",
                "query_dsl.alerts.prom_rules",
                "query_dsl.alerts.fields",
                "yaml.composer",
                "yaml.constructor",
            ),
        ),
        Target(
            "file_channel", file_channel, (_file_channel_seed(),), ("collector_agent.channels.file.format",)
        ),
        Target("kafka_record", kafka_record, (_KAFKA_SEED,), ("collector_agent.kafka_records", "fastavro")),
        Target("sample_batch", sample_batch, (_BATCH_SEED,), ("bookkeeper.ground.avro", "bookkeeper.batch")),
        Target(
            "artimon_file", artimon_file, (_ARTIMON_SEED,), ("bookkeeper.textformat", "bookkeeper.labels")
        ),
    )
}
