"""Delivering notifications off the evaluation thread.

Each receiver (a named notifier and its retry policy) has a bounded queue and a worker
thread of its own, so a slow or failing notifier never holds up the evaluation loop nor
another notifier. ``submit`` never blocks: a notification that finds a queue full is
dropped and counted. A failed delivery is retried after ``backoff``, doubling up to
``max_backoff``, at most ``retries`` times (none when the error says a retry cannot help);
then it is given up, counted and logged.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from query_dsl.alerts.model import Notification
from query_dsl.alerts.notifiers.base import Notifier
from query_dsl.exceptions import NotifyError

__all__ = ["DeliveryStats", "Dispatcher", "Receiver", "RetryPolicy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def delay_s(self, failures: int) -> float:
        """The wait after the ``failures``-th failed attempt (1, 2, ...)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** (failures - 1)))


@dataclass(frozen=True)
class Receiver:
    """A notifier under the name rules use in ``notify:`` (Alertmanager's word for it)."""

    name: str
    notifier: Notifier
    retry: RetryPolicy = RetryPolicy()


@dataclass
class DeliveryStats:
    delivered: int = 0
    failed_attempts: int = 0
    given_up: int = 0
    dropped: int = 0
    last_error: str | None = None


class Dispatcher:
    """``start()``, then ``submit(notification, names)`` from any thread; ``flush(timeout)``
    waits for every queue to empty; ``close(timeout)`` delivers what it can within the
    timeout, drops (and counts) the rest and closes the notifiers."""

    def __init__(self, receivers: Mapping[str, Receiver], *, queue_size: int = 256) -> None:
        self.receivers = dict(receivers)
        # None in a queue tells its worker to stop
        self._queues: dict[str, queue.Queue[Notification | None]] = {
            name: queue.Queue(queue_size) for name in receivers
        }
        self._stats = {name: DeliveryStats() for name in receivers}
        self._threads = [
            threading.Thread(target=self._work, args=(name,), name=f"notify-{name}", daemon=True)
            for name in receivers
        ]
        self._abort = threading.Event()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, notification: Notification, names: Iterable[str]) -> None:
        for name in names:
            if name not in self._queues:
                raise KeyError(f"no notifier named {name!r} (known: {', '.join(sorted(self._queues))})")
            with self._lock:
                self._pending += 1
            try:
                self._queues[name].put_nowait(notification)
            except queue.Full:
                log.warning("notifier %s: queue full, a %s notification dropped", name, notification.subject)
                self._count(name, dropped=1, done=True)

    def stats(self) -> dict[str, DeliveryStats]:
        with self._lock:
            return {name: replace(stats) for name, stats in self._stats.items()}

    def flush(self, timeout: float) -> bool:
        """Wait until every submitted notification is delivered or given up; false if the
        timeout came first."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Deliver for up to ``timeout`` seconds, then drop (and count) what is still queued,
        stop the workers and close the notifiers. A send under way when the time is up
        ends within its notifier's own timeout and is counted then."""
        self.flush(timeout)
        self._abort.set()
        for name, pending in self._queues.items():
            while True:
                try:
                    item = pending.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    self._count(name, dropped=1, done=True)
            pending.put(None)  # emptied above, so there is room
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=1.0)
        for receiver in self.receivers.values():
            try:
                receiver.notifier.close()
            except Exception:  # closing one notifier must not keep the others open
                log.exception("notifier %s: close failed", receiver.name)

    def _count(self, name: str, *, done: bool = False, error: str | None = None, **counts: int) -> None:
        with self._idle:
            stats = self._stats[name]
            for field, increment in counts.items():
                setattr(stats, field, getattr(stats, field) + increment)
            if error is not None:
                stats.last_error = error
            if done:
                self._pending -= 1
                if not self._pending:
                    self._idle.notify_all()

    def _work(self, name: str) -> None:
        pending = self._queues[name]
        while True:
            item = pending.get()
            if item is None:
                return
            self._deliver(self.receivers[name], item)

    def _deliver(self, receiver: Receiver, notification: Notification) -> None:
        failures = 0
        while True:
            try:
                receiver.notifier.send(notification)
            except NotifyError as exc:
                error, retryable = str(exc), exc.retryable
            except Exception as exc:  # a notifier's bug must not end its worker thread
                log.exception("notifier %s failed unexpectedly", receiver.name)
                error, retryable = f"{type(exc).__name__}: {exc}", False
            else:
                self._count(receiver.name, delivered=1, done=True)
                return
            failures += 1
            self._count(receiver.name, failed_attempts=1, error=error)
            if not retryable or failures > receiver.retry.retries:
                log.error(
                    "notifier %s: %s given up after %d attempt(s): %s",
                    receiver.name,
                    notification.subject,
                    failures,
                    error,
                )
                self._count(receiver.name, given_up=1, done=True)
                return
            delay = receiver.retry.delay_s(failures)
            log.warning("notifier %s: %s; retry in %g s", receiver.name, error, delay)
            if self._abort.wait(delay):
                self._count(receiver.name, given_up=1, done=True)
                return
