"""Channels and their transactions: Flume's contract, with an atomic multi-channel commit.

Usage (the context manager does begin, commit or rollback, and close)::

    with channel.transaction() as tx:
        tx.put(event)            # or tx.put_batch(events), tx.take(), tx.take_batch(n)

or spelled out as in Flume: ``tx = channel.transaction(); tx.begin(); ...; tx.commit()``
(``tx.rollback()`` on error), then ``tx.close()``.

Transaction states (Flume's ``BasicTransactionSemantics``, plus PREPARED)::

    NEW --begin()--> OPEN --prepare()--> PREPARED --commit()--> COMPLETED --close()--> CLOSED
                      |  \\----------------commit()-------------^                  ^
                      |  rollback() from OPEN or PREPARED --> COMPLETED ------------/
    NEW --close()--> CLOSED
    PREPARED --decide()--> PREPARED (a put of a group: its outcome written down)

- ``put``/``take`` need OPEN; ``close`` needs NEW or COMPLETED ("commit or rollback first");
  every call must come from the thread that opened the transaction.
- ``prepare`` does everything that can fail (room is already reserved at put time; a
  durable channel writes its puts to disk); ``commit`` after a successful ``prepare`` of a
  put-only transaction cannot fail. The channel processor prepares every required channel
  before it commits any, so a fanned-out put lands in all of them or in none.
- A crash must not break that either. When a put goes to several durable channels (those
  with a ``durable_id``), the processor gives their ``prepare`` one :class:`PutGroup`, then
  calls ``decide`` on each once all are prepared, then commits: a durable channel writes
  its puts as undecided at ``prepare`` and as decided at ``decide``. After a crash, a put
  that some member had decided is kept by all (every member had prepared it), and one that
  none had decided is undone by all (none had been acknowledged).
- ``rollback`` returns taken events to the head of the channel in their original order.
- A take checks the integrity stamp of what it takes (``collector_agent/integrity.py``) unless
  the channel class says its events never left the process or are checked otherwise
  (``checks_taken = False``: ``memory``, ``file``): an event whose stamp is wrong is set
  aside (the dead-letter file of ``deadLetter.dir``, ``ChecksumMismatchCount``), consumed
  with the take and never handed to the sink; a rolled-back take meets it again and sets it
  aside again.
- A channel keeps one transaction per thread: ``transaction()`` returns the thread's open
  one, or a new one once the previous is CLOSED.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, TransactionStateError
from collector_agent.integrity import SetAside
from collector_agent.lifecycle import Component

__all__ = ["BasicChannel", "PutGroup", "Transaction", "TransactionState"]


class TransactionState(enum.Enum):
    NEW = "NEW"
    OPEN = "OPEN"
    PREPARED = "PREPARED"
    COMPLETED = "COMPLETED"
    CLOSED = "CLOSED"


@dataclass(frozen=True)
class PutGroup:
    """One put into several durable channels: ``txn`` names it in each of them, ``members``
    are their ``durable_id``s (where each keeps it, so that after a crash each can ask the
    others what became of it)."""

    txn: str
    members: tuple[str, ...]


class Transaction:
    """The state machine; a channel's transaction fills the ``_do_*`` hooks."""

    def __init__(self, channel: BasicChannel) -> None:
        self.channel = channel
        self.state = TransactionState.NEW
        self._thread = threading.get_ident()
        self._put_count = 0  # this transaction's puts and takes, bounded by transactionCapacity
        self._take_count = 0

    # -- hooks ------------------------------------------------------------------------------

    def _do_put(self, events: Sequence[Event]) -> None:
        raise NotImplementedError

    def _do_take(self, limit: int) -> list[Event]:
        raise NotImplementedError

    def _do_prepare(self, group: PutGroup | None) -> None:
        """Everything that may fail before commit (default: nothing); ``group`` when the
        puts belong to a put into several durable channels."""

    def _do_decide(self) -> None:
        """Write down that the group's put is to be kept (default: nothing to write)."""

    def _do_commit(self) -> None:
        raise NotImplementedError

    def _do_rollback(self) -> None:
        raise NotImplementedError

    # -- the contract ------------------------------------------------------------------------

    def _require(self, action: str, *states: TransactionState) -> None:
        if threading.get_ident() != self._thread:
            raise TransactionStateError(
                f"{action} on channel {self.channel.name}: a transaction belongs to the thread "
                "that created it"
            )
        if self.state not in states:
            allowed = " or ".join(s.value for s in states)
            raise TransactionStateError(
                f"{action} on channel {self.channel.name} in state {self.state.value} (needs {allowed})"
            )

    def begin(self) -> None:
        self._require("begin", TransactionState.NEW)
        self.state = TransactionState.OPEN

    def put(self, event: Event) -> None:
        self._require("put", TransactionState.OPEN)
        self.channel.counters.add("EventPutAttemptCount")
        self._do_put((event,))

    def put_batch(self, events: Sequence[Event]) -> None:
        """Put several events at once (the fast path; same rules as ``put``)."""
        self._require("put", TransactionState.OPEN)
        self.channel.counters.add("EventPutAttemptCount", len(events))
        if not events:
            return
        limit = self.channel.transaction_capacity
        if self._put_count + len(events) > limit:
            raise ChannelException(
                f"put of {len(events)} events into channel {self.channel.name} exceeds its "
                f"transactionCapacity {limit} ({self._put_count} already put in this transaction)"
            )
        self._do_put(events)
        self._put_count += len(events)

    def take(self) -> Event | None:
        """The next event, or ``None`` if the channel is empty."""
        taken = self.take_batch(1)
        return taken[0] if taken else None

    def take_batch(self, limit: int) -> list[Event]:
        """Up to ``limit`` events from the head (fewer if the channel holds fewer)."""
        self._require("take", TransactionState.OPEN)
        room = self.channel.transaction_capacity - self._take_count
        if room <= 0:
            raise ChannelException(
                f"take from channel {self.channel.name}: the transaction already took "
                f"transactionCapacity {self.channel.transaction_capacity} events"
            )
        taken = self._do_take(min(limit, room))
        self._take_count += len(taken)
        self.channel.counters.add("EventTakeAttemptCount", max(1, len(taken)))
        return self.channel.integrity.keep(taken) if taken and self.channel.checks_taken else taken

    def prepare(self, group: PutGroup | None = None) -> None:
        self._require("prepare", TransactionState.OPEN)
        self._do_prepare(group)
        self.state = TransactionState.PREPARED

    def decide(self) -> None:
        """After every member of the group is prepared, before any commits."""
        self._require("decide", TransactionState.PREPARED)
        self._do_decide()

    def commit(self) -> None:
        self._require("commit", TransactionState.OPEN, TransactionState.PREPARED)
        if self.state is TransactionState.OPEN:
            self._do_prepare(None)
            self.state = TransactionState.PREPARED
        self._do_commit()
        self.state = TransactionState.COMPLETED
        self._put_count = self._take_count = 0

    def rollback(self) -> None:
        self._require("rollback", TransactionState.OPEN, TransactionState.PREPARED)
        try:
            self._do_rollback()
        finally:
            # even a failed undo ends the transaction, or the thread could never open another
            self.state = TransactionState.COMPLETED
            self._put_count = self._take_count = 0

    def close(self) -> None:
        self._require("close", TransactionState.NEW, TransactionState.COMPLETED)
        self.state = TransactionState.CLOSED

    def __enter__(self) -> Transaction:
        self.begin()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.state in (TransactionState.OPEN, TransactionState.PREPARED):
                if exc_type is None:
                    try:
                        self.commit()
                    except BaseException:
                        # a failed commit leaves the transaction OPEN or PREPARED
                        self.rollback()
                        raise
                else:
                    self.rollback()
        finally:
            if self.state in (TransactionState.NEW, TransactionState.COMPLETED):
                self.close()


