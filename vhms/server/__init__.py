"""VHMS's **server surface**: the bucket store (:class:`Store`), its series index, the
write-ahead log, checksummed snapshots and the Thrift/HTTP service (:class:`VhmsService`).
Only a process that holds a store imports it (the ``vhms`` command, the embedded stack,
tests and benchmarks); writers and readers use the client surface, :mod:`vhms`.
"""

from __future__ import annotations

from vhms.server.catchup import CatchUp
from vhms.server.index import SeriesIndex
from vhms.server.service import DEFAULT_SERVER_LIMITS, VhmsService
from vhms.server.snapshot import load_snapshot, restore_or_empty, save_snapshot
from vhms.server.store import Store
from vhms.server.wal import FSYNC_POLICIES, ReplayReport, WriteAheadLog
from vhms.server.wal import replay as replay_wal

__all__ = [
    "DEFAULT_SERVER_LIMITS",
    "FSYNC_POLICIES",
    "CatchUp",
    "ReplayReport",
    "SeriesIndex",
    "Store",
    "VhmsService",
    "WriteAheadLog",
    "load_snapshot",
    "replay_wal",
    "restore_or_empty",
    "save_snapshot",
]
