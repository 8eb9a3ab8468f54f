"""Prometheus remote write 1.0: the ``WriteRequest`` message and its decoding into a sample batch.

The body of ``POST /api/v1/write`` is a ``prometheus.WriteRequest`` (Prometheus's
``prompb/remote.proto`` and ``types.proto``) in protobuf, compressed with snappy's block
format ("raw", no framing). The messages are built here with protobuf's descriptor API
from the fields of those two files (no generated code to keep in step, no hand-written
decoder): the protobuf runtime decodes, cramjam's snappy decompresses.

Fields kept: ``TimeSeries.labels`` and ``TimeSeries.samples`` (value, epoch-ms time).
Fields read and not kept, each counted by the source: ``metadata`` (HELP/TYPE of the
families), ``exemplars``, native ``histograms`` (a remote-write 1.1 extension: the series
is refused, Artimon has no histogram type).

How a series maps onto Artimon's data model:

- ``__name__`` is the variable's name; every other label is a label as written. A label
  with an empty value is dropped (in Prometheus an empty value means "no such label").
- every sample becomes a DOUBLE row with its own timestamp; Prometheus's staleness marker
  (a NaN with a special payload) is a NaN like any other, its bits kept.

Refused, each with a :class:`WriteRequestError` naming the reason (the request as a whole):
a body that is not snappy, a decompressed size above ``max_decoded_bytes`` (read from
snappy's header before decompressing), a body that is not a ``WriteRequest``, more than
``max_series`` series or metadata entries, more than ``max_samples`` points (samples,
exemplars, histograms, and labels past a series' 33rd). Refused series by series (the rest
of the request is kept; :attr:`DecodedWrite.refused` counts them by reason): no
``__name__``, a name or label that breaks Artimon's rules (``bookkeeper.wire.validate_name``/
``validate_labels``: characters, lengths, at most 32 labels), a native histogram.

Work bounded by what was sent: the request is walked field by field first
(:func:`collector_agent.protobuf_budget.top_level`: a tag and a length per series, stopped at
the first series past ``max_series``), then parsed one series at a time, each only once its
elements are known to fit in what is left of ``max_samples`` plus 33 labels: a series of
``L`` bytes holds at most ``L / 2`` of them, and a longer one is counted before it is parsed.
So one parse allocates at most ``(33 + max_samples)`` elements, whatever the body holds.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from bookkeeper.wire import MAX_LABELS
from collector_agent.exceptions import WriteRequestError
from collector_agent.protobuf_budget import ElementBudgetExceeded, WireError, count_elements, top_level
from collector_agent.write_body import (
    Columns,
    DecodedWrite,
    MessageSpec,
    WriteLimits,
    check_series,
    explain_series,
    message_classes,
    small_cache,
    snappy_body,
)

__all__ = ["NAME_LABEL", "decode_write_request", "messages"]

NAME_LABEL = "__name__"
_LABELS_READ = MAX_LABELS + 1  # a series' labels with its name; past that it is refused unread
_TIMESERIES, _METADATA = 1, 3

_F = descriptor_pb2.FieldDescriptorProto
# (message, [(field, number, type, label, message type)]) as in prompb/types.proto and remote.proto
_MESSAGES: MessageSpec = [
    (
        "Label",
        [
            ("name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("value", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    (
        "Sample",
        [
            ("value", 1, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
            ("timestamp", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    (
        "Exemplar",
        [
            ("labels", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Label"),
            ("value", 2, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
            ("timestamp", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    # a native histogram's fields are not read: its presence is what matters (the series is refused)
    ("Histogram", [("timestamp", 15, _F.TYPE_INT64, _F.LABEL_OPTIONAL, "")]),
    (
        "TimeSeries",
        [
            ("labels", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Label"),
            ("samples", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Sample"),
            ("exemplars", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Exemplar"),
            ("histograms", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Histogram"),
        ],
    ),
    (
        "MetricMetadata",
        [
            ("type", 1, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
            ("metric_family_name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("help", 4, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("unit", 5, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    (
        "WriteRequest",
        [
            ("timeseries", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.TimeSeries"),
            ("metadata", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.MetricMetadata"),
        ],
    ),
    # The decoding view of the same bytes: a label, an exemplar, a histogram, a metadata entry
    # kept as its encoded bytes (protobuf reads a sub-message field as bytes just as well), so
    # a series' labels come out as one tuple of bytes, the key of the cache of checked series,
    # and are decoded as Labels only the first time they are seen (3x faster per request).
    (
        "TimeSeriesView",
        [
            ("labels", 1, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
            ("samples", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Sample"),
            ("exemplars", 3, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
            ("histograms", 4, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
        ],
    ),
    (
        "WriteRequestView",
        [
            ("timeseries", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.TimeSeriesView"),
            ("metadata", 3, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
        ],
    ),
]


messages: dict[str, Any] = message_classes("artimon/prometheus_remote.proto", "prometheus", _MESSAGES)
"""The protobuf classes by message name (``messages["WriteRequest"]()`` builds one)."""


@small_cache(lambda encoded_labels: sum(map(len, encoded_labels)))
def _series_key(encoded_labels: tuple[bytes, ...]) -> tuple[str, str] | str:
    """The name and the canonical label set of one series' encoded ``Label`` messages,
    checked once per distinct series (a Prometheus sends the same ones request after
    request), or the reason it is refused (:data:`collector_agent.write_body.SERIES_REFUSALS`);
    ``DecodeError`` for bytes that are not a ``Label``."""
    pairs = _label_pairs(encoded_labels)
    if len(pairs) != len({label for label, _ in pairs}):
        return "RepeatedLabel"
    labels = dict(pairs)
    return check_series(labels.pop(NAME_LABEL, None), labels)


def _label_pairs(encoded_labels: tuple[bytes, ...]) -> list[tuple[str, str]]:
    label_type = messages["Label"]
    return [(label.name, label.value) for label in map(label_type.FromString, encoded_labels)]


def _explain(encoded_labels: tuple[bytes, ...]) -> str:
    pairs = _label_pairs(encoded_labels)
    labels = dict(pairs)
    name = labels.pop(NAME_LABEL, None)
    if name is None:
        return f"a series without {NAME_LABEL}: {labels}"
    if len(pairs) != len(labels) + 1:
        return f"series {name!r} repeats a label name"
    return explain_series(name, labels)


def _series_spans(data: bytearray, limits: WriteLimits) -> tuple[list[tuple[int, int]], int]:
    """Where each series is in the request, and how many metadata entries it holds; refused
    at the first series or entry past ``max_series``."""
    spans: list[tuple[int, int]] = []
    others = [0, 0]  # metadata entries, other fields
    for number, _, start, end in top_level(data):
        if number == _TIMESERIES:
            spans.append((start, end))
            if len(spans) <= limits.max_series:
                continue
        else:
            others[number != _METADATA] += 1
            if others[number != _METADATA] <= limits.max_series:
                continue
        raise WriteRequestError(
            f"the request holds more than maxSeries={limits.max_series:,} series (or metadata "
            "entries, or other fields)"
        )
    metadata = others[0]
    return spans, metadata


def _too_many(limits: WriteLimits) -> WriteRequestError:
    return WriteRequestError(
        f"the request holds more than maxSamples={limits.max_samples:,} samples (counting exemplars, "
        f"histograms, a series' labels past its {_LABELS_READ}th and fields unknown to remote write 1.0)"
    )


def decode_write_request(
    body: bytes | bytearray, context: str, limits: WriteLimits | None = None
) -> DecodedWrite:
    """Decode a snappy-compressed ``WriteRequest`` into one batch of context ``context``
    (see the module doc for the mapping, every refusal and the bounds)."""
    limits = limits or WriteLimits()
    data = snappy_body(body, limits)
    columns = Columns()
    try:
        spans, metadata = _series_spans(data, limits)
        decoded = DecodedWrite(columns.batch(context), len(spans), metadata=metadata)
        _read_series(data, spans, limits, columns, decoded)
    except ElementBudgetExceeded:
        raise _too_many(limits) from None
    except (WireError, DecodeError) as exc:
        raise WriteRequestError(f"the body is not a prometheus.WriteRequest: {exc}") from None
    decoded.batch = columns.batch(context)
    return decoded


def _read_series(
    data: bytearray,
    spans: list[tuple[int, int]],
    limits: WriteLimits,
    columns: Columns,
    decoded: DecodedWrite,
) -> None:
    """Each series parsed once its elements are known to be at most what is left of
    ``max_samples`` plus :data:`_LABELS_READ` (a series of ``L`` bytes holds at most ``L / 2``)."""
    view = memoryview(data)
    parse = messages["TimeSeriesView"].FromString
    descriptor = messages["TimeSeriesView"].DESCRIPTOR
    remaining = limits.max_samples
    for start, end in spans:
        if (end - start) // 2 > _LABELS_READ + remaining:
            count_elements(data, descriptor, _LABELS_READ + remaining, start, end)
        series = parse(view[start:end])
        labels, samples = series.labels, series.samples
        exemplars, histograms = len(series.exemplars), len(series.histograms)
        points = len(samples) + exemplars + histograms
        remaining -= points + max(0, len(labels) - _LABELS_READ)
        if remaining < 0:
            raise _too_many(limits)
        decoded.exemplars += exemplars
        if len(labels) > _LABELS_READ or histograms:
            decoded.refuse("Histogram" if histograms else "TooManyLabels", points)
            continue
        encoded = tuple(labels)
        try:
            key = _series_key(encoded)
        except DecodeError as exc:
            raise WriteRequestError(f"the body is not a prometheus.WriteRequest: a label: {exc}") from None
        if isinstance(key, str):
            decoded.refuse(key, points, partial(_explain, encoded))
        else:
            columns.add_samples(key, samples)
