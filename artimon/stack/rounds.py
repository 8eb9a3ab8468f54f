"""``artimon up``'s line per polling round, printed at 80 % of each round from the agent's
counters: endpoints polled and failed, samples stored, series in VHMS, events waiting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from vhms.server import Store

Metrics = Callable[[], dict[str, dict[str, float]]]


def _line(before: dict[str, dict[str, float]], now: dict[str, dict[str, float]], store: Store) -> str:
    polled_source, sink = now["SOURCE.poll"], now["SINK.store"]
    polled = polled_source["PollSuccessCount"] - before["SOURCE.poll"]["PollSuccessCount"]
    failed = polled_source["PollFailCount"] - before["SOURCE.poll"]["PollFailCount"]
    stored = sink["SamplesStoredCount"] - before["SINK.store"]["SamplesStoredCount"]
    return (
        f"round {time.strftime('%H:%M:%S')}: {int(polled)} endpoints polled, {int(failed)} failed, "
        f"{int(stored)} samples stored, {store.series} series in VHMS, "
        f"{int(now['CHANNEL.durable']['ChannelSize'])} events waiting"
    )


def report_rounds(
    stop: threading.Event, metrics: Metrics, store: Store, interval: float, rounds: int
) -> None:
    """Print a line per round until ``stop`` is set, or after ``rounds`` rounds (0: never)."""
    done = 0
    before = metrics()
    interval_ms = int(interval * 1000)
    while True:
        next_report = (int(time.time() * 1000) // interval_ms + 1) * interval_ms + interval_ms * 0.8
        if stop.wait(max(0.0, next_report / 1000 - time.time())):
            return
        now = metrics()
        print(_line(before, now, store), flush=True)
        before = now
        done += 1
        if rounds and done >= rounds:
            return
