"""The write-ahead log of ingest batches: a crash of VHMS loses nothing it acknowledged.

The service appends each batch it admits to the log before it answers ``ingest``; with the
``always`` fsync policy the answer waits for the record's fsync, with ``periodic`` for its
write only (the log is then fsynced every ``fsync_period`` seconds). One writer thread
does the writing, so concurrent calls share one write and one fsync (group commit). At
start, after the snapshot is restored, :func:`replay` applies the segments in order; ingest
is idempotent on (series, bucket), so a record the snapshot holds already changes nothing.
At each snapshot the log :meth:`~WriteAheadLog.rotate`\\ s under the store's lock (the next
record starts a new segment) and :meth:`~WriteAheadLog.truncate` deletes the older segments
once the snapshot is durable.

A record carries series by id, and the keys of the series its segment has not named yet,
so every segment replays on its own: a damaged record loses its samples and, for the rest
of its segment, those of the series it named first (counted), never another segment's, and
never a sample given to the wrong series.

Format, limits and every rejection reason: docs/vhms.md, "Write-ahead log".

| concept | module |
|---|---|
| the record: header, batch payload, encoding, decoding, finding a sound one | ``record.py`` |
| the segment files: names, listing, deletion | ``segments.py`` |
| the writer: append, group commit, fsync policies, rotate, truncate (its states) | ``writer.py`` |
| replay at start: damage skipped and counted, a torn tail cut | ``replay.py`` |
"""

from __future__ import annotations

from vhms.server.wal.record import MAX_RECORD, Batch, MalformedRecordError, decode_batch, encode_batch
from vhms.server.wal.replay import ReplayReport, replay
from vhms.server.wal.segments import SEGMENT_BYTES, remove_segments, segments
from vhms.server.wal.writer import FSYNC_POLICIES, PendingRecord, WriteAheadLog

__all__ = [
    "FSYNC_POLICIES",
    "MAX_RECORD",
    "SEGMENT_BYTES",
    "Batch",
    "MalformedRecordError",
    "PendingRecord",
    "ReplayReport",
    "WriteAheadLog",
    "decode_batch",
    "encode_batch",
    "remove_segments",
    "replay",
    "segments",
]
