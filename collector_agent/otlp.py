"""OTLP metrics (OpenTelemetry's protocol, ``ExportMetricsServiceRequest``) into a sample batch,
mapped as Prometheus 3's OTLP receiver maps them with its default settings.

The messages are ``opentelemetry-proto``'s (the protobuf runtime parses); the body is
counted first (:func:`collector_agent.protobuf_budget.count_elements`, at most
``max_elements``), so a parse allocates no more than that whatever the body holds.

How a metric becomes series (docs/promql.md, "OTLP"), as Prometheus's
``UnderscoreEscapingWithSuffixes`` strategy does:

- the name: every run of characters other than letters, digits and ``:`` becomes one
  ``_``; the unit is added as a word (``s`` -> ``seconds``, ``By`` -> ``bytes``, ``1/s`` ->
  ``per_second``; ``{...}`` annotations dropped), a monotonic sum ends in ``_total``, a gauge
  of unit ``1`` in ``_ratio``; a leading digit gets a ``_``;
- a label from each data point attribute: characters other than letters, digits and ``_``
  become ``_``, a leading digit gets ``key_``, a single leading ``_`` gets ``key``; two
  attributes that sanitize to one name join their values with ``;`` (in key order);
- from the resource: ``service.namespace/service.name`` (or ``service.name``) is ``job``,
  ``service.instance.id`` is ``instance``; the other resource attributes go to the
  ``target_info`` gauge (value 1, with ``job`` and ``instance``) and onto no other series,
  except those named in ``promote`` (as Prometheus's ``promote_resource_attributes``);
- gauges and sums: one sample per data point (``as_double`` or ``as_int``; a point flagged
  "no recorded value" is Prometheus's staleness marker);
- explicit-bucket histograms: the bookkeeper's histogram series, ``<name>_bucket{le=...}``
  cumulative (``le`` written as :func:`bookkeeper.format_bound` writes it: ``0.5``, ``1.0``,
  ``+Inf``), ``<name>_sum`` and ``<name>_count``;
- summaries: ``<name>{quantile=...}``, ``<name>_sum``, ``<name>_count``;
- times: ``time_unix_nano`` in milliseconds; exemplars (counted) and start times are not kept.

Refused metric by metric, counted by reason (``Delta``: a sum or histogram of delta
temporality, which Prometheus refuses too; ``Unsupported``: an exponential histogram,
Prometheus's native histogram that Artimon has no type for, or a metric without data), and
series by series as every receiver does (``InvalidName``, ``InvalidLabels``, ``NoName``).
Refused as a whole (:class:`WriteRequestError`): bytes that are not an
``ExportMetricsServiceRequest``, more than ``max_elements`` elements, more than
``max_samples`` samples (a histogram point counts its buckets plus two).
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from bookkeeper import format_bound
from collector_agent.exceptions import WriteRequestError
from collector_agent.write_body import (
    STALE_NAN,
    Columns,
    DecodedWrite,
    WriteLimits,
    check_series,
    explain_series,
    parse_counted,
    small_cache,
)

__all__ = ["decode_otlp_request", "label_name", "metric_name"]

_NO_RECORDED_VALUE = 1
_TARGET_INFO_STEP_MS = 150_000  # half of PromQL's lookback, as Prometheus spaces target_info
_IDENTIFYING = ("service.name", "service.namespace", "service.instance.id")
_UNITS = {
    "d": "days", "h": "hours", "min": "minutes", "s": "seconds", "ms": "milliseconds",
    "us": "microseconds", "ns": "nanoseconds", "By": "bytes", "KiBy": "kibibytes",
    "MiBy": "mebibytes", "GiBy": "gibibytes", "TiBy": "tibibytes", "KBy": "kilobytes",
    "MBy": "megabytes", "GBy": "gigabytes", "TBy": "terabytes", "m": "meters", "V": "volts",
    "A": "amperes", "J": "joules", "W": "watts", "g": "grams", "Cel": "celsius", "Hz": "hertz",
    "1": "", "%": "percent",
}  # fmt: skip
_PER_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year"}
_NOT_NAME = re.compile(r"[^A-Za-z0-9:]+")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_]")
_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


def _clean_unit(unit: str) -> str:
    return re.sub(r"_+", "_", _NOT_NAME.sub("_", unit)).lstrip("_")


def _unit_words(unit: str) -> tuple[str, str]:
    """The main unit's word and the per-unit's (``per_second``), ``{...}`` annotations dropped."""
    main, _, per = (part.strip() for part in unit.partition("/"))
    main_word = "" if not main or "{" in main or "}" in main else _UNITS.get(main, main)
    per_word = "" if not per or "{" in per or "}" in per else _PER_UNITS.get(per, per)
    return _clean_unit(main_word), _clean_unit(f"per_{per_word}") if per_word else ""


@small_cache(lambda name, unit, kind: len(name) + len(unit), maxsize=4096)
def metric_name(name: str, unit: str, kind: str) -> str:
    """The Prometheus name of an OTLP metric (module doc); ``kind`` is ``counter`` for a
    monotonic sum, ``gauge`` for a gauge, anything else otherwise."""
    tokens = [token for token in _NOT_NAME.split(name) if token]
    main, per = _unit_words(unit)
    if main and main not in tokens:
        tokens.append(main)
    if per:
        tokens.append(per)
    if kind == "counter":
        tokens = [*(token for token in tokens if token != "total"), "total"]
    if kind == "gauge" and unit == "1":
        tokens = [*(token for token in tokens if token != "ratio"), "ratio"]
    joined = "_".join(tokens)
    return "_" + joined if joined[:1].isdigit() else joined


@small_cache(lambda key: len(key), maxsize=4096)
def label_name(key: str) -> str:
    """The Prometheus label name of an OTLP attribute key (module doc)."""
    name = _NOT_LABEL.sub("_", key)
    if name[:1].isdigit():
        return "key_" + name
    if name.startswith("_") and not name.startswith("__"):
        return "key" + name
    return name


def _as_string(value: Any) -> str:
    """An attribute's value as text: strings as they are, numbers and booleans as Prometheus
    writes them, bytes in base64, arrays and maps as JSON."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return str(value.string_value)
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "int_value":
        return str(value.int_value)
    if kind == "double_value":
        return repr(value.double_value)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return json.dumps(_as_json(value), separators=(",", ":"))


