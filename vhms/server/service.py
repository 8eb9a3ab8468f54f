"""``artimon vhms``: a store behind Thrift (ingest, fetch, series, labels) and HTTP
(``GET /health``, ``GET /stats``, ``GET /metrics`` in the Prometheus text format), registered in ZooKeeper as
``/artimon/vhms/<shard>/<ip>:<port>``, snapshotted every ``snapshot_every`` seconds and on
stop, restored at start. From construction to ``stop()`` the service holds its snapshot
directory (``in_use.lock``): a second service on it is refused with ``DataDirInUseError``
naming the holder's PID.

Durability: with a snapshot directory, each ingest is appended to the write-ahead log in
``<snapshot_dir>/wal`` (:mod:`vhms.server.wal`) before it is answered (fsynced first with the
``always`` policy), replayed at start after the snapshot, and dropped segment by segment
once a snapshot holds it. Admission, the log's append and the store's update happen under
the store's lock, so the log's order is the order a replay repeats.

Limits: the Thrift server's (:data:`DEFAULT_SERVER_LIMITS`, a :class:`bookkeeper.wire.ServerLimits`:
an ingest frame of at most 256 MiB, arriving within 60 s once begun; 64 connections, 16 per
peer address, the idlest closed to make room; silent ones closed after 10 s, idle ones after
300 s); fetch and series answer the store's query limits as ``VhmsException`` (kind
``FetchLimitError``), a bad selector as kind ``SelectorError``; a connection that sends
garbage is closed. With ``ssl_context`` (:func:`bookkeeper.wire.server_context`) the Thrift
port speaks TLS only (the HTTP health port stays plain).
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bookkeeper import DirectoryInUseError, MalformedFrameError
from bookkeeper.ground import BackgroundServer, DirectoryLock
from bookkeeper.wire import FramedThriftServer, ServerLimits, advertised_address
from bookkeeper.zk import Registration, ZkAuth, resolve_zk
from vhms.exceptions import DataDirInUseError, VhmsError, WalError
from vhms.idl import decode_ingest_batch, vhms_thrift
from vhms.server.catchup import CatchUp, catch_up, read_chunk
from vhms.server.http import http_app
from vhms.server.snapshot import restore_or_empty, save_snapshot, wal_from
from vhms.server.store import Store
from vhms.server.wal import ReplayReport, WriteAheadLog, remove_segments, replay, segments

if TYPE_CHECKING:  # a type only: the web configuration's reader (yaml) loads for a shard given one
    from bookkeeper.ground import WebConfig

__all__ = ["DEFAULT_SERVER_LIMITS", "VhmsService"]

log = logging.getLogger(__name__)

DEFAULT_SERVER_LIMITS = ServerLimits(max_frame_size=256 * 1024 * 1024, frame_timeout=60.0)


def _error(exc: Exception) -> Any:
    return vhms_thrift.VhmsException(kind=type(exc).__name__, message=str(exc))


_NO_IDS = np.zeros(0, dtype=np.int64)
_NO_TIMES = np.zeros(0, dtype=np.int64)


class _Handler:
    def __init__(self, store: Store, wal: WriteAheadLog | None, caught_up: threading.Event) -> None:
        self.store = store
        self.wal = wal
        self.caught_up = caught_up

    def _whole(self) -> None:
        """Refuse a read (or a peer's catch-up) while this member catches up."""
        if not self.caught_up.is_set():
            self.store.stats["reads_refused_catching_up"] += 1
            raise vhms_thrift.VhmsException(
                kind="CatchingUpError", message="this member is catching up from a peer of its shard"
            )

    def catch_up_chunk(self, first_series: int, max_bytes: int) -> Any:
        self._whole()
        try:
            data, following, total = read_chunk(self.store, first_series, max_bytes)
        except ValueError as exc:
            raise _error(exc) from None
        return vhms_thrift.CatchUpChunk(data=data, next_series=following, total_series=total)

    def ingest(self, *_: Any) -> Any:
        """Protocol 1 (a key string per sample): refused by name."""
        raise vhms_thrift.VhmsException(
            kind="ProtocolVersionError",
            message=(
                "ingest(keys, ...) is VHMS ingest protocol 1; this VHMS speaks protocol "
                f"{vhms_thrift.INGEST_PROTOCOL_VERSION} (ingest_columns): upgrade the sender"
            ),
        )

    def ingest_columns(self, batch: Any) -> Any:
        if batch is None or batch.protocol_version != vhms_thrift.INGEST_PROTOCOL_VERSION:
            version = None if batch is None else batch.protocol_version
            raise vhms_thrift.VhmsException(
                kind="ProtocolVersionError",
                message=(
                    f"ingest protocol {version} is not this VHMS's "
                    f"{vhms_thrift.INGEST_PROTOCOL_VERSION}: upgrade the older side"
                ),
            )
        try:
            columns = decode_ingest_batch(batch)
        except MalformedFrameError as exc:
            raise _error(ValueError(str(exc))) from None
        store, wal = self.store, self.wal
        pending = None
        with store._lock:  # admitted, logged and applied in one order: the order a replay follows
            (ids, admitted, admitted_times), (string_ids, texts, texts_times) = store.admit_columns(columns)
            if wal is not None and (len(ids) or len(string_ids)):
                try:
                    pending = wal.append(
                        store.index.keys_of, ids, admitted, admitted_times, string_ids, texts, texts_times
                    )
                except WalError as exc:
                    wal.stats["ingests_failed"] += 1
                    raise _error(exc) from None
            stored = store.apply(ids, admitted, admitted_times)
            if len(string_ids):
                store.apply_strings(string_ids, texts, texts_times)
        if wal is not None and pending is not None:
            try:
                wal.wait(pending)
            except WalError as exc:
                wal.stats["ingests_failed"] += 1
                raise _error(exc) from None
        return vhms_thrift.IngestReply(stored=stored, refused=len(columns.values) - stored)

    def fetch(
        self, selector: str, start_ms: int, end_ms: int, resolution: str, sample_times: bool | None = None
    ) -> Any:
        self._whole()
        try:
            result = self.store.fetch(
                selector or "", start_ms, end_ms, resolution or "auto", sample_times=bool(sample_times)
            )
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
            sample_times=None
            if result.sample_times is None
            else np.ascontiguousarray(result.sample_times, dtype="<i8").tobytes(),
            coarse_spans=np.array(result.coarse_spans, dtype="<i8").tobytes()
            if result.coarse_spans
            else None,
        )

    def series(self, selector: str) -> list[str]:
        self._whole()
        try:
            return self.store.series_keys(selector or "")
        except (VhmsError, ValueError) as exc:
            raise _error(exc) from None

    def label_names(self) -> list[str]:
        self._whole()
        return self.store.label_names()

    def strings(self, selector: str) -> Any:
        self._whole()
        try:
            last = self.store.last_strings(selector or "")
        except (VhmsError, ValueError) as exc:
            raise _error(exc) from None
        return vhms_thrift.StringsReply(
            keys=list(last),
            values=[text for _, text in last.values()],
            timestamps=np.array([ts for ts, _ in last.values()], dtype="<i8").tobytes(),
        )

    def label_values(self, label: str) -> list[str]:
        self._whole()
        return self.store.label_values(label or "")


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
    """A shard's store served over Thrift and HTTP (see the module doc).

    With ``snapshot_dir``, the snapshot there is restored and the write-ahead log in
    ``<snapshot_dir>/wal`` replayed (``replayed`` says what it found), then, unless ``wal``
    is false, every ingest is logged before it is answered: ``wal_fsync`` ``always``
    (fsynced first: survives a power loss) or ``periodic`` (written first, fsynced every
    ``wal_fsync_period`` seconds: survives a crash of the process). ``web_config`` (Prometheus's
    web configuration file, read) puts the HTTP port behind TLS and basic auth.
    """

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
        wal: bool = True,
        wal_fsync: str = "always",
        wal_fsync_period: float = 1.0,
        limits: ServerLimits = DEFAULT_SERVER_LIMITS,
        ssl_context: ssl.SSLContext | None = None,
        web_config: WebConfig | None = None,
    ) -> None:
        self.store = store
        self.shard = shard
        self.snapshot_dir = Path(snapshot_dir) if snapshot_dir else None
        self.snapshot_every = snapshot_every
        self.snapshots = 0
        self._dir_lock = _hold(self.snapshot_dir, shard)
        self.replayed: ReplayReport | None = None
        self.wal: WriteAheadLog | None = None
        if self.snapshot_dir is not None:
            restored = restore_or_empty(store, self.snapshot_dir)
            self.replayed = replay(  # even with the log off now
                store, self.snapshot_dir / "wal", first_segment=wal_from(self.snapshot_dir) if restored else 0
            )
            if wal:
                self.wal = WriteAheadLog(
                    self.snapshot_dir / "wal",
                    first_segment=self.replayed.next_segment,
                    fsync=wal_fsync,
                    fsync_period=wal_fsync_period,
                )
        self.caught_up = threading.Event()
        self.caught_up_from: tuple[str, int] | None = None
        self.thrift = FramedThriftServer(
            vhms_thrift.Vhms,
            _Handler(store, self.wal, self.caught_up),
            host,
            port,
            limits=limits,
            ssl_context=ssl_context,
            name=f"vhms[{shard}]",
        )
        self.host, self.port = self.thrift.host, self.thrift.port
        self.http = (
            BackgroundServer(http_app(self), host, http_port, name="vhms-http", web_config=web_config)
            if http_port is not None
            else None
        )
        self.registration: Registration | None = None
        self._stop = threading.Event()
        self._catcher: threading.Thread | None = None
        self._snapshot_lock = threading.Lock()
        self._snapshotter = threading.Thread(target=self._snapshot_loop, name="vhms-snapshots", daemon=True)

    def start(
        self,
        zk_hosts: str | None = None,
        *,
        register: bool = True,
        session_timeout: float = 10.0,
        zk_auth: ZkAuth | str | None = None,
        catch_up: CatchUp | None = None,
    ) -> None:
        """Serve, and unless ``register`` is false register in ZooKeeper with the
        credentials ``zk_auth`` (default ``$ARTIMON_ZK_AUTH``, then ``$ARTIMON_ZK_AUTH_FILE``).
        With ``catch_up`` (and registered), pull what the shard's other live members hold
        (:mod:`vhms.server.catchup`) in a thread, refusing reads until done (``caught_up``)."""
        if catch_up is None or not register:
            self.caught_up.set()
        if self.wal is not None:
            self.wal.start()
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
            self.registration = Registration(
                connect,
                path,
                payload,
                session_timeout=session_timeout,
                auth=zk_auth,
                known=layout.known_record(path),  # missing, not forgotten, once killed or cut off
            )
            self.registration.start()
            if catch_up is not None:
                self._catcher = threading.Thread(
                    target=self._catch_up,
                    args=(zk_hosts, zk_auth, catch_up),
                    name="vhms-catch-up",
                    daemon=True,
                )
                self._catcher.start()

    def _catch_up(self, zk_hosts: str | None, zk_auth: ZkAuth | str | None, options: CatchUp) -> None:
        me = (advertised_address(self.host), self.port)
        try:
            self.caught_up_from = catch_up(self.store, self.shard, me, zk_hosts, zk_auth, options, self._stop)
            if not self._stop.is_set():
                self.snapshot()  # what was merged is in no log: keep it
        except (VhmsError, OSError) as exc:
            log.error("shard %s: catching up failed: %s; serving what this member holds", self.shard, exc)
        finally:
            self.caught_up.set()

    def snapshot(self) -> None:
        """Write a snapshot, then delete the log's segments it holds."""
        if self.snapshot_dir is None:
            return
        wal = self.wal
        with self._snapshot_lock:  # the periodic one, the one after catching up, the last one
            save_snapshot(self.store, self.snapshot_dir, on_capture=wal.rotate if wal else None)
            self.snapshots += 1
            if wal is not None:
                wal.truncate()
            elif segments(self.snapshot_dir / "wal"):  # replayed at start, the log off since
                remove_segments(self.snapshot_dir / "wal")

    def wal_stats(self) -> dict[str, object]:
        """The log's policy and counters, and what the replay at start found."""
        return {
            "enabled": self.wal is not None,
            "fsync": self.wal.fsync if self.wal else None,
            "counters": dict(self.wal.stats) if self.wal else {},
            "replayed": self.replayed.as_dict() if self.replayed else None,
        }

    def _snapshot_loop(self) -> None:
        while not self._stop.wait(self.snapshot_every):
            try:
                self.snapshot()
            except VhmsError:
                log.exception("periodic snapshot failed")

    def stop(self) -> None:
        """Leave ZooKeeper, stop serving, write the shutdown snapshot, close the log."""
        self._stop.set()
        if self.registration is not None:
            self.registration.close()
        self.thrift.stop()
        if self.http is not None:
            self.http.stop()
        if self._catcher is not None:
            self._catcher.join(timeout=60)
        if self._snapshotter.is_alive():
            self._snapshotter.join(timeout=30)
        try:
            self.snapshot()
        finally:
            if self.wal is not None:
                self.wal.close()
            if self._dir_lock is not None:
                self._dir_lock.release()
