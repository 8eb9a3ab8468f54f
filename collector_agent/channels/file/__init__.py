"""The ``file`` channel: durable, on one SQLite database per channel (Flume's file channel,
split the same way: ``FileChannel``, ``Log``, ``FlumeEventQueue``, ``ReplayHandler``).

| concept | module |
|---|---|
| the channel: keys, lifecycle, the contract and its state diagram | ``channel.py`` |
| a transaction's put, take, prepare, decide, commit, rollback on disk | ``transaction.py`` |
| the database's tables, the group commit, bookkeeping before puts on a full disk | ``log.py`` |
| the copy of SQLite's write-ahead log into the database | ``checkpoint.py`` |
| the queue of event pointers, capacity, epochs | ``queue.py`` |
| reading stored batches for a take | ``reader.py`` |
| a batch's bytes, checksums and every damage reason | ``format.py`` |
| disk space, the refusal of a put when it runs short, the reserve for a full disk | ``space.py`` |
| what counts as damage, the dead-letter file | ``damage.py`` |
| the salvage of a damaged database | ``salvage.py`` |
| start: open or salvage, rebuild the queue; a salvage while running | ``recovery.py`` |
| a put into several durable channels across a crash | ``groups.py`` |
"""

from __future__ import annotations

from collector_agent.channels.file.channel import FileChannel

__all__ = ["FileChannel"]