def _as_json(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_as_json(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _as_json(item.value) for item in value.kvlist_value.values}
    return None if kind is None else _as_string(value)


def _attribute_labels(attributes: Any, skip: tuple[str, ...] = ()) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in sorted(attributes, key=lambda kv: kv.key):
        if item.key in skip:
            continue
        name = label_name(item.key)
        if name == "__name__":
            continue
        value = _as_string(item.value)
        labels[name] = f"{labels[name]};{value}" if labels.get(name) else value
    return labels


@small_cache(lambda name, labels: len(name) + sum(len(key) + len(value) for key, value in labels))
def _series_key(name: str, labels: tuple[tuple[str, str], ...]) -> tuple[str, str] | str:
    return check_series(name, dict(labels))


class _Resource:
    """One resource's labels: ``job`` and ``instance`` for every series, the promoted
    attributes where a point has no label of that name, the rest for ``target_info``."""

    def __init__(self, resource: Any, promote: frozenset[str]) -> None:
        attributes = {item.key: _as_string(item.value) for item in resource.attributes}
        self.identity: dict[str, str] = {}
        if "service.name" in attributes:
            namespace = attributes.get("service.namespace")
            job = attributes["service.name"]
            self.identity["job"] = f"{namespace}/{job}" if namespace else job
        if "service.instance.id" in attributes:
            self.identity["instance"] = attributes["service.instance.id"]
        promoted = [item for item in resource.attributes if item.key in promote]
        self.promoted = _attribute_labels(promoted)
        others = [item.key for item in resource.attributes if item.key not in _IDENTIFYING]
        self.info = _attribute_labels(resource.attributes, _IDENTIFYING) if others else None
        self.earliest = self.latest = -1

    def labels(self, attributes: Any) -> dict[str, str]:
        labels = _attribute_labels(attributes)
        for name, value in self.promoted.items():
            labels.setdefault(name, value)
        labels.update(self.identity)
        return labels

    def saw(self, time_ms: int) -> None:
        self.earliest = time_ms if self.earliest < 0 else min(self.earliest, time_ms)
        self.latest = max(self.latest, time_ms)


def _read_point(point: Any, resource: _Resource) -> tuple[int, dict[str, str], bool]:
    """A data point's time in ms (noted by its resource), labels, and whether it is flagged
    "no recorded value"."""
    time_ms: int = point.time_unix_nano // 1_000_000
    resource.saw(time_ms)
    return time_ms, resource.labels(point.attributes), bool(point.flags & _NO_RECORDED_VALUE)


class _Converter:
    """Emits the samples of a request into the batch's columns, counting them against
    ``max_samples`` and refusals by reason."""

    def __init__(self, limits: WriteLimits, decoded: DecodedWrite, columns: Columns) -> None:
        self.limits = limits
        self.decoded = decoded
        self.columns = columns
        self.samples = 0

    def count(self, samples: int) -> None:
        self.samples += samples
        if self.samples > self.limits.max_samples:
            raise WriteRequestError(
                f"the request holds more than maxSamples={self.limits.max_samples:,} samples "
                "(a histogram point counts its buckets and two)"
            )

    def emit(self, name: str, labels: dict[str, str], value: float, time_ms: int) -> None:
        self.count(1)
        key = _series_key(name, tuple(sorted(labels.items())))
        if isinstance(key, str):
            self.decoded.refuse(key, 1, partial(explain_series, name, labels))
        else:
            self.columns.append(key, value, time_ms)

    def metric(self, metric: Any, resource: _Resource) -> None:
        kind = metric.WhichOneof("data")
        handler: Callable[[Any, _Resource], None] | None = getattr(self, f"_{kind}", None)
        if handler is None:
            points = getattr(metric, kind).data_points if kind else []
            self._refuse_metric(
                "Unsupported", points, resource, f"metric {metric.name!r}: OTLP {kind} is not kept"
            )
            return
        handler(metric, resource)

    def _refuse_metric(self, reason: str, points: Any, resource: _Resource, why: str) -> None:
        """A metric refused whole; its points' times still bound ``target_info``, as Prometheus's."""
        self.count(len(points))
        for point in points:
            resource.saw(point.time_unix_nano // 1_000_000)
        self.decoded.refuse(reason, len(points), partial(str, why))

    def _gauge(self, metric: Any, resource: _Resource) -> None:
        self._numbers(metric_name(metric.name, metric.unit, "gauge"), metric.gauge.data_points, resource)

    def _sum(self, metric: Any, resource: _Resource) -> None:
        if self._delta(metric, metric.sum, resource):
            return
        kind = "counter" if metric.sum.is_monotonic else "sum"
        self._numbers(metric_name(metric.name, metric.unit, kind), metric.sum.data_points, resource)

    def _delta(self, metric: Any, data: Any, resource: _Resource) -> bool:
        if data.aggregation_temporality == _CUMULATIVE:
            return False
        why = f"metric {metric.name!r}: delta temporality is not kept"
        self._refuse_metric("Delta", data.data_points, resource, why)
        return True

    def _numbers(self, name: str, points: Any, resource: _Resource) -> None:
        for point in points:
            time_ms, labels, stale = _read_point(point, resource)
            self.decoded.exemplars += len(point.exemplars)
            if stale:
                value = STALE_NAN
            else:
                value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
            self.emit(name, labels, value, time_ms)

    def _histogram(self, metric: Any, resource: _Resource) -> None:
        if self._delta(metric, metric.histogram, resource):
            return
        name = metric_name(metric.name, metric.unit, "histogram")
        for point in metric.histogram.data_points:
            time_ms, labels, stale = _read_point(point, resource)
            self.decoded.exemplars += len(point.exemplars)
            bounds, counts = list(point.explicit_bounds), list(point.bucket_counts)
            if counts and len(counts) != len(bounds) + 1:
                self.count(1)
                why = f"{name}: {len(counts)} bucket counts for {len(bounds)} bounds"
                self.decoded.refuse("Malformed", 1, partial(str, why))
                continue
            cumulative = 0
            for bound, count in zip([*bounds, math.inf], counts, strict=False):
                cumulative += count
                value = STALE_NAN if stale else float(cumulative)
                self.emit(f"{name}_bucket", {**labels, "le": format_bound(bound)}, value, time_ms)
            if point.HasField("sum"):
                self.emit(f"{name}_sum", labels, STALE_NAN if stale else point.sum, time_ms)
            self.emit(f"{name}_count", labels, STALE_NAN if stale else float(point.count), time_ms)

    def _summary(self, metric: Any, resource: _Resource) -> None:
        name = metric_name(metric.name, metric.unit, "summary")
        for point in metric.summary.data_points:
            time_ms, labels, stale = _read_point(point, resource)
            for quantile in point.quantile_values:
                value = STALE_NAN if stale else quantile.value
                self.emit(name, {**labels, "quantile": format_bound(quantile.quantile)}, value, time_ms)
            self.emit(f"{name}_sum", labels, STALE_NAN if stale else point.sum, time_ms)
            self.emit(f"{name}_count", labels, STALE_NAN if stale else float(point.count), time_ms)

    def target_info(self, resource: _Resource) -> None:
        """``target_info`` from the earliest to the latest point of the resource, every
        2.5 minutes and at the latest (a resource without identity or other attributes has none)."""
        if resource.info is None or not resource.identity or resource.latest < 0:
            return
        labels = {**resource.info, **resource.identity}
        times = range(resource.earliest, resource.latest, _TARGET_INFO_STEP_MS)
        if len(times) >= self.limits.max_samples:
            self.count(len(times))  # refuses at once: a span of years between two points
        for time_ms in itertools.chain(times, [resource.latest]):
            self.emit("target_info", labels, 1.0, time_ms)


def decode_otlp_request(
    data: bytes | bytearray, context: str, limits: WriteLimits, promote: frozenset[str] = frozenset()
) -> DecodedWrite:
    """Decode an uncompressed ``ExportMetricsServiceRequest`` into one batch of context
    ``context`` (module doc); ``promote``: resource attributes that become labels."""
    name = "an OTLP ExportMetricsServiceRequest"
    request = parse_counted(ExportMetricsServiceRequest, data, limits, name, "messages, strings, numbers")
    columns = Columns()
    decoded = DecodedWrite(columns.batch(context), 0)
    converter = _Converter(limits, decoded, columns)
    for resource_metrics in request.resource_metrics:
        resource = _Resource(resource_metrics.resource, promote)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                converter.metric(metric, resource)
        converter.target_info(resource)
    decoded.series = len(columns.label_sets)
    decoded.batch = columns.batch(context)
    return decoded
