"""One scrape target's answer, Prometheus text or OpenMetrics, as a columnar sample batch.

The parser of record is prometheus_client's (``prometheus_client.parser`` for the text
format 0.0.4, ``prometheus_client.openmetrics.parser`` for OpenMetrics): every body whose
shape is new to this target goes through it whole, and what it refuses fails the scrape.
At about 10 µs a sample it would make a round of 1,000 targets x 1,000 series cost ten
seconds of one core (``benchmarks/scrape_bench.py``), so each target keeps the shape of its
last accepted body: the series text of each sample line (``name{labels}``, as written) and
the comment lines. A body with the very same shape differs from an accepted one only in its
values (and timestamps), which one regex pass and a numpy conversion read (about 0.5 µs a
sample); anything else (a new series, a changed ``# TYPE``, a line the regex does not
split, an exemplar) goes through the parser of record again.

Mapping (docs/agent.md): each sample becomes a DOUBLE series named as the sample
(``foo_total``, ``foo_bucket{le=...}``, ``foo_sum``, ``foo_count``,
``foo{quantile=...}``); OpenMetrics ``_created`` samples of counters, histograms and
summaries are left out (a creation time, not a measurement); an empty label value is an
absent label (Prometheus's rule); exposed timestamps are not kept (a round has one time).
The target's labels (``job``, ``instance``, static ones) are added: with ``honor_labels``
the target's own label wins a conflict, without it the target's label is renamed
``exported_<name>`` (Prometheus's rule).

Refused, the whole scrape (:class:`collector_agent.exceptions.ScrapeError`): a body that is
not UTF-8, a line longer than ``max_line``, a body either parser refuses, a value that is
not a number, two samples of one series. Refused one sample at a time and counted
(``refused``): a sample our name and label rules refuse (a label value over 1,024
characters or with a control character, over 32 labels, a name outside ours).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from bookkeeper import InvalidLabelError, InvalidNameError, SampleBatch, VarType
from bookkeeper.wire import format_labels, validate_labels, validate_name
from collector_agent.exceptions import ScrapeError

__all__ = ["OPENMETRICS", "ExpositionParser", "Scrape"]

OPENMETRICS = "application/openmetrics-text"

# A sample line: the series text (a name, then labels up to the line's last closing brace),
# a value, maybe a timestamp. Label values may hold spaces and braces; the greedy brace group
# ends at the last '}' that a value (and timestamp) alone follow.
_SAMPLE_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^\n]*\})?) ([^ \n]+)(?: ([^ \n]+))?$", re.M)
_COMMENT_LINE = re.compile(r"^[ \t]*#[^\n]*", re.M)
_BLANK_LINE = re.compile(r"^[ \t]*$", re.M)
_CREATED_TYPES = frozenset({"counter", "histogram", "gaugehistogram", "summary"})
# What prometheus_client's parsers raise on some malformed bodies besides ValueError.
_PARSER_ERRORS = (ValueError, IndexError, KeyError, TypeError, AttributeError)

_Entry = tuple[str, str] | str  # (name, canonical label text), or why our rules refuse the sample


@dataclass(frozen=True)
class Scrape:
    """What one body gave: the batch, the samples exposed, the samples our rules refused
    (with the first reason)."""

    batch: SampleBatch
    exposed: int
    refused: int
    refusal: str


@dataclass
class _Shape:
    """An accepted body's shape and the rows it maps to."""

    series: list[str]
    comments: list[str]
    keep: np.ndarray  # line index of each kept row
    names: list[str]
    label_sets: list[str]
    name_ids: np.ndarray
    label_set_ids: np.ndarray
    refused: int
    refusal: str


