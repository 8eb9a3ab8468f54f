"""One scrape of a target, as the ``prometheus`` source (and ``jmx``, on it) makes it: the
target (its URL from ``host:port`` or a URL, its labels, its parser; from the configuration
or a discovered znode's JSON payload), the three series Prometheus writes for every scrape
(``up``, ``scrape_duration_seconds``, ``scrape_samples_scraped``) appended to what it gave,
and a failed request in plain words."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np
import urllib3

from bookkeeper import SampleBatch, VarType
from bookkeeper.wire import format_labels, validate_labels
from collector_agent.sources.exposition import ExpositionParser

__all__ = ["Target", "decode_target", "failure_text", "report_batch", "target_url", "with_report"]

_MAX_PAYLOAD = 64 * 1024  # a target's znode payload


@dataclass
class Target:
    """One scrape target: its URL, its labels (``job``, ``instance`` and static ones) and its
    parser (which keeps the shape of its last body)."""

    url: str
    labels: dict[str, str]
    parser: ExpositionParser = field(repr=False)


def target_url(spec: str, metrics_path: str, scheme: str) -> str:
    """``spec`` as a URL: a URL is kept, ``host:port`` becomes ``<scheme>://host:port<path>``."""
    url = spec if "://" in spec else f"{scheme}://{spec}{metrics_path}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"scrape target {spec!r} is not an http(s) URL or host:port")
    return url


def decode_target(group: str, name: str, data: bytes) -> tuple[str | None, dict[str, str]]:
    """A target znode's payload: (url or None for ``host:port`` in its name, labels)."""
    if not data.strip():
        return None, {}
    if len(data) > _MAX_PAYLOAD:
        raise ValueError(f"target {group}/{name}: payload of {len(data)} bytes > {_MAX_PAYLOAD}")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"target {group}/{name}: payload is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"target {group}/{name}: payload {raw!r} is not a JSON object")
    url, labels = raw.get("url"), raw.get("labels", {})
    if url is not None and not isinstance(url, str):
        raise ValueError(f"target {group}/{name}: url {url!r} is not a string")
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError(f"target {group}/{name}: labels {labels!r} are not strings")
    return url, validate_labels(labels)


_REPORT_NAMES = ["up", "scrape_duration_seconds", "scrape_samples_scraped"]


def report_batch(target: Target, round_ms: int, up: bool, duration: float, exposed: int) -> SampleBatch:
    """The three series Prometheus writes for every scrape of a target."""
    values = np.array([1.0 if up else 0.0, duration, float(exposed)], dtype=np.float64)
    return SampleBatch(
        context=target.labels["job"],
        snapshot_ms=round_ms,
        common_labels={},
        names=list(_REPORT_NAMES),
        label_sets=[format_labels(target.labels)],
        name_ids=np.arange(3, dtype=np.int32),
        label_set_ids=np.zeros(3, dtype=np.int32),
        types=np.full(3, VarType.DOUBLE.value, dtype=np.uint8),
        values=values.view(np.int64),
        timestamps=np.full(3, round_ms, dtype=np.int64),
    )


def with_report(scraped: SampleBatch, report: SampleBatch) -> SampleBatch:
    """The scraped rows, then the report's (names and label sets appended to the tables)."""
    names = scraped.names + report.names
    label_sets = scraped.label_sets + report.label_sets
    return SampleBatch(
        context=scraped.context,
        snapshot_ms=scraped.snapshot_ms,
        common_labels={},
        names=names,
        label_sets=label_sets,
        name_ids=np.concatenate([scraped.name_ids, report.name_ids + len(scraped.names)]),
        label_set_ids=np.concatenate([scraped.label_set_ids, report.label_set_ids + len(scraped.label_sets)]),
        types=np.concatenate([scraped.types, report.types]),
        values=np.concatenate([scraped.values, report.values]),
        timestamps=np.concatenate([scraped.timestamps, report.timestamps]),
    )


def failure_text(exc: BaseException, timeout: float) -> str:
    """A failed request in plain words."""
    if isinstance(exc, urllib3.exceptions.TimeoutError):
        return f"no answer within the scrape timeout {timeout} s"
    return f"{type(exc).__name__}: {exc}"