class BasicChannel(Component):
    """A channel: one transaction per thread, counters with Flume's names."""

    kind: ClassVar[str] = "CHANNEL"
    counter_names: ClassVar[tuple[str, ...]] = (
        "EventPutAttemptCount",
        "EventPutSuccessCount",
        "EventTakeAttemptCount",
        "EventTakeSuccessCount",
        "ChecksumMismatchCount",
    )

    transaction_capacity: int = 100  # events one transaction may put or take (configured)
    checks_taken: ClassVar[bool] = True  # whether a take checks the integrity stamps

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._local = threading.local()
        self.integrity = SetAside(self.counters, "channel", Path("artimon-data") / "dead-letter")

    def configure(self, context: Context) -> None:
        """The key every channel has: ``deadLetter.dir`` (default ``artimon-data/dead-letter``),
        where a take sets aside what fails its integrity check."""
        self.integrity.directory = Path(context.get_str("deadLetter.dir", "artimon-data/dead-letter"))
        super().configure(context)

    def transaction(self) -> Transaction:
        """The calling thread's transaction: its open one, or a new one."""
        current: Transaction | None = getattr(self._local, "tx", None)
        if current is None or current.state is TransactionState.CLOSED:
            current = self._local.tx = self._new_transaction()
        return current

    def _new_transaction(self) -> Transaction:
        raise NotImplementedError

    def can_reconfigure(self, context: Context) -> bool:
        """Whether ``context`` can be applied to this running channel in place (else a
        reload replaces it with a new one)."""
        return True

    @property
    def durable_id(self) -> str | None:
        """Where a channel that survives a crash keeps its events (``None``: nothing
        survives it); what names it in a :class:`PutGroup`."""
        return None

    @property
    def size(self) -> int:
        """Committed events waiting in the channel."""
        raise NotImplementedError

    @property
    def capacity(self) -> int:
        raise NotImplementedError

    def metrics(self) -> dict[str, float]:
        """Flume's channel counters: ``ChannelSize``, ``ChannelCapacity``,
        ``ChannelFillPercentage`` and the put/take attempt and success counts."""
        values = super().metrics()
        size, capacity = self.size, self.capacity
        values["ChannelSize"] = size
        values["ChannelCapacity"] = capacity
        values["ChannelFillPercentage"] = size / capacity * 100 if capacity else 0.0
        return values