class ExpositionParser:
    """The parser of one target: its labels, ``honor_labels``, the line limit, and the
    shape of its last accepted body (module doc). Not thread-safe: one scrape at a time."""

    def __init__(self, target_labels: dict[str, str], honor_labels: bool, max_line: int) -> None:
        self.target_labels = dict(target_labels)
        self.honor_labels = honor_labels
        self.max_line = max_line
        self._shape: _Shape | None = None
        self._entries: dict[str, _Entry] = {}  # series text -> entry, for lines seen before
        self.full_parses = 0  # bodies that went through the parser of record

    def parse(self, body: bytes, content_type: str, context: str, timestamp_ms: int) -> Scrape:
        """The batch of ``body`` (served as ``content_type``); ``ScrapeError`` if refused."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScrapeError(
                f"the body is not UTF-8: byte {exc.start} ({body[exc.start : exc.start + 8]!r})"
            ) from None
        if len(text) > self.max_line:
            longest = max(map(len, text.split("\n")))
            if longest > self.max_line:
                raise ScrapeError(f"a line of {longest} characters is longer than the limit {self.max_line}")
        openmetrics = content_type.strip().lower().startswith(OPENMETRICS)
        lines = _SAMPLE_LINE.findall(text)
        comments = _COMMENT_LINE.findall(text)
        whole = (
            len(lines) + len(comments) + len(_BLANK_LINE.findall(text)) == text.count("\n") + 1
            and not (openmetrics and " # {" in text)  # an exemplar: the regex cannot split it
        )
        shape = self._shape
        series = [line[0] for line in lines]
        if whole and shape is not None and series == shape.series and comments == shape.comments:
            values = _numbers([line[1] for line in lines])
            _check_timestamps(lines)
            return self._scrape(shape, values[shape.keep], len(lines), context, timestamp_ms)
        families = self._parse_of_record(text, openmetrics)
        self.full_parses += 1
        dropped = {
            f"{family.name}_created" for family in families if openmetrics and family.type in _CREATED_TYPES
        }
        exposed = sum(len(family.samples) for family in families)
        if whole and len(lines) == exposed:
            values = _numbers([line[1] for line in lines])
            _check_timestamps(lines)
            entries = [self._entry_of_text(text_) for text_ in series]
            shape = self._shape_of(entries, series, comments, dropped)
            self._shape = shape
            return self._scrape(shape, values[shape.keep], exposed, context, timestamp_ms)
        self._shape = None  # a body the regex cannot follow: the parser's samples, uncached
        samples = [sample for family in families for sample in family.samples]
        entries = [self._entry(sample.name, sample.labels) for sample in samples]
        shape = self._shape_of(entries, [], [], dropped)
        values = np.array([float(sample.value) for sample in samples], dtype=np.float64)
        return self._scrape(shape, values[shape.keep], exposed, context, timestamp_ms)

    # -- the parser of record ----------------------------------------------------------------

    @staticmethod
    def _parse_of_record(text: str, openmetrics: bool) -> list[Any]:
        try:
            if openmetrics:
                return list(openmetrics_families(text))  # type: ignore[no-untyped-call]
            return list(text_families(text))
        except _PARSER_ERRORS as exc:
            what = "OpenMetrics" if openmetrics else "Prometheus text format"
            raise ScrapeError(f"not valid {what}: {str(exc)[:200]}") from None

    def _entry_of_text(self, series_text: str) -> _Entry:
        """The entry of a sample line's series text, parsed once per target."""
        if series_text in self._entries:
            return self._entries[series_text]
        try:
            (family,) = text_families(series_text + " 0\n")
            (sample,) = family.samples
        except _PARSER_ERRORS as exc:
            raise ScrapeError(f"not a sample: {series_text[:200]!r}: {str(exc)[:200]}") from None
        entry = self._entry(sample.name, sample.labels)
        if len(self._entries) > 4 * (len(self._shape.series) if self._shape else 0) + 100_000:
            self._entries.clear()  # series that come and go: bounded, rebuilt from what is served
        self._entries[series_text] = entry
        return entry

    # -- our rules ---------------------------------------------------------------------------

    def _entry(self, name: str, labels: dict[str, str]) -> _Entry:
        """(name, label text) under our rules, target labels merged; or the refusal's reason."""
        own = {key: value for key, value in labels.items() if value != ""}
        if self.honor_labels:
            merged = {**self.target_labels, **own}
        else:
            merged = dict(own)
            for key, value in self.target_labels.items():
                if key in merged:
                    exported = f"exported_{key}"
                    while exported in merged:
                        exported = f"exported_{exported}"
                    merged[exported] = merged.pop(key)
                merged[key] = value
        try:
            return validate_name(name), format_labels(validate_labels(merged))
        except (InvalidNameError, InvalidLabelError) as exc:
            return str(exc)

    @staticmethod
    def _shape_of(entries: list[_Entry], series: list[str], comments: list[str], dropped: set[str]) -> _Shape:
        names: dict[str, int] = {}
        label_sets: dict[str, int] = {}
        keep: list[int] = []
        name_ids: list[int] = []
        set_ids: list[int] = []
        seen: set[tuple[int, int]] = set()
        refused, refusal = 0, ""
        for row, entry in enumerate(entries):
            if isinstance(entry, str):
                refused += 1
                refusal = refusal or entry
                continue
            name, label_text = entry
            if name in dropped:
                continue
            ids = (names.setdefault(name, len(names)), label_sets.setdefault(label_text, len(label_sets)))
            if ids in seen:
                raise ScrapeError(f"two samples of the series {name}{{{label_text}}}")
            seen.add(ids)
            keep.append(row)
            name_ids.append(ids[0])
            set_ids.append(ids[1])
        return _Shape(
            series,
            comments,
            np.array(keep, dtype=np.intp),
            list(names),
            list(label_sets),
            np.array(name_ids, dtype=np.int32),
            np.array(set_ids, dtype=np.int32),
            refused,
            refusal,
        )

    @staticmethod
    def _scrape(shape: _Shape, values: np.ndarray, exposed: int, context: str, timestamp_ms: int) -> Scrape:
        rows = len(values)
        batch = SampleBatch(
            context=context,
            snapshot_ms=timestamp_ms,
            common_labels={},
            names=shape.names,
            label_sets=shape.label_sets,
            name_ids=shape.name_ids,
            label_set_ids=shape.label_set_ids,
            types=np.full(rows, VarType.DOUBLE.value, dtype=np.uint8),
            values=np.ascontiguousarray(values, dtype=np.float64).view(np.int64),
            timestamps=np.full(rows, timestamp_ms, dtype=np.int64),
        )
        return Scrape(batch, exposed, shape.refused, shape.refusal)


def _numbers(tokens: list[str]) -> np.ndarray:
    """Sample values as float64 (``NaN``, ``+Inf``, ``-Inf`` included)."""
    try:
        if "_" in "".join(tokens):  # Python's float reads 1_000; Prometheus (Go) does not
            raise ValueError("a digit separator '_'")
        return np.array(tokens, dtype=str).astype(np.float64)
    except ValueError as exc:
        raise ScrapeError(f"a sample value is not a number: {str(exc)[:200]}") from None


def _check_timestamps(lines: list[tuple[str, str, str]]) -> None:
    stamps = [line[2] for line in lines if line[2]]
    if stamps:
        _numbers(stamps)
