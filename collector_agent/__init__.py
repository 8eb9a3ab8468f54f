"""The collector agent: a Flume-NG-style source -> channel -> sink pipeline.

See README.md beside this file and docs/agent.md.
"""

from __future__ import annotations

from collector_agent.agent import Agent
from collector_agent.channel_processor import ChannelProcessor
from collector_agent.channels.base import BasicChannel, PutGroup, Transaction, TransactionState
from collector_agent.channels.file.channel import FileChannel
from collector_agent.channels.memory import MemoryChannel
from collector_agent.config import AgentSpec, load_properties, parse_agent
from collector_agent.config_follower import ConfigFollower, FollowerState
from collector_agent.config_store import AgentReport, ConfigStore, ConfigTarget, Pointer
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import (
    AgentError,
    CentralConfigError,
    ChannelException,
    ChannelFullException,
    ConfigConflictError,
    ConfigurationError,
    EventDeliveryException,
    ForeignRecordError,
    MalformedConfigError,
    MalformedEventError,
    RequestRefusedError,
    ScrapeError,
    TransactionStateError,
    WriteRequestError,
)
from collector_agent.group import owner
from collector_agent.integrity import STAMP_HEADER, event_checksum
from collector_agent.ledger import RoundLedger
from collector_agent.lifecycle import Component, LifecycleState
from collector_agent.monitoring import MonitorServer, SelfReporter
from collector_agent.registry import register
from collector_agent.reloader import ConfigWatcher
from collector_agent.sinks.base import BatchSink, Sink
from collector_agent.sources.base import EventDrivenSource, PollableSource, Source
from collector_agent.status import Status

__all__ = [
    "STAMP_HEADER",
    "Agent",
    "AgentError",
    "AgentReport",
    "AgentSpec",
    "BasicChannel",
    "BatchSink",
    "CentralConfigError",
    "ChannelException",
    "ChannelFullException",
    "ChannelProcessor",
    "Component",
    "ConfigConflictError",
    "ConfigFollower",
    "ConfigStore",
    "ConfigTarget",
    "ConfigWatcher",
    "ConfigurationError",
    "Context",
    "Event",
    "EventDeliveryException",
    "EventDrivenSource",
    "FileChannel",
    "FollowerState",
    "ForeignRecordError",
    "LifecycleState",
    "MalformedConfigError",
    "MalformedEventError",
    "MemoryChannel",
    "MonitorServer",
    "Pointer",
    "PollableSource",
    "PutGroup",
    "RequestRefusedError",
    "RoundLedger",
    "ScrapeError",
    "SelfReporter",
    "Sink",
    "Source",
    "Status",
    "Transaction",
    "TransactionState",
    "TransactionStateError",
    "WriteRequestError",
    "event_checksum",
    "load_properties",
    "owner",
    "parse_agent",
    "register",
]
