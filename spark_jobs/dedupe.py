"""Replayed samples dropped before the records are exploded (``raw_ingest``).

``raw_ingest`` groups the landing records of a micro-batch by their framework labels (an
endpoint's identity: a replay comes from the endpoint that sent the original) and Spark's
``applyInPandasWithState`` calls :func:`dedupe_records` once per group with what the group
remembers of its samples within the watermark (:class:`Seen`, kept in the state store).
A record goes on whole, goes on with a ``keep`` mask over its samples (``explode`` applies
it), or is dropped: a sample is kept unless the group already has its (series, time), or
its time is at or before the watermark (late, as ``dropDuplicatesWithinWatermark`` has it).

What a group remembers, small because an endpoint sends the same series round after round:

- for each round time it has samples of, the *shapes* it saw then; a shape is the sorted
  64-bit digests of a record's series, stored once however many rounds use it: ten rounds
  of 1,500 series are one 12 KB shape and ten (time, shape) entries. A replayed record
  (the same shape at the same round) is dropped without a look at its samples;
- for the samples of records without a round (their times are the app's own, one per
  sample), a digest of each (series, time) pair.

The state forgets what the watermark has passed, and times out with its last time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bookkeeper.ground import series_hashes
from spark_jobs.series import ShapeCache

if TYPE_CHECKING:
    from pyspark.sql.streaming.state import GroupState

__all__ = ["Seen", "dedupe_records"]

DIGEST_CACHE_BYTES = 64 << 20  # per Python worker: 8 bytes a series
_PAIR_MIX = np.uint64(0x9E3779B97F4A7C15)  # spreads a time over 64 bits before the XOR


def _pairs(series: np.ndarray, times: np.ndarray) -> np.ndarray:
    pairs: np.ndarray = series ^ (times.astype(np.uint64) * _PAIR_MIX)
    return pairs


def _first_occurrences(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values, and a mask of each one's first occurrence."""
    distinct, first = np.unique(values, return_index=True)
    mask = np.zeros(len(values), dtype=bool)
    mask[first] = True
    return distinct, mask


class Seen:
    """The (series, time) pairs a group has had samples of, as round shapes and pairs."""

    def __init__(self) -> None:
        self.rounds: dict[int, list[int]] = {}  # round time -> indexes into shapes
        self.shapes: list[np.ndarray] = []
        self.shape_index: dict[bytes, int] = {}
        self.pairs = np.empty(0, dtype=np.uint64)
        self.pair_times = np.empty(0, dtype=np.int64)

    @classmethod
    def load(cls, state: tuple[Any, ...] | None) -> Seen:
        seen = cls()
        if state is None:
            return seen
        times, shape_of, lengths, shapes, pairs, pair_times = state
        digests = np.frombuffer(shapes, dtype="<u8")
        ends = np.cumsum(np.frombuffer(lengths, dtype="<i4"))
        seen.shapes = np.split(digests, ends[:-1]) if len(ends) else []
        seen.shape_index = {shape.tobytes(): i for i, shape in enumerate(seen.shapes)}
        for time, shape in zip(
            np.frombuffer(times, dtype="<i8").tolist(),
            np.frombuffer(shape_of, dtype="<i4").tolist(),
            strict=True,
        ):
            seen.rounds.setdefault(time, []).append(shape)
        seen.pairs = np.frombuffer(pairs, dtype="<u8")
        seen.pair_times = np.frombuffer(pair_times, dtype="<i8")
        return seen

    def dump(self) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]:
        """The state row (``schema.DEDUPE_STATE``)."""
        entries = [(time, shape) for time, shapes in self.rounds.items() for shape in shapes]
        return (
            np.array([time for time, _ in entries], dtype="<i8").tobytes(),
            np.array([shape for _, shape in entries], dtype="<i4").tobytes(),
            np.array([len(shape) for shape in self.shapes], dtype="<i4").tobytes(),
            b"".join(shape.astype("<u8").tobytes() for shape in self.shapes),
            self.pairs.astype("<u8").tobytes(),
            self.pair_times.astype("<i8").tobytes(),
        )

    @property
    def latest(self) -> int | None:
        """The last time remembered; None when nothing is."""
        times = list(self.rounds)
        if len(self.pair_times):
            times.append(int(self.pair_times.max()))
        return max(times, default=None)

    def forget(self, watermark: int) -> None:
        """Forget the times at or before ``watermark``, and the shapes no round uses."""
        self.rounds = {time: shapes for time, shapes in self.rounds.items() if time > watermark}
        used = sorted({shape for shapes in self.rounds.values() for shape in shapes})
        renumber = {old: new for new, old in enumerate(used)}
        self.rounds = {time: [renumber[s] for s in shapes] for time, shapes in self.rounds.items()}
        self.shapes = [self.shapes[old] for old in used]
        self.shape_index = {shape.tobytes(): i for i, shape in enumerate(self.shapes)}
        recent = self.pair_times > watermark
        self.pairs, self.pair_times = self.pairs[recent], self.pair_times[recent]

    def admit(
        self, series: np.ndarray, times: np.ndarray, round_ms: int | None, watermark: int
    ) -> np.ndarray:
        """The mask of a record's samples to keep (``series`` digests, ``times`` ms; all
        ``round_ms`` when the record has a round), and remember them."""
        if round_ms is not None:
            return self._admit_round(series, round_ms, watermark)
        keep = times > watermark
        pairs = _pairs(series, times)
        _, first = _first_occurrences(pairs)
        keep &= first & ~np.isin(pairs, self.pairs)
        for time in set(times[keep].tolist()) & self.rounds.keys():  # a pair seen in a round record
            at = times == time
            keep[at] &= ~np.isin(series[at], self._at(time))
        self.pairs = np.concatenate([self.pairs, pairs[keep]])
        self.pair_times = np.concatenate([self.pair_times, times[keep]])
        return keep

    def _at(self, time: int) -> np.ndarray:
        return np.concatenate(
            [self.shapes[shape] for shape in self.rounds.get(time, [])] or [np.empty(0, np.uint64)]
        )

    def _admit_round(self, series: np.ndarray, time: int, watermark: int) -> np.ndarray:
        if time <= watermark:
            return np.zeros(len(series), dtype=bool)
        shape, keep = _first_occurrences(series)
        key = shape.tobytes()
        index = self.shape_index.get(key)
        at = self.rounds.setdefault(time, [])
        if index is not None and index in at:
            keep[:] = False  # a replay
            return keep
        if at:
            keep &= ~np.isin(series, self._at(time))
        if len(self.pairs):
            keep &= ~np.isin(_pairs(series, np.full(len(series), time, dtype=np.int64)), self.pairs)
        if index is None:
            index = self.shape_index[key] = len(self.shapes)
            self.shapes.append(shape)
        at.append(index)
        return keep


