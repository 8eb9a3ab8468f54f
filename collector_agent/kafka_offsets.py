"""The offsets of a batch read from Kafka and not committed yet: what the Kafka source and
the Kafka channel's takes both track.

Each record read notes, for its partition, the offset to seek back to (the batch's first
record there) and the offset to commit (the one after the last record read). Once the
batch's events are safe (the source: put into the channels; the channel: its take
committed), :meth:`BatchOffsets.to_commit` gives the offsets to commit; if they are refused,
:meth:`BatchOffsets.rewind` seeks back so that the same records are read again. A message
that is no record moves nothing: the end of a partition is ignored, an error logged (and
counted by the caller's ``on_error``). A partition given up in a rebalance is forgotten
(:meth:`BatchOffsets.forget`): its next owner starts at the committed offset.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

__all__ = ["BatchOffsets", "Partition", "partition_names"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]  # (topic, partition)


def partition_names(partitions: list[TopicPartition]) -> str:
    """``topic[partition], ...`` for the logs."""
    return ", ".join(f"{p.topic}[{p.partition}]" for p in partitions) or "nothing"


class BatchOffsets:
    """Per partition, the first offset of the batch (``first``) and the next to read
    (``next``); ``owner`` names the component in the logs."""

    def __init__(self, owner: str, on_error: Callable[[], None] | None = None) -> None:
        self.owner = owner
        self.first: dict[Partition, int] = {}
        self.next: dict[Partition, int] = {}
        self._on_error = on_error

    def track(self, message: Message) -> tuple[str, int, int] | None:
        """The topic, partition and offset of a record, noted in the batch; ``None`` for a
        message that is no record."""
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                if self._on_error is not None:
                    self._on_error()
                log.warning("%s: %s", self.owner, error.str())
            return None
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            return None
        self.first.setdefault((topic, partition), offset)
        self.next[(topic, partition)] = offset + 1
        return topic, partition, offset

    def to_commit(self) -> list[TopicPartition]:
        """The offsets after the batch, to commit."""
        return [TopicPartition(topic, partition, offset) for (topic, partition), offset in self.next.items()]

    def rewind(self, consumer: Consumer) -> None:
        """Seek back to the batch's first offsets, then start a new batch."""
        for (topic, partition), offset in self.first.items():
            # a partition no longer ours: its next owner starts at the committed offset
            with contextlib.suppress(KafkaException):
                consumer.seek(TopicPartition(topic, partition, offset))
        self.clear()

    def forget(self, partitions: set[Partition]) -> None:
        """Partitions given up: the batch's commit leaves them out."""
        for where in partitions:
            self.next.pop(where, None)

    def clear(self) -> None:
        self.first, self.next = {}, {}
