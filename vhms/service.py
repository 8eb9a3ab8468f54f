"""``artimon vhms``: a store behind Thrift (ingest, fetch, series, labels) and HTTP
(``GET /health``, ``GET /stats``), registered in ZooKeeper as
``/artimon/vhms/<shard>/<ip>:<port>``, snapshotted every ``snapshot_every`` seconds and on
stop, restored at start. From construction to ``stop()`` the service holds its snapshot
directory (``in_use.lock``): a second service on it is refused with ``DataDirInUseError``
naming the holder's PID.

Limits: an ingest frame is at most ``max_frame_size`` bytes (default 256 MiB); fetch and
series answer the store's query limits as ``VhmsException`` (kind ``FetchLimitError``), a
bad selector as kind ``SelectorError``; a connection that sends garbage is closed.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI

from bookkeeper import DirectoryInUseError
from bookkeeper.process import DirectoryLock
from bookkeeper.wire import BackgroundServer, FramedThriftServer, advertised_address
from bookkeeper.zk import Registration, resolve_zk
from vhms.exceptions import DataDirInUseError, VhmsError
from vhms.idl import vhms_thrift
from vhms.snapshot import restore_or_empty, save_snapshot
from vhms.store import Store

__all__ = ["VhmsService"]

log = logging.getLogger(__name__)


def _error(exc: Exception) -> Any:
    return vhms_thrift.VhmsException(kind=type(exc).__name__, message=str(exc))


class _Handler:
    def __init__(self, store: Store) -> None:
        self.store = store

    def ingest(
        self,
        keys: list[str],
        values: bytes,
        timestamps: bytes,
        string_keys: list[str],
        strings: list[str],
        string_timestamps: bytes,
    ) -> Any:
        numbers = np.frombuffer(values or b"", dtype="<f8")
        times = np.frombuffer(timestamps or b"", dtype="<i8")
        if not (len(keys or []) == len(numbers) == len(times)):
            raise _error(
                ValueError(f"{len(keys or [])} keys, {len(numbers)} values, {len(times)} timestamps")
            )
        string_times = np.frombuffer(string_timestamps or b"", dtype="<i8")
        if not (len(string_keys or []) == len(strings or []) == len(string_times)):
            raise _error(ValueError("string columns of different lengths"))
        stored = self.store.ingest(list(keys or []), numbers, times) if keys else 0
        if string_keys:
            self.store.ingest_strings(list(string_keys), list(strings), string_times)
        return vhms_thrift.IngestReply(stored=stored, refused=len(numbers) - stored)

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str) -> Any:
        try:
            result = self.store.fetch(selector or "", start_ms, end_ms, resolution or "auto")
        except (VhmsError, ValueError) as exc:
            raise _error(exc) from None
        return vhms_thrift.FetchReply(
            labels=[
                vhms_thrift.LabelColumn(label, values, codes.astype("<i4", copy=False).tobytes())
                for label, (values, codes) in result.labels.items()
            ],
            timestamps=result.timestamps.astype("<i8").tobytes(),
            values=np.ascontiguousarray(result.values, dtype="<f8").tobytes(),
            step_ms=result.step_ms,
        )

    def series(self, selector: str) -> list[str]:
        try:
            return self.store.series_keys(selector or "")
        except (VhmsError, ValueError) as exc:
            raise _error(exc) from None

    def label_names(self) -> list[str]:
        return self.store.label_names()

    def label_values(self, label: str) -> list[str]:
        return self.store.label_values(label or "")


def _http_app(service: VhmsService) -> FastAPI:
    app = FastAPI(title=f"VHMS shard {service.shard}", docs_url=None, redoc_url=None)

    @app.get("/health")
    def health() -> dict[str, object]:
        return {"status": "ok", "shard": service.shard, "series": service.store.series}

    @app.get("/stats")
    def stats() -> dict[str, object]:
        store = service.store
        return {
            "shard": service.shard,
            "series": store.series,
            "resolutions": [str(r) for r in store.resolutions],
            "heads_ms": [r.head * r.step_ms if r.head >= 0 else None for r in store.rings],
            "counters": dict(store.stats),
            "server": dict(service.thrift.stats),
            "snapshots": service.snapshots,
        }

    return app


def _hold(directory: Path | None, shard: str) -> DirectoryLock | None:
    """The data directory's lock (released with the service, or when a service that failed
    to construct is collected)."""
    if directory is None:
        return None
    try:
        return DirectoryLock(directory, f"vhms shard {shard}").acquire()
    except DirectoryInUseError as exc:
        raise DataDirInUseError(str(exc)) from None


class VhmsService:
    def __init__(
        self,
        store: Store,
        *,
        shard: str = "default",
        host: str = "127.0.0.1",
        port: int = 0,
        http_port: int | None = 0,
        snapshot_dir: str | Path | None = None,
        snapshot_every: float = 300.0,
        max_frame_size: int = 256 * 1024 * 1024,
    ) -> None:
        self.store = store
        self.shard = shard
        self.snapshot_dir = Path(snapshot_dir) if snapshot_dir else None
        self.snapshot_every = snapshot_every
        self.snapshots = 0
        self._dir_lock = _hold(self.snapshot_dir, shard)
        if self.snapshot_dir is not None:
            restore_or_empty(store, self.snapshot_dir)
        self.thrift = FramedThriftServer(
            vhms_thrift.Vhms,
            _Handler(store),
            host,
            port,
            max_frame_size=max_frame_size,
            name=f"vhms[{shard}]",
        )
        self.host, self.port = self.thrift.host, self.thrift.port
        self.http = (
            BackgroundServer(_http_app(self), host, http_port, name="vhms-http")
            if http_port is not None
            else None
        )
        self.registration: Registration | None = None
        self._stop = threading.Event()
        self._snapshotter = threading.Thread(target=self._snapshot_loop, name="vhms-snapshots", daemon=True)

    def start(
        self, zk_hosts: str | None = None, *, register: bool = True, session_timeout: float = 10.0
    ) -> None:
        self.thrift.start()
        if self.http is not None:
            self.http.start()
        if self.snapshot_dir is not None and self.snapshot_every > 0:
            self._snapshotter.start()
        if register:
            connect, layout = resolve_zk(zk_hosts)
            ip = advertised_address(self.host)
            path = layout.vhms_member(self.shard, ip, self.port)
            payload = json.dumps(
                {
                    "shard": self.shard,
                    "host": ip,
                    "port": self.port,
                    "http_port": self.http.port if self.http else None,
                }
            ).encode()
            self.registration = Registration(connect, path, payload, session_timeout=session_timeout)
            self.registration.start()

    def snapshot(self) -> None:
        if self.snapshot_dir is not None:
            save_snapshot(self.store, self.snapshot_dir)
            self.snapshots += 1

    def _snapshot_loop(self) -> None:
        while not self._stop.wait(self.snapshot_every):
            try:
                self.snapshot()
            except VhmsError:
                log.exception("periodic snapshot failed")

    def stop(self) -> None:
        """Leave ZooKeeper, stop serving, then write the shutdown snapshot."""
        self._stop.set()
        if self.registration is not None:
            self.registration.close()
        self.thrift.stop()
        if self.http is not None:
            self.http.stop()
        if self._snapshotter.is_alive():
            self._snapshotter.join(timeout=30)
        try:
            self.snapshot()
        finally:
            if self._dir_lock is not None:
                self._dir_lock.release()
