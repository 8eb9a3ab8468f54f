"""Prometheus remote write 2.0: the ``io.prometheus.write.v2.Request`` message and its decoding
into a sample batch.

A Prometheus 3 whose ``remote_write`` block says ``protobuf_message:
io.prometheus.write.v2.Request`` posts, snappy-compressed (block format), a ``Request``
(Prometheus's ``prompb/io/prometheus/write/v2/types.proto``) with the ``Content-Type``
``application/x-protobuf;proto=io.prometheus.write.v2.Request``. Its strings are sent once,
in ``symbols`` (``symbols[0]`` is the empty string), and each series names its labels by
``labels_refs``: pairs of indexes into ``symbols``, name then value. The messages are built
here with protobuf's descriptor API from the fields of that file (as
:mod:`collector_agent.remote_write` does for 1.0); the protobuf runtime decodes.

Fields kept: a series' labels and ``samples`` (value, epoch-ms time; a NaN keeps its bits,
so the staleness marker goes through). Read and counted, not kept: ``exemplars``,
``metadata`` (type, help, unit), samples' start (created) times. Native ``histograms`` with
custom buckets become the bookkeeper's histogram series
(:mod:`collector_agent.native_histograms`); exponential ones refuse their series
(``Histogram``: their buckets have no fixed bounds to name).

Refused as a whole (:class:`WriteRequestError`): a body that is not snappy or over
``max_decoded_bytes``, more than ``max_elements`` elements (counted from the tags before
the runtime parses: symbols, series, samples, label references...), not a ``Request``, a
``symbols`` table that does not start with ``""``, more than ``max_series`` series or
``max_samples`` samples (with histograms and exemplars). Refused series by series, counted
by reason: an odd number of label references or one past the table (``UnknownSymbol``),
more than 33 labels with the name (``TooManyLabels``), a repeated label, and what
:func:`collector_agent.write_body.check_series` refuses.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from google.protobuf import descriptor_pb2

from bookkeeper.wire import MAX_LABELS
from collector_agent.exceptions import WriteRequestError
from collector_agent.native_histograms import custom_buckets, is_stale, total
from collector_agent.write_body import (
    STALE_NAN,
    Columns,
    DecodedWrite,
    MessageSpec,
    WriteLimits,
    check_series,
    explain_series,
    message_classes,
    parse_counted,
    small_cache,
    snappy_body,
)

__all__ = ["CONTENT_TYPE", "decode_write_request_v2", "messages_v2"]

CONTENT_TYPE = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
_NAME = "__name__"
_LABELS_READ = MAX_LABELS + 1

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
# (message, [(field, number, type, label, message type)]) as in io/prometheus/write/v2/types.proto
_MESSAGES: MessageSpec = [
    (
        "Sample",
        [
            ("value", 1, _F.TYPE_DOUBLE, _OPTIONAL, ""),
            ("timestamp", 2, _F.TYPE_INT64, _OPTIONAL, ""),
            ("start_timestamp", 3, _F.TYPE_INT64, _OPTIONAL, ""),
        ],
    ),
    (
        "Exemplar",
        [
            ("labels_refs", 1, _F.TYPE_UINT32, _REPEATED, ""),
            ("value", 2, _F.TYPE_DOUBLE, _OPTIONAL, ""),
            ("timestamp", 3, _F.TYPE_INT64, _OPTIONAL, ""),
        ],
    ),
    (
        "Metadata",
        [
            ("type", 1, _F.TYPE_INT32, _OPTIONAL, ""),
            ("help_ref", 3, _F.TYPE_UINT32, _OPTIONAL, ""),
            ("unit_ref", 4, _F.TYPE_UINT32, _OPTIONAL, ""),
        ],
    ),
    (
        "BucketSpan",
        [("offset", 1, _F.TYPE_SINT32, _OPTIONAL, ""), ("length", 2, _F.TYPE_UINT32, _OPTIONAL, "")],
    ),
    # the fields a histogram with custom buckets is read by (count and zero_count are oneofs
    # there; a sender sets one of each pair); negative buckets and the zero bucket belong to
    # exponential schemas, which are refused
    (
        "Histogram",
        [
            ("count_int", 1, _F.TYPE_UINT64, _OPTIONAL, ""),
            ("count_float", 2, _F.TYPE_DOUBLE, _OPTIONAL, ""),
            ("sum", 3, _F.TYPE_DOUBLE, _OPTIONAL, ""),
            ("schema", 4, _F.TYPE_SINT32, _OPTIONAL, ""),
            ("positive_spans", 11, _F.TYPE_MESSAGE, _REPEATED, ".io.prometheus.write.v2.BucketSpan"),
            ("positive_deltas", 12, _F.TYPE_SINT64, _REPEATED, ""),
            ("positive_counts", 13, _F.TYPE_DOUBLE, _REPEATED, ""),
            ("timestamp", 15, _F.TYPE_INT64, _OPTIONAL, ""),
            ("custom_values", 16, _F.TYPE_DOUBLE, _REPEATED, ""),
        ],
    ),
    (
        "TimeSeries",
        [
            ("labels_refs", 1, _F.TYPE_UINT32, _REPEATED, ""),
            ("samples", 2, _F.TYPE_MESSAGE, _REPEATED, ".io.prometheus.write.v2.Sample"),
            ("histograms", 3, _F.TYPE_MESSAGE, _REPEATED, ".io.prometheus.write.v2.Histogram"),
            ("exemplars", 4, _F.TYPE_MESSAGE, _REPEATED, ".io.prometheus.write.v2.Exemplar"),
            ("metadata", 5, _F.TYPE_MESSAGE, _OPTIONAL, ".io.prometheus.write.v2.Metadata"),
        ],
    ),
    (
        "Request",
        [
            ("symbols", 4, _F.TYPE_STRING, _REPEATED, ""),
            ("timeseries", 5, _F.TYPE_MESSAGE, _REPEATED, ".io.prometheus.write.v2.TimeSeries"),
        ],
    ),
]


messages_v2: dict[str, Any] = message_classes(
    "artimon/prometheus_write_v2.proto", "io.prometheus.write.v2", _MESSAGES
)
"""The protobuf classes by message name (``messages_v2["Request"]()`` builds one)."""


@small_cache(lambda pairs: sum(len(name) + len(value) for name, value in pairs))
def _series_key(pairs: tuple[tuple[str, str], ...]) -> tuple[str, str] | str:
    """The checked key of one series' ``(name, value)`` labels, or the reason it is refused."""
    labels = dict(pairs)
    if len(labels) != len(pairs):
        return "RepeatedLabel"
    return check_series(labels.pop(_NAME, None), labels)


