"""What the push receivers (remote write 1.0 and 2.0, OTLP) share: the limits of one request,
its body decompressed within them, series checked once, and the columns of the batch built.

Refusals of single series are tallied by reason (:data:`SERIES_REFUSALS`), never kept one
by one: a request of a million bad series costs a counter, not a million messages. The
first :data:`EXAMPLES_KEPT` are explained in words for the answer's text.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ParamSpec, TypeVar

import cramjam
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from bookkeeper import BookkeeperError, SampleBatch, VarType
from bookkeeper.wire import MAX_LABELS, format_labels, validate_labels, validate_name
from collector_agent.exceptions import WriteRequestError
from collector_agent.protobuf_budget import ElementBudgetExceeded, WireError, count_elements

__all__ = [
    "EXAMPLES_KEPT",
    "SERIES_REFUSALS",
    "Columns",
    "DecodedWrite",
    "MessageSpec",
    "WriteLimits",
    "check_series",
    "explain_series",
    "gunzip_body",
    "message_classes",
    "parse_counted",
    "small_cache",
    "snappy_body",
]

EXAMPLES_KEPT = 5
STALE_NAN: float = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]  # Prometheus's marker
CACHED_TEXT = 512  # a checked series (or name) is remembered only if its text is this short...
SERIES_CACHE = 100_000  # ...and so many of them at most: 130 MB at the worst
_P = ParamSpec("_P")
_R = TypeVar("_R")
_GZIP_CHUNK = 1 << 20
# reason -> what it means; each is counted as SeriesRefused<reason>Count by the receiver
SERIES_REFUSALS = {
    "NoName": "a series without a name (__name__)",
    "InvalidName": "a name that breaks Artimon's rules",
    "InvalidLabels": "a label that breaks Artimon's rules, or more than 32 labels",
    "RepeatedLabel": "a label name given twice",
    "TooManyLabels": f"more than {MAX_LABELS + 1} labels with the name, refused before they are read",
    "Histogram": "a native histogram (remote write 1.0)",
    "UnknownSymbol": "a label reference past the symbol table (remote write 2.0)",
    "Unsupported": "an OTLP exponential histogram (Artimon has no native histograms) or no data",
    "Delta": "an OTLP sum or histogram of delta temporality (Prometheus refuses them too)",
    "Malformed": "an OTLP histogram point whose bucket counts do not match its bounds",
}


@dataclass(frozen=True)
class WriteLimits:
    """What one request may hold: bytes once decompressed, series (or metadata entries, or
    OTLP data points with their attributes: see each decoder), and points (samples,
    exemplars, histograms) over all its series; ``max_elements`` bounds what a parse of a
    whole request (remote write 2.0, OTLP) may allocate, counted before it starts."""

    max_decoded_bytes: int = 32 * 1024 * 1024
    max_series: int = 100_000
    max_samples: int = 200_000
    max_elements: int = 1_000_000


@dataclass
class DecodedWrite:
    """A decoded request: the samples Artimon keeps as one batch, and what it did not keep."""

    batch: SampleBatch
    series: int
    refused: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    refused_samples: int = 0
    metadata: int = 0
    exemplars: int = 0
    histograms: int = 0  # native histograms kept as series...
    histogram_rows: int = 0  # ...and the samples of those series

    @property
    def refused_series(self) -> int:
        return sum(self.refused.values())

    def refuse(self, reason: str, samples: int, explain: Callable[[], str] | None = None) -> None:
        """Count one series refused for ``reason`` with its ``samples``; ``explain`` (giving
        the words) is called only for the first few."""
        self.refused[reason] += 1
        self.refused_samples += samples
        if len(self.examples) < EXAMPLES_KEPT:
            self.examples.append(explain() if explain is not None else SERIES_REFUSALS[reason])


def small_cache(
    size_of: Callable[_P, int], maxsize: int = SERIES_CACHE
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """``lru_cache`` for arguments whose ``size_of`` (their text's length) is at most
    :data:`CACHED_TEXT`: longer ones are computed each time, so that what senders choose
    cannot make the cache hold more than ``maxsize`` short entries."""

    def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
        cached = lru_cache(maxsize=maxsize)(function)

        def lookup(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if size_of(*args, **kwargs) <= CACHED_TEXT:
                return cached(*args, **kwargs)  # type: ignore[arg-type]
            return function(*args, **kwargs)

        return lookup

    return decorate


def snappy_body(body: bytes | bytearray, limits: WriteLimits) -> bytearray:
    """``body`` decompressed from snappy's block format, its size read from snappy's header
    and checked before anything is decompressed."""
    try:
        size = cramjam.snappy.decompress_raw_len(body)
    except cramjam.DecompressionError as exc:
        raise WriteRequestError(f"the body is not snappy-compressed (block format): {exc}") from None
    if size > limits.max_decoded_bytes:
        raise WriteRequestError(
            f"the body decompresses to {size:,} bytes, more than maxDecodedBytes={limits.max_decoded_bytes:,}"
        )
    out = bytearray(size)
    try:
        written = cramjam.snappy.decompress_raw_into(body, out)
    except cramjam.DecompressionError as exc:
        raise WriteRequestError(f"the body is not snappy-compressed (block format): {exc}") from None
    if written != size:
        raise WriteRequestError(f"the body is not snappy-compressed: {written:,} bytes of {size:,}")
    return out


def gunzip_body(body: bytes | bytearray, limits: WriteLimits) -> bytearray:
    """``body`` decompressed from gzip a MiB at a time into one buffer, refused as soon as it
    passes ``max_decoded_bytes``."""
    inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    out = bytearray()
    pending: bytes | bytearray = body
    try:
        while pending or not inflater.eof:
            out += inflater.decompress(pending, _GZIP_CHUNK)
            if len(out) > limits.max_decoded_bytes:
                raise WriteRequestError(
                    f"the body decompresses to more than maxDecodedBytes={limits.max_decoded_bytes:,} bytes"
                )
            pending = inflater.unconsumed_tail
            if not pending and not inflater.eof:
                out += inflater.flush()
                break
    except zlib.error as exc:
        raise WriteRequestError(f"the body is not gzip: {exc}") from None
    if not inflater.eof:
        raise WriteRequestError("the body is not gzip: it ends before its stream does")
    return out


# (message, [(field, number, type, label, message type)]): a .proto file's messages, field by field
MessageSpec = list[tuple[str, list[tuple[str, int, int, int, str]]]]


def message_classes(file_name: str, package: str, spec: MessageSpec) -> dict[str, Any]:
    """The classes of ``spec``'s messages built with protobuf's descriptor API, in a pool of
    their own (the default pool may hold another message of the same name)."""
    proto = descriptor_pb2.FileDescriptorProto(name=file_name, package=package, syntax="proto3")
    for message_name, fields in spec:
        message = proto.message_type.add(name=message_name)
        for field_name, number, kind, label, type_name in fields:
            added = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                added.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
        for name, _ in spec
    }


def parse_counted(
    message_class: Any, data: bytes | bytearray, limits: WriteLimits, name: str, elements: str
) -> Any:
    """``data`` parsed as ``message_class`` once its elements are counted within
    ``max_elements`` (:func:`collector_agent.protobuf_budget.count_elements`); ``name`` and
    ``elements`` name the message and what it holds in the refusals."""
    try:
        count_elements(data, message_class.DESCRIPTOR, limits.max_elements)
        return message_class.FromString(memoryview(data))
    except ElementBudgetExceeded:
        raise WriteRequestError(
            f"the request holds more than maxElements={limits.max_elements:,} elements ({elements})"
        ) from None
    except (WireError, DecodeError) as exc:
        raise WriteRequestError(f"the body is not {name}: {exc}") from None


def check_series(name: str | None, labels: Mapping[str, str]) -> tuple[str, str] | str:
    """The name and the canonical label set of a series (labels with an empty value
    dropped), or the :data:`SERIES_REFUSALS` reason it is refused for."""
    if not name:
        return "NoName"
    try:
        validate_name(name)
    except BookkeeperError:
        return "InvalidName"
    try:
        return name, format_labels(validate_labels({k: v for k, v in labels.items() if v}))
    except BookkeeperError:
        return "InvalidLabels"


def explain_series(name: str | None, labels: Mapping[str, str]) -> str:
    """The words of :func:`check_series`'s refusal (for the few refusals shown)."""
    try:
        validate_name(name or "")
        validate_labels({k: v for k, v in labels.items() if v})
    except BookkeeperError as exc:
        return str(exc)
    return f"series {name!r}: {labels}"


class Columns:
    """The batch's columns, filled series by series: names and label sets once each, an id
    pair per sample."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.label_sets: dict[str, int] = {}
        self.name_ids: list[int] = []
        self.set_ids: list[int] = []
        self.values: list[float] = []
        self.timestamps: list[int] = []

    def add(self, key: tuple[str, str], values: list[float], timestamps: list[int]) -> None:
        name, label_set = key
        count = len(values)
        self.name_ids.extend([self.names.setdefault(name, len(self.names))] * count)
        self.set_ids.extend([self.label_sets.setdefault(label_set, len(self.label_sets))] * count)
        self.values.extend(values)
        self.timestamps.extend(timestamps)

    def append(self, key: tuple[str, str], value: float, timestamp: int) -> None:
        """One sample of the series ``key``."""
        name, label_set = key
        self.name_ids.append(self.names.setdefault(name, len(self.names)))
        self.set_ids.append(self.label_sets.setdefault(label_set, len(self.label_sets)))
        self.values.append(value)
        self.timestamps.append(timestamp)

    def add_samples(self, key: tuple[str, str], samples: Any) -> None:
        """:meth:`add` of protobuf ``Sample`` messages (``value``, ``timestamp``)."""
        if len(samples) == 1:
            sample = samples[0]
            self.append(key, sample.value, sample.timestamp)
            return
        self.add(key, [sample.value for sample in samples], [sample.timestamp for sample in samples])

    def batch(self, context: str) -> SampleBatch:
        times = np.array(self.timestamps, dtype=np.int64)
        return SampleBatch(
            context=context,
            snapshot_ms=int(times.max()) if len(times) else 0,
            common_labels={},
            names=list(self.names),
            label_sets=list(self.label_sets),
            name_ids=np.array(self.name_ids, dtype=np.int32),
            label_set_ids=np.array(self.set_ids, dtype=np.int32),
            types=np.full(len(self.values), VarType.DOUBLE, dtype=np.uint8),
            values=np.array(self.values, dtype=np.float64).view(np.int64),
            timestamps=times,
        )
