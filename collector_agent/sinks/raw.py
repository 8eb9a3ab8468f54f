"""``raw``: lands the sample batches of Artimon events in Avro container files for Spark.

Files are ``<directory>/<prefix>-<start ms>-<n>.avro``, written as ``.avro.tmp`` and renamed
when rolled (by ``rollSize`` bytes or ``rollInterval`` seconds). Each channel transaction
becomes one block of the file, fsynced before the transaction commits: Flume's HDFS sink
loses data exactly here, this one cannot (a committed take is on disk). At start, a
``.avro.tmp`` left by a crash is cut after its last complete block (what was committed)
and renamed, so nothing committed is lost and nothing half-written is read.

Keys: ``directory`` (required), ``prefix`` (default the sink's name), ``batchSize`` (100),
``rollSize`` (bytes, 134217728), ``rollInterval`` (s, 60), ``codec`` (``deflate`` or
``null``), and the batch sinks' dead-letter keys: an event whose body is not a sample batch
is refused as malformed. Each record carries the event's integrity stamp (its ``checksum``
field, computed here for an event that came without one), which ``raw_ingest`` checks
before the record reaches Parquet (``collector_agent/integrity.py``).

Each batch landed is told to the agent's round ledger with its landing file's final name
(:mod:`collector_agent.ledger`); the ``history`` terminal holds it once ``raw_ingest``
reports that file committed.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from bookkeeper import MalformedFrameError
from bookkeeper.ground import LandingWriter, decode_sample_batch, encode_checksum, recover
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import MalformedEventError
from collector_agent.integrity import STAMP_HEADER, event_checksum, identity
from collector_agent.ledger import round_of
from collector_agent.sinks.base import BatchSink
from collector_agent.status import Status

__all__ = ["RawSink"]

log = logging.getLogger(__name__)


class RawSink(BatchSink):
    counter_names = (*BatchSink.counter_names, "FilesRolledCount", "BytesWrittenCount")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._writer: LandingWriter | None = None
        self._opened_at = 0.0
        self._sequence = 0

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.directory = Path(context.get_str("directory"))
        self.prefix = context.get_str("prefix", self.name)
        if "/" in self.prefix:
            raise context.error("prefix", f"{self.prefix!r} cannot hold a '/'")
        self.roll_size = context.get_int("rollSize", 128 * 1024 * 1024, minimum=1024)
        self.roll_interval = context.get_float("rollInterval", 60.0, minimum=0.01)
        self.codec = context.get_str("codec", "deflate").strip()
        if self.codec not in ("deflate", "null"):
            raise context.error("codec", f"{self.codec!r} is neither deflate nor null")

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in sorted(self.directory.glob(f"{self.prefix}-*.avro.tmp")):
            kept = recover(leftover)
            final = leftover.with_name(leftover.name[: -len(".tmp")])
            if kept:
                os.replace(leftover, final)
                log.warning("sink %s: recovered %s with %d committed records", self.name, final.name, kept)
            else:
                leftover.unlink()
        if self.ledger is not None:
            self.ledger.declare("history", self._place)
        super().start()

    @property
    def _place(self) -> str:
        return f"sink {self.name} (channel {self.channel.name})"

    def stop(self) -> None:
        self._roll()
        if self.ledger is not None:
            self.ledger.withdraw("history", self._place)
        super().stop()

    def _open(self) -> LandingWriter:
        if self._writer is None:
            self._sequence += 1
            stamp = int(time.time() * 1000)
            path = self.directory / f"{self.prefix}-{stamp}-{self._sequence}.avro.tmp"
            self._writer = LandingWriter(path, self.codec)
            self._opened_at = time.monotonic()
        return self._writer

    def _roll(self) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        writer.close()
        if writer.records:
            os.replace(writer.path, writer.path.with_name(writer.path.name[: -len(".tmp")]))
            directory = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(directory)  # the rename survives a power loss too
            finally:
                os.close(directory)
            self.counters.add("FilesRolledCount")
        else:
            writer.path.unlink()

    def process(self) -> Status:
        if self._writer is not None and (
            self._writer.size >= self.roll_size or time.monotonic() - self._opened_at >= self.roll_interval
        ):
            self._roll()
        return super().process()

    def deliver(self, events: list[Event]) -> None:
        bad = []
        sizes = []
        for position, event in enumerate(events):
            try:
                sizes.append(len(decode_sample_batch(event.body)))  # Spark must read every landing file
            except MalformedFrameError:
                bad.append(position)
        if bad:
            raise MalformedEventError(f"{len(bad)} events are not sample batches", bad)
        records = []
        for event in events:
            get = event.headers.get
            stamp = get(STAMP_HEADER)  # checked by the channel's take
            crc = int(stamp, 16) if stamp is not None else event_checksum(event.body, event.headers)
            ident = identity(get("artimon.round"), get("artimon.endpoint"), get("artimon.agent"))
            records.append(event.body + ident + encode_checksum(crc))
        writer = self._open()
        before = writer.size
        writer.write_block(records)  # fsynced: the take may commit
        self.counters.add("BytesWrittenCount", writer.size - before)
        if self.ledger is not None:
            final = writer.path.name[: -len(".tmp")]
            for event, samples in zip(events, sizes, strict=True):
                polled = round_of(event.headers)
                if polled is not None:
                    self.ledger.land(final, *polled, samples)