def _explain(pairs: tuple[tuple[str, str], ...]) -> str:
    labels = dict(pairs)
    if len(labels) != len(pairs):
        return f"a series repeats a label name: {pairs!r}"
    name = labels.pop(_NAME, None)
    return f"a series without {_NAME}: {labels}" if name is None else explain_series(name, labels)


def _parse(data: bytearray, limits: WriteLimits) -> Any:
    elements = "symbols, series, samples, label references..."
    request = parse_counted(
        messages_v2["Request"], data, limits, "an io.prometheus.write.v2.Request", elements
    )
    if len(request.symbols) and request.symbols[0] != "":
        raise WriteRequestError("the symbols table does not start with the empty string")
    if len(request.timeseries) > limits.max_series:
        raise WriteRequestError(f"the request holds more than maxSeries={limits.max_series:,} series")
    return request


def decode_write_request_v2(body: bytes | bytearray, context: str, limits: WriteLimits) -> DecodedWrite:
    """Decode a snappy-compressed remote-write 2.0 ``Request`` into one batch of context
    ``context`` (module doc)."""
    request = _parse(snappy_body(body, limits), limits)
    symbols = list(request.symbols)
    columns = Columns()
    decoded = DecodedWrite(columns.batch(context), len(request.timeseries))
    points = 0
    for series in request.timeseries:
        samples, refs = series.samples, series.labels_refs
        histograms, exemplars = len(series.histograms), len(series.exemplars)
        points += len(samples) + histograms + exemplars
        if points > limits.max_samples:
            raise _too_many(limits)
        decoded.exemplars += exemplars
        decoded.metadata += series.HasField("metadata")
        reason = _shape_refusal(refs, len(symbols))
        if reason:
            decoded.refuse(reason, len(samples) + histograms)
            continue
        pairs = tuple(
            zip([symbols[ref] for ref in refs[::2]], [symbols[ref] for ref in refs[1::2]], strict=True)
        )
        if histograms:
            points += _histogram_series(
                series.histograms, pairs, columns, decoded, limits.max_samples - points
            )
            continue
        key = _series_key(pairs)
        if isinstance(key, str):
            decoded.refuse(key, len(samples), partial(_explain, pairs))
        else:
            columns.add_samples(key, samples)
    decoded.batch = columns.batch(context)
    return decoded


def _too_many(limits: WriteLimits) -> WriteRequestError:
    return WriteRequestError(
        f"the request holds more than maxSamples={limits.max_samples:,} samples "
        "(counting exemplars, and histograms with their buckets)"
    )


def _shape_refusal(refs: Any, symbols: int) -> str:
    """The reason a series is refused before its labels are read, or ``""``."""
    if len(refs) > 2 * _LABELS_READ:
        return "TooManyLabels"
    if len(refs) % 2 or (len(refs) and max(refs) >= symbols):
        return "UnknownSymbol"
    return ""


def _histogram_series(
    histograms: Any, pairs: tuple[tuple[str, str], ...], columns: Columns, decoded: DecodedWrite, room: int
) -> int:
    """Custom-buckets histograms as the bookkeeper's series (:mod:`collector_agent.native_histograms`);
    the samples they make beyond one each (counted against ``max_samples``: ``room`` is left),
    or the series refused (``Histogram``) for an exponential schema or buckets that do not fit."""
    read = [(histogram, custom_buckets(histogram)) for histogram in histograms]
    if any(buckets is None for _, buckets in read):
        decoded.refuse(
            "Histogram", len(read), partial(str, f"native histograms of {dict(pairs)}: not custom buckets")
        )
        return 0
    extra = sum(len(buckets or ()) + 1 for _, buckets in read)
    if extra > room:
        return extra  # the caller refuses the request before anything is built
    labels = dict(pairs)
    name = labels.pop(_NAME, "")
    for histogram, buckets in read:
        stale = is_stale(histogram)
        at = histogram.timestamp
        rows = [(f"{name}_bucket", {**labels, "le": le}, count) for le, count in buckets or ()]
        rows += [(f"{name}_sum", labels, histogram.sum), (f"{name}_count", labels, total(histogram))]
        for row_name, row_labels, value in rows:
            key = _series_key(((_NAME, row_name), *sorted(row_labels.items())))
            if isinstance(key, str):
                decoded.refuse(key, 1, partial(explain_series, row_name, row_labels))
            else:
                columns.append(key, STALE_NAN if stale else value, at)
                decoded.histogram_rows += 1
        decoded.histograms += 1
    return extra