_digests: ShapeCache[np.ndarray] = ShapeCache(DIGEST_CACHE_BYTES, lambda value: value.nbytes)


def _strings(values: Any) -> bytes:
    texts = [text.encode() for text in values] if values is not None else []
    return np.array([len(text) for text in texts], dtype="<i4").tobytes() + b"".join(texts)


def _record_series(group: str | None, common: dict[str, str], record: Any) -> np.ndarray:
    names = list(record.names) if record.names is not None else []
    label_sets = list(record.label_sets) if record.label_sets is not None else []
    shape = hashlib.blake2b(digest_size=16)
    for part in ((group or "").encode(), _strings(names), _strings(label_sets)):
        shape.update(part)
        shape.update(b"|")
    shape.update(record.name_ids or b"")
    shape.update(b"|")
    shape.update(record.label_set_ids or b"")

    def build() -> np.ndarray:
        name_ids = np.frombuffer(record.name_ids or b"", dtype="<i4")
        set_ids = np.frombuffer(record.label_set_ids or b"", dtype="<i4")
        return series_hashes(common, names, label_sets, name_ids, set_ids)

    return _digests.get(shape.digest(), build)


def _where(record: Any) -> str:
    return f"landing record of {record.context} at {record.round_ms} from {record.endpoint}"


def dedupe_records(
    key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """For ``applyInPandasWithState``: a group's landing records of a micro-batch, each
    kept (with a ``keep`` mask when only some of its samples are) or dropped."""
    if state.hasTimedOut:
        state.remove()
        return
    watermark = state.getCurrentWatermarkMs()
    seen = Seen.load(state.get if state.exists else None)
    seen.forget(watermark)
    group = key[0]
    common = json.loads(group) if group is not None else {}
    for frame in frames:
        chosen: list[int] = []
        masks: list[bytes | None] = []
        for position, record in enumerate(frame.itertuples(index=False)):
            count = len(record.types or b"")
            if len(record.timestamps or b"") != 8 * count:
                raise ValueError(f"{_where(record)}: its vectors differ in length")
            try:
                series = _record_series(group, common, record)
            except ValueError as exc:
                raise ValueError(f"{_where(record)}: {exc}") from None
            if len(series) != count:
                raise ValueError(f"{_where(record)}: its vectors differ in length")
            round_ms = None if pd.isna(record.round_ms) else int(record.round_ms)
            times = np.frombuffer(record.timestamps or b"", dtype="<i8")
            keep = seen.admit(series, times, round_ms, watermark)
            if keep.all():
                chosen.append(position)
                masks.append(None)
            elif keep.any():
                chosen.append(position)
                masks.append(keep.astype(np.uint8).tobytes())
        if chosen:
            yield frame.iloc[chosen].assign(keep=masks)
    latest = seen.latest
    if latest is None:
        state.remove()
    else:
        state.update(seen.dump())
        state.setTimeoutTimestamp(latest)
