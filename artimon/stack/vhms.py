"""VHMS in the stack's process, as a component: one shard named ``default``, registered in
ZooKeeper before anything writes to it, its snapshots and write-ahead log under the data
directory, its rings ``up --resolutions``' or :func:`resolutions_for` the poll interval."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from artimon.stack.servers import ZooKeeper
from bookkeeper.ground import WebConfig
from vhms import DEFAULT_RESOLUTIONS
from vhms.server import Store, VhmsService


class WalOptions(TypedDict):
    """``VhmsService``'s write-ahead log arguments (``artimon vhms`` and ``up`` take them as
    flags: ``--no-wal``, ``--wal-fsync``, ``--wal-fsync-period``)."""

    wal: bool
    wal_fsync: str
    wal_fsync_period: float


FINEST_SPAN_S = 2 * 3600
"""How far back the stack's finest ring reaches by default: Prometheus's head block, the
longest window (``[1h]``, ``[2h]``) its users habitually write over raw samples."""


def resolutions_for(interval: float) -> str:
    """The store's rings: the finest is the poll interval when that divides a minute (so a
    bucket holds one round, never a partial one), else a minute, kept for
    :data:`FINEST_SPAN_S`; then VHMS's coarser defaults."""
    seconds = int(interval)
    if not (seconds == interval and 0 < seconds < 60 and 60 % seconds == 0):
        seconds = 60
    return f"{seconds}s:{FINEST_SPAN_S // seconds}," + DEFAULT_RESOLUTIONS.partition(",")[2]


class Vhms:
    """The store (see the module doc); ``service`` once started."""

    name = "vhms"

    def __init__(
        self,
        zookeeper: ZooKeeper,
        directory: Path,
        *,
        interval: float,
        host: str,
        wal: WalOptions,
        resolutions: str | None = None,
        web_config: WebConfig | None = None,
    ) -> None:
        self.zookeeper = zookeeper
        self.service = VhmsService(
            Store(resolutions or resolutions_for(interval)),
            shard="default",
            host=host,
            snapshot_dir=directory,
            snapshot_every=300,
            **wal,
            web_config=web_config,
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
        finest = vhms.store.resolutions[0]
        return [
            f"[ready] vhms       {vhms.host}:{vhms.port}, {http}/stats, {vhms.store.series} series restored "
            f"({replayed} write-ahead log records replayed), "
            f"finest buckets {finest.step_s} s kept {finest.span_s / 60:g} min "
            f"(rings {','.join(str(r) for r in vhms.store.resolutions)})"
        ]

    def stop(self) -> None:
        self.service.stop()
