"""The Parquet writer's integrity check: a record whose bytes are not those its agent stamped
never reaches the history (``collector_agent/integrity.py`` has the stamp: the CRC32C of the
event's body, the sample batch, XOR the CRC32C of its round, endpoint and agent as a landing
record encodes them after the body).

**A landing record** (:func:`check_landed`) carries the stamp as its ``checksum`` field.
Spark hands the decoded record over, so the check encodes it again as fastavro wrote it (an
array or a map as one block then the end block, strings and bytes after their length, the
common labels in key order as ``encode_sample_batch`` writes them: Spark's reader keeps no
map order) and compares; Avro's encoding of a value is unique but for the blocking and a
map's order, which our writers never vary. The strings of a batch's lists are encoded for all
records at once in numpy; a record costs a CRC32C extension per field. A record without a
checksum (an older landing file) passes.

**A Kafka record** (:func:`check_records`, ``raw_ingest --kafka``) carries the stamp as its
``artimon.crc`` header and the body as its value, bytes as the agent's Kafka sink sent them:
the check is one CRC32C of the value (the identity's is cached), before the value is decoded.
A record without the header (a producer that does not stamp) passes; a stamp that is not the
eight hex digits of the checksum is a mismatch.

A mismatch is marked in the ``damage`` column (``checksum mismatch``), logged with its
endpoint, round and where it is (landing file; topic, partition and offset), and counted by
``raw_ingest`` (the query's observed metric ``ChecksumMismatchCount``); the record stays in
its landing file or its topic, nothing of it is stored.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from functools import lru_cache

import google_crc32c
import numpy as np
import pyarrow as pa

from bookkeeper.ground import encode_avro_long, encode_identity

__all__ = ["MISMATCH", "STAMP_HEADER", "check_landed", "check_records"]

log = logging.getLogger(__name__)

MISMATCH = "checksum mismatch"
STAMP_HEADER = "artimon.crc"  # collector_agent.STAMP_HEADER (spark_jobs does not import the agent)
_ROUND = re.compile(r"[0-9]{1,18}")
_IDENTITY = ("round", "endpoint", "agent")
_LISTS = ("names", "label_sets")
_BINARIES = ("name_ids", "label_set_ids", "types", "values", "timestamps")


def _extend(value: int, data: bytes) -> int:
    return int(google_crc32c.extend(value, data))


def _offsets(column: pa.Array) -> np.ndarray:
    return np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset : column.offset + len(column) + 1]


def _data(column: pa.Array) -> np.ndarray:
    data = column.buffers()[2]
    return np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)


def _encoded_strings(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Every string of ``strings`` as Avro writes it (its length, a varint, then its bytes),
    one after the other, and where each begins (one more entry: the end). The strings'
    bytes keep their order, so they fill every position the lengths leave free."""
    offsets = _offsets(strings).astype(np.int64)
    lengths = np.diff(offsets)
    zigzag = lengths.astype(np.uint64) << np.uint64(1)
    widths = np.ones(len(lengths), dtype=np.int64)
    for shift in (7, 14, 21, 28):
        widths += zigzag >= np.uint64(1 << shift)
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(widths + lengths, out=starts[1:])
    varints = np.empty((len(lengths), 5), dtype=np.uint8)
    is_length = np.zeros(int(starts[-1]), dtype=bool)
    for byte in range(5):
        more = (widths > byte + 1).astype(np.uint64) << np.uint64(7)
        varints[:, byte] = ((zigzag >> np.uint64(7 * byte)) & np.uint64(0x7F)) | more
        is_length[starts[:-1][widths > byte] + byte] = True
    out = np.empty(int(starts[-1]), dtype=np.uint8)
    out[is_length] = varints[np.arange(5) < widths[:, None]]
    if len(lengths):
        out[~is_length] = _data(strings)[offsets[0] : offsets[-1]]
    return out, starts


class _EncodedLists:
    """A ``list<string>`` column: each record's encoded strings as one span."""

    def __init__(self, column: pa.ListArray) -> None:
        self.lists = np.asarray(column.offsets)
        data, self.starts = _encoded_strings(column.values)
        self.data = data.tobytes()  # google_crc32c takes bytes, not a view

    def crc(self, record: int, value: int) -> int:
        first, end = self.lists[record], self.lists[record + 1]
        if end == first:
            return _extend(value, b"\x00")
        value = _extend(value, encode_avro_long(int(end - first)))
        value = _extend(value, self.data[self.starts[first] : self.starts[end]])
        return _extend(value, b"\x00")


