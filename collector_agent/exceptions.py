"""The agent's errors, one tree rooted at :class:`AgentError`.

::

    AgentError
    ├── ConfigurationError      (also ValueError)    a bad key or value; names the key
    ├── ChannelException                             a channel operation failed
    │   └── ChannelFullException                     no room left after keep-alive
    ├── TransactionStateError   (also RuntimeError)  a transaction used out of order
    ├── EventDeliveryException                       a sink could not deliver a batch
    ├── MalformedEventError     (also ValueError)    events the next hop refuses as malformed
    ├── RequestRefusedError     (also ValueError)    a Thrift or Avro request that breaks Flume's
    │                                                IDL or a limit, refused before it is decoded
    ├── WriteRequestError       (also ValueError)    a Prometheus remote-write body that is not
    │                                                snappy, not a WriteRequest, or over a limit
    ├── ScrapeError             (also ValueError)    a scrape target's answer refused whole (too
    │                                                big, too slow, not UTF-8, not the format)
    ├── ForeignRecordError      (also ValueError)    a Kafka record that is not one of our events
    │                                                (set aside as a dead letter)
    └── CentralConfigError                           the central configuration in ZooKeeper
        ├── ConfigConflictError                      another push moved the version meanwhile
        └── MalformedConfigError (also ValueError)    a version, pointer or status znode that is
                                                     not one (too big, not JSON, a bad field)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AgentError",
    "CentralConfigError",
    "ChannelException",
    "ChannelFullException",
    "ConfigConflictError",
    "ConfigurationError",
    "EventDeliveryException",
    "ForeignRecordError",
    "MalformedConfigError",
    "MalformedEventError",
    "RequestRefusedError",
    "ScrapeError",
    "TransactionStateError",
    "WriteRequestError",
]


class AgentError(Exception):
    """Root of every error the collector agent raises."""


class ConfigurationError(AgentError, ValueError):
    """A configuration key is missing, unknown or has a bad value; the message names it."""


class ChannelException(AgentError):
    """A channel could not put, take or commit."""


class ChannelFullException(ChannelException):
    """The channel had no room for the events within its keep-alive."""


class TransactionStateError(AgentError, RuntimeError):
    """A transaction method was called in a state that does not allow it."""


class EventDeliveryException(AgentError):
    """A sink could not deliver a batch to its destination (it will be retried)."""


class MalformedEventError(AgentError, ValueError):
    """The destination refused some events as malformed; ``indexes`` are their positions in
    the batch handed to the sink."""

    def __init__(self, message: str, indexes: Sequence[int]) -> None:
        super().__init__(message)
        self.indexes = list(indexes)


class RequestRefusedError(AgentError, ValueError):
    """A Thrift or Avro source request that breaks Flume's IDL (a required field missing) or a limit
    (events per batch, decoded bytes), refused before it is decoded; the message says which."""


class WriteRequestError(AgentError, ValueError):
    """A Prometheus remote-write body refused as a whole: not snappy, not a ``WriteRequest``,
    or over a limit (decoded bytes, samples); the message says which."""


class ScrapeError(AgentError, ValueError):
    """A scrape target's answer that is refused whole: the message says why (its size, its
    time, a byte that is not UTF-8, a line the format refuses, a series exposed twice)."""


class ForeignRecordError(AgentError, ValueError):
    """A Kafka record that cannot be an event (random bytes where an ``AvroFlumeEvent`` was
    expected, a header that is not UTF-8); the message says why."""


class CentralConfigError(AgentError):
    """The central configuration in ZooKeeper cannot be read or written as asked."""


class ConfigConflictError(CentralConfigError):
    """Another writer moved a configuration's current version between our read and our write."""


class MalformedConfigError(CentralConfigError, ValueError):
    """A configuration znode whose content is not what Artimon writes there."""
