"""End to end integrity (Flume OG's end-to-end mode, in NG's terms): a checksum stamped once,
checked wherever an event's bytes were outside the agent's hands, a mismatch set aside and
counted, never stored.

- **What is stamped**: header ``artimon.crc`` = the CRC32C (``google-crc32c``, as the file
  channel's frames and VHMS's write-ahead log) of the body, XOR the CRC32C of the event's
  identity in the landing files' form (:func:`identity`: the ``artimon.round``,
  ``artimon.endpoint`` and ``artimon.agent`` headers as
  :func:`bookkeeper.ground.encode_identity` encodes them; its CRC is cached, so an event
  costs one CRC call), eight lowercase hex digits. Other headers (those interceptors add on
  the way) are not covered: they identify nothing.
- **Who stamps**: the first agent that takes the event, in its source's channel processor
  (:meth:`SetAside.admit`): a poll, a push receiver, and an RPC or Kafka source meeting an
  event without a stamp (Apache Flume's agents send none). An event that already carries one
  is checked there instead.
- **Who checks**: every source receiving stamped events (Thrift, Avro, Kafka: the wire and
  the topic), the take of a channel whose events come back from outside the process (the
  Kafka channel; any channel class unless it says otherwise, :meth:`SetAside.keep`), the
  ``raw`` sink's landing record (which carries the stamp on to Spark's Parquet writer,
  ``spark_jobs/integrity.py``). The ``file`` channel checks its own CRC32C of each frame
  (headers, stamp included, and body) on take, and the ``memory`` channel hands on the very
  objects its source checked: a second CRC over the same bytes would cost without finding
  more. So the VHMS sink delivers what its channel's take (or, behind a memory channel, its
  source) checked.
- **A mismatch** goes to the component's dead-letter file (``deadLetter.dir``, reason
  ``checksum mismatch``, fsynced) and is counted in its ``ChecksumMismatchCount``; the rest
  of the batch goes on. An event without a stamp has nothing to be checked against and
  passes (an event put straight into a channel by a program).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import google_crc32c

from bookkeeper.ground import encode_identity
from collector_agent.counters import CounterGroup
from collector_agent.dead_letters import write_dead_letters
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException

__all__ = ["MISMATCH", "STAMP_HEADER", "SetAside", "event_checksum", "identity", "mismatches"]

log = logging.getLogger(__name__)

STAMP_HEADER = "artimon.crc"
MISMATCH = "checksum mismatch"


@lru_cache(maxsize=8192)
def identity(round_ms: str | None, endpoint: str | None, agent: str | None) -> bytes:
    """The identifying headers' bytes, as they follow the body in a landing record."""
    return encode_identity(int(round_ms) if round_ms and round_ms.isdigit() else None, endpoint, agent)


@lru_cache(maxsize=8192)
def _identity_crc(round_ms: str | None, endpoint: str | None, agent: str | None) -> int:
    return int(google_crc32c.value(identity(round_ms, endpoint, agent)))


def event_checksum(body: bytes, headers: Mapping[str, str]) -> int:
    """What an event's stamp holds (see the module doc)."""
    get = headers.get
    return int(google_crc32c.value(body)) ^ _identity_crc(
        get("artimon.round"), get("artimon.endpoint"), get("artimon.agent")
    )


def mismatches(events: Sequence[Event], stamp: bool = False) -> list[int]:
    """Indexes of the stamped events whose stamp is not their checksum; with ``stamp``, the
    events without one are stamped on the way (one pass over the batch)."""
    bad: list[int] = []
    value, identity_crc = google_crc32c.value, _identity_crc
    for position, event in enumerate(events):
        headers = event.headers
        get = headers.get
        found = get(STAMP_HEADER)
        if found is None and not stamp:
            continue
        ident = identity_crc(get("artimon.round"), get("artimon.endpoint"), get("artimon.agent"))
        crc = "%08x" % (value(event.body) ^ ident)  # twice as fast as an f-string
        if found is None:
            headers[STAMP_HEADER] = crc
        elif found != crc:
            bad.append(position)
    return bad


class SetAside:
    """A component's checks: mismatches to its dead-letter file, counted in its
    ``ChecksumMismatchCount``. ``role`` is ``source`` or ``channel``."""

    def __init__(self, counters: CounterGroup, role: str, directory: Path) -> None:
        self.counters = counters
        self.role = role
        self.directory = directory

    def admit(self, events: list[Event]) -> list[Event]:
        """What a source lets in: stamped if they were not, those whose stamp is wrong set aside."""
        return self._drop(events, mismatches(events, stamp=True))

    def keep(self, events: list[Event]) -> list[Event]:
        """``events`` without those whose stamp is wrong (set aside)."""
        return self._drop(events, mismatches(events))

    def _drop(self, events: list[Event], bad: list[int]) -> list[Event]:
        if not bad:
            return events
        refused = set(bad)
        aside = [events[i] for i in bad]
        # written and fsynced before the caller lets them go (a take commits, a batch is acknowledged);
        # if they cannot be, the take or the put fails as a channel's would, and nothing is let go
        try:
            path = write_dead_letters(
                self.directory, self.counters.name, aside, role=self.role, reason=MISMATCH
            )
        except OSError as exc:
            raise ChannelException(
                f"{self.role} {self.counters.name}: dead letters not written: {exc}"
            ) from exc
        self.counters.add("ChecksumMismatchCount", len(aside))
        log.error(
            "%s %s: %d events set aside in %s: %s", self.role, self.counters.name, len(aside), path, MISMATCH
        )
        return [event for i, event in enumerate(events) if i not in refused]