class _Bytes:
    def __init__(self, column: pa.Array) -> None:
        self.offsets = _offsets(column)
        self.data = _data(column).tobytes()

    def crc(self, record: int, value: int) -> int:
        first, end = int(self.offsets[record]), int(self.offsets[record + 1])
        return _extend(_extend(value, encode_avro_long(end - first)), self.data[first:end])


def _string(text: str) -> bytes:
    encoded = text.encode()
    return encode_avro_long(len(encoded)) + encoded


def _map(entries: list[tuple[str, str]]) -> bytes:
    """A map in key order, as ``encode_sample_batch`` writes it (Spark's reader keeps no order)."""
    if not entries:
        return b"\x00"
    pairs = (_string(k) + _string(v) for k, v in sorted(entries))
    return b"".join([encode_avro_long(len(entries)), *pairs, b"\x00"])


def _checksums(batch: pa.RecordBatch) -> list[int]:
    """Each record's checksum, worked out again from its fields."""
    column = batch.column
    lists = [_EncodedLists(column(name)) for name in _LISTS]
    binaries = [_Bytes(column(name)) for name in _BINARIES]
    strings = _EncodedLists(column("strings"))
    contexts = column("context").to_pylist()
    snapshots = column("snapshot_ms").to_pylist()
    labels = column("common_labels").to_pylist()
    rounds = column("round_ms").to_pylist()
    endpoints = column("endpoint").to_pylist()
    agents = column("agent").to_pylist()
    out = []
    for record in range(batch.num_rows):
        head = _string(contexts[record]) + encode_avro_long(snapshots[record]) + _map(labels[record])
        value = _extend(0, head)
        for encoded in lists:
            value = encoded.crc(record, value)
        for binary in binaries:
            value = binary.crc(record, value)
        value = strings.crc(record, value)
        out.append(value ^ _extend(0, encode_identity(rounds[record], endpoints[record], agents[record])))
    return out


def check_landed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over landing records (with their ``file``): each with a ``damage``
    column, null when the record is as its agent stamped it."""
    for batch in batches:
        stamped = batch.column("checksum").to_pylist()
        damage: list[str | None] = [None] * batch.num_rows
        if any(stamp is not None for stamp in stamped):
            for record, (stamp, found) in enumerate(zip(stamped, _checksums(batch), strict=True)):
                if stamp is not None and stamp != found:
                    damage[record] = MISMATCH
                    log.error(
                        "landing record of %s at round %s in %s: %s, set aside",
                        batch.column("endpoint")[record],
                        batch.column("round_ms")[record],
                        batch.column("file")[record],
                        MISMATCH,
                    )
        yield _with_damage(batch, damage)


def _with_damage(batch: pa.RecordBatch, damage: list[str | None]) -> pa.RecordBatch:
    """``batch`` with its ``damage`` column (null: as stamped, or no stamp)."""
    return pa.RecordBatch.from_arrays(
        [*batch.columns, pa.array(damage, pa.string())], [*batch.schema.names, "damage"]
    )


@lru_cache(maxsize=8192)
def _identity_crc(round_text: str | None, endpoint: str | None, agent: str | None) -> int:
    """The CRC32C of an event's identity from its headers, as ``collector_agent.identity``
    encodes it (a round that is not a number is none)."""
    round_ms = int(round_text) if round_text and _ROUND.fullmatch(round_text) else None
    return _extend(0, encode_identity(round_ms, endpoint, agent))


def check_records(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over the topic's records (:data:`~spark_jobs.schema.RECORDS`): each with
    a ``damage`` column, null when the record is as its agent stamped it or carries no stamp."""
    for batch in batches:
        stamps = batch.column("stamp").to_pylist()
        damage: list[str | None] = [None] * batch.num_rows
        if any(stamp is not None for stamp in stamps):
            values = _Bytes(batch.column("value"))
            rounds, endpoints, agents = (batch.column(name).to_pylist() for name in _IDENTITY)
            for record, stamp in enumerate(stamps):
                if stamp is None:
                    continue
                first, end = int(values.offsets[record]), int(values.offsets[record + 1])
                identity = _identity_crc(rounds[record], endpoints[record], agents[record])
                if "%08x" % (_extend(0, values.data[first:end]) ^ identity) != stamp:
                    damage[record] = MISMATCH
                    log.error(
                        "kafka record of %s at round %s (%s-%s@%s): %s, set aside",
                        endpoints[record],
                        rounds[record],
                        batch.column("topic")[record],
                        batch.column("partition")[record],
                        batch.column("offset")[record],
                        MISMATCH,
                    )
        yield _with_damage(batch, damage)
