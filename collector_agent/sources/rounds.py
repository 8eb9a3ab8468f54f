"""What the round-based sources share (``artimon``, ``prometheus``): handing a round's events
to the channel until the round's deadline, and finding the next round after one that ran
late.

Rounds start on interval boundaries (``floor(t / interval) * interval``). A round that cannot
finish before the next one starts is counted (``RoundOverrunCount``) and the next boundary
is waited for; the rounds missed meanwhile are counted (``RoundSkippedCount``), never
queued. Events the channel still refuses at a round's deadline are dropped and counted
(``EventDroppedCount``, one per event), logged with the round and told to the round ledger
(the round cannot complete).
"""

from __future__ import annotations

import logging
import threading
import time

from collector_agent.event import Event
from collector_agent.exceptions import ChannelException
from collector_agent.sources.base import Source

__all__ = ["emit_until", "next_round_after"]

log = logging.getLogger(__name__)


def emit_until(source: Source, events: list[Event], deadline_ms: int, stop: threading.Event) -> None:
    """Put ``events`` into the source's channels, retrying a refusal every 0.1 s until
    ``deadline_ms`` (epoch ms) or ``stop``; then drop them, counted."""
    source.counters.add("EventReceivedCount", len(events))
    while True:
        try:
            source.channel_processor.process_batch(events)
        except ChannelException as exc:
            source.counters.add("ChannelWriteFail")
            if time.time() * 1000 > deadline_ms or stop.is_set():
                source.counters.add("EventDroppedCount", len(events))
                if source.ledger is not None:
                    for event in events:
                        round_ms = event.headers.get("artimon.round", "")
                        if round_ms.isdigit():
                            source.ledger.drop(int(round_ms), event.headers.get("artimon.endpoint", ""))
                log.error(
                    "source %s: dropped %d events of round %s: the channel refused them until "
                    "the round's deadline: %s",
                    source.name,
                    len(events),
                    events[0].headers.get("artimon.round"),
                    exc,
                )
                return
            stop.wait(0.1)
            continue
        source.counters.add("EventAcceptedCount", len(events))
        return


def next_round_after(source: Source, round_ms: int, interval_ms: int) -> int:
    """The round after ``round_ms`` that has not begun yet; a late one counted and logged."""
    now = int(time.time() * 1000)
    following = round_ms + interval_ms
    if now < following:
        return following
    missed = (now - following) // interval_ms + 1
    source.counters.add("RoundOverrunCount")
    source.counters.add("RoundSkippedCount", missed)
    log.warning(
        "source %s: round %d took longer than the %.0f s interval; %d round(s) skipped",
        source.name,
        round_ms,
        interval_ms / 1000,
        missed,
    )
    return following + missed * interval_ms
