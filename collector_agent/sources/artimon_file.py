"""``artimon_file``: reads the ``*.artimon`` files of one directory (``/var/run/artimon``)
every ``interval`` seconds, for processes that export files instead of serving Thrift.

Each file that changed since its last read becomes one event whose body is an Avro sample
batch (``bookkeeper/ground/sample_batch.avsc``) and whose headers are ``artimon.context`` (the
file's module name), ``artimon.file`` and ``artimon.round`` (the read's time aligned on the
interval, epoch ms).

Keys: ``directory`` (default ``/var/run/artimon``), ``interval`` (s, default 60),
``maxFileSize`` (bytes, default 64 MiB), ``batchSize`` (files per channel transaction,
default 100).

Refused, counted in ``EventReadFail`` and logged once per file and change: a path that
resolves outside the directory (a symlink out), a file larger than ``maxFileSize``, a file
with a malformed line (the whole file: a half-read snapshot would look like removals).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from bookkeeper import SampleBatch, TextFormatError, parse_lines
from bookkeeper.ground import encode_sample_batch
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException
from collector_agent.sources.base import PollableSource
from collector_agent.status import Status

__all__ = ["ArtimonFileSource"]

log = logging.getLogger(__name__)


class ArtimonFileSource(PollableSource):
    def configure(self, context: Context) -> None:
        super().configure(context)
        self.directory = Path(context.get_str("directory", "/var/run/artimon"))
        self.interval = context.get_float("interval", 60.0, minimum=0.01)
        self.max_file_size = context.get_int("maxFileSize", 64 * 1024 * 1024, minimum=1)
        self.batch_size = context.get_int("batchSize", 100, minimum=1)
        self._seen: dict[Path, tuple[int, int]] = {}
        self._refused: dict[Path, tuple[int, int]] = {}
        self._next_round_ms = 0
        self._pending: list[Event] = []

    def process(self) -> Status:
        if not self._pending:
            now_ms = int(time.time() * 1000)
            if now_ms < self._next_round_ms:
                return Status.BACKOFF
            interval_ms = max(1, round(self.interval * 1000))
            round_ms = now_ms // interval_ms * interval_ms
            self._next_round_ms = round_ms + interval_ms
            self._pending = self._read_round(round_ms)
            self.counters.add("EventReceivedCount", len(self._pending))
            if not self._pending:
                return Status.BACKOFF
        batch = self._pending[: self.batch_size]
        try:
            self.channel_processor.process_batch(batch)
        except ChannelException:
            self.counters.add("ChannelWriteFail")
            return Status.BACKOFF  # still pending, retried on the next call
        self.counters.add("EventAcceptedCount", len(batch))
        del self._pending[: len(batch)]
        return Status.READY

    def _refuse(self, path: Path, signature: tuple[int, int], why: str) -> None:
        self.counters.add("EventReadFail")
        if self._refused.get(path) != signature:
            log.warning("artimon_file source %s: skipping %s: %s", self.name, path, why)
            self._refused[path] = signature

    def _read_round(self, round_ms: int) -> list[Event]:
        try:
            root = self.directory.resolve(strict=True)
            candidates = sorted(root.glob("*.artimon"))
        except OSError as exc:
            self.counters.add("EventReadFail")
            log.warning("artimon_file source %s: cannot list %s: %s", self.name, self.directory, exc)
            return []
        events = []
        present = set(candidates)
        self._seen = {p: s for p, s in self._seen.items() if p in present}  # forget removed files
        for path in candidates:
            try:
                stat = path.stat()
                resolved = path.resolve(strict=True)
            except OSError:
                continue  # renamed away between the listing and the read
            signature = (stat.st_mtime_ns, stat.st_size)
            if self._seen.get(path) == signature:
                continue
            if resolved.parent != root:
                self._refuse(path, signature, f"resolves to {resolved}, outside {root}")
                continue
            if stat.st_size > self.max_file_size:
                self._refuse(path, signature, f"{stat.st_size} bytes > maxFileSize {self.max_file_size}")
                continue
            module = path.name[: -len(".artimon")]
            try:
                with open(resolved, encoding="utf-8") as text:
                    samples = list(parse_lines(text))
            except (TextFormatError, UnicodeDecodeError) as exc:
                self._refuse(path, signature, str(exc))
                continue
            except OSError:
                continue
            self._seen[path] = signature
            batch = SampleBatch.from_samples(module, samples)
            headers = {
                "artimon.context": module,
                "artimon.file": path.name,
                "artimon.round": str(round_ms),
            }
            events.append(Event(headers, encode_sample_batch(batch)))
        return events
