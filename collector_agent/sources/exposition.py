"""One scrape target's answer, Prometheus text or OpenMetrics, as a columnar sample batch.

The parser of record is prometheus_client's (``prometheus_client.parser`` for the text
format 0.0.4, ``prometheus_client.openmetrics.parser`` for OpenMetrics): every body whose
shape is new to this target goes through it whole, and what it refuses fails the scrape.
At about 10 µs a sample it would make a round of 1,000 targets x 1,000 series cost ten
seconds of one core (``benchmarks/scrape_bench.py``), so each target keeps the shape of its
last accepted body: per line, what a later body must repeat (a sample line's series text,
``name{labels}`` as written, and the space after it; any other line whole). A body of the
very same shape differs from the accepted one only in its values, which the text after each
repeated head gives, read by Python's ``float`` (about 0.5 µs a sample all told); anything
else (a new series, a changed ``# TYPE``, a timestamp, an exemplar, a carriage return)
goes through the parser of record again. The first parse of a body takes the parser's
samples in line order (the formats keep a family's lines together; each sample's name is
checked against its line) and, when they disagree, parses each line's series text alone.

Mapping (docs/agent.md): each sample becomes a DOUBLE series named as the sample
(``foo_total``, ``foo_bucket{le=...}``, ``foo_sum``, ``foo_count``,
``foo{quantile=...}``); OpenMetrics ``_created`` samples of counters, histograms and
summaries are left out (a creation time, not a measurement); an empty label value is an
absent label (Prometheus's rule); exposed timestamps are not kept (a round has one time).
The target's labels (``job``, ``instance``, static ones) are added: with ``honor_labels``
the target's own label wins a conflict, without it the target's label is renamed
``exported_<name>`` (Prometheus's rule).

Refused, the whole scrape (:class:`collector_agent.exceptions.ScrapeError`): a body that is
not UTF-8, more lines that are not comments than ``sample_limit`` or more lines than four
times it (both counted before anything is parsed), a
line longer than ``max_line``, a body either parser refuses, a value that is not a number,
two samples of one series. Refused one sample at a time and counted by reason
(``refused``, :data:`SAMPLE_REFUSALS`), never kept one by one (the first reason's words
are): a sample our name and label rules refuse (a label value over 1,024 characters or with
a control character, over 32 labels, a name outside ours).

Work bounded by what was sent: the parser of record builds about 1.2 KB of objects per
sample (measured: 100,000 samples of 15-byte lines peaked at 113 MiB), so a 32 MiB body of
5-byte lines would take 8 GB; ``sample_limit`` stops it before the parse, from
``str.count`` of newlines and comment starts, so one parse holds at most about
``1.2 KB x sample_limit`` besides the body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from bookkeeper import InvalidLabelError, InvalidNameError, SampleBatch, VarType
from bookkeeper.wire import format_labels, validate_labels, validate_name
from collector_agent.exceptions import ScrapeError

__all__ = ["DEFAULT_SAMPLE_LIMIT", "OPENMETRICS", "SAMPLE_REFUSALS", "ExpositionParser", "Scrape"]

OPENMETRICS = "application/openmetrics-text"
DEFAULT_SAMPLE_LIMIT = 200_000
# reason -> what it means; each is counted as SampleRefused<reason>Count by the source
SAMPLE_REFUSALS = {
    "InvalidName": "a sample name that breaks Artimon's rules",
    "InvalidLabels": "a label that breaks Artimon's rules, or more than 32 labels",
    "NotFinite": "a JMX attribute that is not a finite number (jmx source)",
}

# A sample line (of a body the parser of record accepted): the series text (a name, then
# labels up to the line's last closing brace), a value, maybe a timestamp. Label values may
# hold spaces and braces; the greedy brace group ends at the last '}' that a value (and a
# timestamp) alone follow.
_SAMPLE_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) ([^ ]+)(?: ([^ ]+))?")
_COMMENT_OR_BLANK = re.compile(r"[ \t]*(?:#.*)?")
_CREATED_TYPES = frozenset({"counter", "histogram", "gaugehistogram", "summary"})
# What prometheus_client's parsers raise on some malformed bodies besides ValueError.
_PARSER_ERRORS = (ValueError, IndexError, KeyError, TypeError, AttributeError)

_Entry = tuple[str, str] | str  # (name, canonical label text), or the SAMPLE_REFUSALS reason


@dataclass(frozen=True)
class Scrape:
    """What one body gave: the batch, the samples exposed, the samples our rules refused
    (by reason, and the first one's words)."""

    batch: SampleBatch
    exposed: int
    refused_by: dict[str, int]
    refusal: str

    @property
    def refused(self) -> int:
        return sum(self.refused_by.values())


@dataclass
class _Shape:
    """An accepted body's shape and the rows it maps to."""

    keep: np.ndarray  # sample index of each kept row
    names: list[str]
    label_sets: list[str]
    name_ids: np.ndarray
    label_set_ids: np.ndarray
    refused_by: dict[str, int]
    refusal: str
    lens: list[int] = field(default_factory=list)  # per line, how much a later body must repeat
    heads: list[str] = field(default_factory=list)  # per line, what it must repeat
    tails: list[tuple[int, int]] = field(
        default_factory=list
    )  # per sample line: (line, where its value starts)


class ExpositionParser:
    """The parser of one target: its labels, ``honor_labels``, the line limit, and the
    shape of its last accepted body (module doc). Not thread-safe: one scrape at a time."""

    def __init__(
        self,
        target_labels: dict[str, str],
        honor_labels: bool,
        max_line: int,
        sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    ) -> None:
        self.target_labels = dict(target_labels)
        self.honor_labels = honor_labels
        self.max_line = max_line
        self.sample_limit = sample_limit
        self._words: dict[str, str] = {}  # per refusal reason, the words of its first sample
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
        self._check_counts(text)
        lines = text.split("\n")
        if len(text) > self.max_line:
            longest = max(map(len, lines))
            if longest > self.max_line:
                raise ScrapeError(f"a line of {longest} characters is longer than the limit {self.max_line}")
        openmetrics = content_type.strip().lower().startswith(OPENMETRICS)
        # an exemplar (after " # ") or a carriage return: lines the shape cannot split
        plain = "\r" not in text and not (openmetrics and " # " in text)
        shape = self._shape
        if plain and shape is not None:
            values = self._known_shape(shape, lines)
            if values is not None:
                return self._scrape(shape, values[shape.keep], len(shape.tails), context, timestamp_ms)
        families = self._parse_of_record(text, openmetrics)
        self.full_parses += 1
        dropped = {
            f"{family.name}_created" for family in families if openmetrics and family.type in _CREATED_TYPES
        }
        exposed = sum(len(family.samples) for family in families)
        matches = [_SAMPLE_LINE.fullmatch(line) for line in lines]
        found = [match for match in matches if match is not None]
        others = [line for line, match in zip(lines, matches, strict=True) if match is None]
        if plain and len(found) == exposed and all(_COMMENT_OR_BLANK.fullmatch(line) for line in others):
            values = _numbers([match[2] for match in found])
            _numbers([match[3] for match in found if match[3]])  # timestamps: read, not kept
            samples = [sample for family in families for sample in family.samples]
            if all(
                sample.name == match[1].partition("{")[0]
                for sample, match in zip(samples, found, strict=True)
            ):  # the parser's samples in line order (the format keeps a family's lines together)
                entries = [self._entry(sample.name, sample.labels) for sample in samples]
            else:
                entries = [self._entry_of_text(match[1]) for match in found]
            shape = self._shape_of(entries, dropped)
            # what a later body must repeat: each sample line's series text and the space
            # after it, each other line whole (one character more: a longer line differs)
            shape.lens = [
                len(m[1]) + 1 if m else len(line) + 1 for line, m in zip(lines, matches, strict=True)
            ]
            shape.heads = [line[:n] for line, n in zip(lines, shape.lens, strict=True)]
            shape.tails = [(row, n) for row, (m, n) in enumerate(zip(matches, shape.lens, strict=True)) if m]
            self._shape = shape
            return self._scrape(shape, values[shape.keep], exposed, context, timestamp_ms)
        self._shape = None  # a body the regex cannot follow: the parser's samples, uncached
        samples = [sample for family in families for sample in family.samples]
        entries = [self._entry(sample.name, sample.labels) for sample in samples]
        shape = self._shape_of(entries, dropped)
        values = np.array([float(sample.value) for sample in samples], dtype=np.float64)
        return self._scrape(shape, values[shape.keep], exposed, context, timestamp_ms)

    def _check_counts(self, text: str) -> None:
        """Refuse a body of more samples or lines than the limit allows, counted in C before
        any line becomes an object: lines not starting with ``#`` (an upper bound of the
        samples: a blank line counts too), and all lines (a family's ``HELP``, ``TYPE`` and
        ``UNIT`` make at most four lines a sample)."""
        lines = text.count("\n") + (not text.endswith("\n"))
        samples = lines - text.count("\n#") - text.startswith("#")
        if samples > self.sample_limit:
            raise ScrapeError(
                f"the body has {samples:,} lines that are not comments,"
                f" more than sampleLimit={self.sample_limit:,}"
            )
        if lines > 4 * self.sample_limit:
            raise ScrapeError(
                f"the body has {lines:,} lines, more than 4 x sampleLimit={self.sample_limit:,}"
            )

    @staticmethod
    def _known_shape(shape: _Shape, lines: list[str]) -> np.ndarray | None:
        """The values of a body of the shape last accepted, or None: another shape (a sample
        line with a timestamp too: the parser of record reads those)."""
        if len(lines) != len(shape.lens):
            return None
        if [line[:n] for line, n in zip(lines, shape.lens, strict=True)] != shape.heads:
            return None
        values = "\n".join([lines[row][n:] for row, n in shape.tails])
        if " " in values or "\t" in values:
            return None
        return _numbers(values.split("\n") if shape.tails else [])

    def batch_of(
        self, samples: list[tuple[str, dict[str, str], float]], context: str, timestamp_ms: int
    ) -> Scrape:
        """Samples another format gave (``jmx``'s JSON) as a batch, under the same rules
        (target labels, ``honor_labels``, refusals counted, a series twice refused whole)."""
        shape = self._shape_of([self._entry(name, labels) for name, labels, _ in samples], set())
        values = np.array([value for _, _, value in samples], dtype=np.float64)
        return self._scrape(shape, values[shape.keep], len(samples), context, timestamp_ms)

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
        if len(self._entries) > 4 * (len(self._shape.tails) if self._shape else 0) + 100_000:
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
            reason = "InvalidName" if isinstance(exc, InvalidNameError) else "InvalidLabels"
            if reason not in self._words:
                self._words[reason] = str(exc)
            return reason

    def _shape_of(self, entries: list[_Entry], dropped: set[str]) -> _Shape:
        names: dict[str, int] = {}
        label_sets: dict[str, int] = {}
        keep: list[int] = []
        name_ids: list[int] = []
        set_ids: list[int] = []
        seen: set[tuple[int, int]] = set()
        refused: dict[str, int] = {}
        for row, entry in enumerate(entries):
            if isinstance(entry, str):
                refused[entry] = refused.get(entry, 0) + 1
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
            np.array(keep, dtype=np.intp),
            list(names),
            list(label_sets),
            np.array(name_ids, dtype=np.int32),
            np.array(set_ids, dtype=np.int32),
            refused,
            self._words.get(next(iter(refused), ""), ""),
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
        return Scrape(batch, exposed, shape.refused_by, shape.refusal)


def _numbers(tokens: list[str]) -> np.ndarray:
    """Sample values as float64 (``NaN``, ``+Inf``, ``-Inf`` included)."""
    try:
        if "_" in "".join(tokens):  # Python's float reads 1_000; Prometheus (Go) does not
            raise ValueError("a digit separator '_'")
        return np.array(list(map(float, tokens)), dtype=np.float64)  # 10x numpy's str to float
    except ValueError as exc:
        raise ScrapeError(f"a sample value is not a number: {str(exc)[:200]}") from None
