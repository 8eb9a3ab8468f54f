"""VHMS in the stack's process, as a component: one shard named ``default``, registered in
ZooKeeper before anything writes to it, its snapshots and write-ahead log under the data
directory."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from artimon.stack.servers import ZooKeeper
from vhms import DEFAULT_RESOLUTIONS
from vhms.server import Store, VhmsService


class WalOptions(TypedDict):
    """``VhmsService``'s write-ahead log arguments (``artimon vhms`` and ``up`` take them as
    flags: ``--no-wal``, ``--wal-fsync``, ``--wal-fsync-period``)."""

    wal: bool
    wal_fsync: str
    wal_fsync_period: float


def resolutions_for(interval: float) -> str:
    """The store's rings: the finest is the poll interval when that divides a minute (so a
    bucket holds one round, never a partial one), then VHMS's defaults above a minute."""
    seconds = int(interval)
    if seconds == interval and 0 < seconds < 60 and 60 % seconds == 0:
        return f"{seconds}s:{3600 // seconds}," + DEFAULT_RESOLUTIONS.partition(",")[2]
    return DEFAULT_RESOLUTIONS


class Vhms:
    """The store (see the module doc); ``service`` once started."""

    name = "vhms"

    def __init__(
        self, zookeeper: ZooKeeper, directory: Path, *, interval: float, host: str, wal: WalOptions
    ) -> None:
        self.zookeeper = zookeeper
        self.service = VhmsService(
            Store(resolutions_for(interval)),
            shard="default",
            host=host,
            snapshot_dir=directory,
            snapshot_every=300,
            **wal,
        )

    @property
    def metrics_url(self) -> str:
        """Its ``/metrics``, or ``""`` when it serves no HTTP."""
        return f"{self.service.http.url}/metrics" if self.service.http else ""

    def start(self) -> None:
        self.service.start(self.zookeeper.hosts)
        if self.service.registration is not None:
            self.service.registration.registered.wait(30)  # before anything writes to it

    def ready_lines(self) -> list[str]:
        vhms = self.service
        http = vhms.http.url if vhms.http else "-"
        replayed = vhms.replayed.records if vhms.replayed else 0
        return [
            f"[ready] vhms       {vhms.host}:{vhms.port}, {http}/stats, {vhms.store.series} series restored "
            f"({replayed} write-ahead log records replayed), "
            f"finest buckets {vhms.store.resolutions[0].step_s} s"
        ]

    def stop(self) -> None:
        self.service.stop()
