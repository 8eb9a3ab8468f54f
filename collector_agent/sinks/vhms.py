"""``vhms``: writes the samples of Artimon events (Avro sample batches) into VHMS shards.

Each series goes to one shard, chosen by consistent hashing of its key over the live shards
(``virtualNodes`` points per shard on a 64-bit ring), and to every member (replica) of that
shard. Shards are found in ZooKeeper (``/artimon/vhms/<shard>/<ip>:<port>``, watched) or
listed statically. Routing changes only when the set of live shards changes. A batch is
committed out of the channel only when every shard it touches stored it; if one cannot be
reached the whole batch rolls back and the sink backs off (VHMS ingest is idempotent, so
the shards that did store it are not harmed by the retry).

Keys: ``zk`` (connect string, default ``$ARTIMON_ZK``), or ``servers`` (static:
``shard@host:port`` ...), ``batchSize`` (events per transaction, default 100),
``timeout`` (s, default 30), ``virtualNodes`` (default 64), ``shardGrace`` (s, default 30:
how long a shard whose members all left keeps its series before they move to the others,
so that a restart holds the events in the channel instead of moving them), ``time`` (``round``, default:
the round time in the ``artimon.round`` header when present, else each sample's own;
``sample``: always the sample's own). Counted besides Flume's sink counters:
``SamplesStoredCount``, ``SamplesRefusedCount``, ``EventUndecodableCount`` (events whose
body is not a sample batch; they go to the dead-letter file).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import socket
import threading
import time
from typing import Any

import numpy as np
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from bookkeeper.exceptions import MalformedFrameError, WireError
from bookkeeper.vartype import VarType
from bookkeeper.wire.avro import decode_sample_batch
from bookkeeper.wire.framed import call
from bookkeeper.zk.layout import resolve_zk
from bookkeeper.zk.registration import make_client
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import EventDeliveryException, MalformedEventError
from collector_agent.sinks.base import BatchSink
from vhms.idl import vhms_thrift

__all__ = ["HashRing", "VhmsSink"]

log = logging.getLogger(__name__)

Address = tuple[str, int]


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """Consistent hashing of series keys over shard names."""

    def __init__(self, shards: list[str], virtual_nodes: int = 64) -> None:
        points = sorted((_point(f"{shard}#{i}"), shard) for shard in shards for i in range(virtual_nodes))
        self._hashes = [p for p, _ in points]
        self._shards = [s for _, s in points]

    def shard_of(self, key: str) -> str:
        if not self._shards:
            raise LookupError("no live VHMS shard")
        index = bisect.bisect(self._hashes, _point(key)) % len(self._hashes)
        return self._shards[index]


class _Connection:
    def __init__(self, address: Address, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.sock: socket.socket | None = None

    def ingest(self, columns: tuple[Any, ...]) -> Any:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            return call(
                self.sock,
                vhms_thrift.Vhms,
                "ingest",
                *columns,
                max_frame_size=1024 * 1024,
                deadline=time.monotonic() + self.timeout,
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class VhmsSink(BatchSink):
    counter_names = (
        *BatchSink.counter_names,
        "SamplesStoredCount",
        "SamplesRefusedCount",
        "EventUndecodableCount",
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._members: dict[str, list[Address]] = {}
        self._ring = HashRing([])
        self._routes: dict[str, str] = {}
        self._lock = threading.Lock()
        self._connections: dict[Address, _Connection] = {}
        self._zk: KazooClient | None = None
        self._watched: set[str] = set()
        self._empty_since: dict[str, float] = {}

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.timeout = context.get_float("timeout", 30.0, minimum=0.1)
        self.virtual_nodes = context.get_int("virtualNodes", 64, minimum=1)
        self.shard_grace = context.get_float("shardGrace", 30.0, minimum=0.0)
        self.time_source = context.get_str("time", "round").strip()
        if self.time_source not in ("round", "sample"):
            raise context.error("time", f"{self.time_source!r} is neither round nor sample")
        self.static: dict[str, list[Address]] = {}
        for item in context.get_list("servers", []):
            shard, at, address = item.partition("@")
            host, colon, port = address.rpartition(":")
            if not (at and colon and host and port.isdigit()):
                raise context.error("servers", f"{item!r} is not shard@host:port")
            self.static.setdefault(shard, []).append((host, int(port)))
        self.zk_hosts = context.get_optional("zk") or os.environ.get("ARTIMON_ZK")
        if not self.static and not self.zk_hosts:
            raise context.error("zk", "is required (or servers = shard@host:port ...; or set ARTIMON_ZK)")

    # -- membership --------------------------------------------------------------------------

    def start(self) -> None:
        if self.static:
            self._set_members(self.static)
        else:
            connect, self._layout = resolve_zk(self.zk_hosts)
            self._zk = make_client(connect)
            self._zk.start_async()
            threading.Thread(target=self._watch_shards, name=f"sink {self.name} shards", daemon=True).start()
        super().start()

    def _watch_shards(self) -> None:  # runs in its own thread
        """Once connected, watch ``/vhms`` and each shard under it (kazoo re-arms the watches
        after reconnections; a watch on a missing node would stop, hence ``ensure_path``)."""
        while True:
            client = self._zk
            if client is None:  # stopped
                return
            try:
                if not client.connected:
                    time.sleep(0.2)  # kazoo reconnects in the background
                    continue
                client.ensure_path(f"{self._layout.root}/vhms")
                client.ChildrenWatch(f"{self._layout.root}/vhms", self._on_shards, allow_session_lost=True)
                return
            except KazooException as exc:
                log.warning("sink %s: cannot watch the VHMS shards yet: %s", self.name, exc)
                time.sleep(1.0)

    def stop(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
        for connection in self._connections.values():
            connection.close()
        super().stop()

    def _on_shards(self, shards: list[str]) -> None:
        for shard in shards:
            if shard not in self._watched and self._zk is not None:
                self._watched.add(shard)
                self._zk.ChildrenWatch(
                    f"{self._layout.root}/vhms/{shard}",
                    lambda members, shard=shard: self._on_members(shard, members),
                    allow_session_lost=True,
                )

    def _on_members(self, shard: str, members: list[str]) -> bool:
        addresses = []
        for member in members:
            host, _, port = member.rpartition(":")
            if host and port.isdigit():
                addresses.append((host, int(port)))
        with self._lock:
            current = dict(self._members)
            if addresses:
                self._empty_since.pop(shard, None)
            elif shard in current:
                self._empty_since.setdefault(shard, time.monotonic())
        if addresses:
            current[shard] = sorted(addresses)
        elif shard in current:
            current[shard] = []  # kept in the ring for shardGrace: a restart is not a departure
        self._set_members(current)
        return True

    def _expire_empty(self) -> None:
        """Drop shards that have had no member for longer than ``shardGrace`` seconds."""
        now = time.monotonic()
        with self._lock:
            gone = [s for s, since in self._empty_since.items() if now - since > self.shard_grace]
            if not gone:
                return
            for shard in gone:
                del self._empty_since[shard]
            current = {s: a for s, a in self._members.items() if s not in gone}
        self._set_members(current)

    def _set_members(self, members: dict[str, list[Address]]) -> None:
        with self._lock:
            if set(members) != set(self._members):
                self._ring = HashRing(sorted(members), self.virtual_nodes)
                self._routes = {}
                log.info("sink %s: VHMS shards now %s", self.name, sorted(members))
            self._members = members

    @property
    def shards(self) -> dict[str, list[Address]]:
        with self._lock:
            return dict(self._members)

    # -- delivery ----------------------------------------------------------------------------

    def _route(self, keys: list[str]) -> list[str]:
        with self._lock:
            routes, ring = self._routes, self._ring
        if len(routes) > 4_000_000:
            routes.clear()
        out = []
        for key in keys:
            shard = routes.get(key)
            if shard is None:
                shard = routes[key] = ring.shard_of(key)
            out.append(shard)
        return out

    def deliver(self, events: list[Event]) -> None:
        keys: list[str] = []
        values: list[np.ndarray] = []
        times: list[np.ndarray] = []
        strings: list[tuple[str, str, int]] = []
        bad = []
        for position, event in enumerate(events):
            try:
                batch = decode_sample_batch(event.body)
            except MalformedFrameError:
                bad.append(position)
                continue
            round_ms = event.headers.get("artimon.round")
            stamps = batch.timestamps
            if self.time_source == "round" and round_ms and round_ms.isdigit():
                stamps = np.full(len(batch), int(round_ms), dtype=np.int64)
            batch_keys = batch.series_keys()
            is_string = batch.types == VarType.STRING
            numeric = np.flatnonzero(~is_string)
            keys.extend(batch_keys[i] for i in numeric.tolist())
            values.append(batch.numeric_values()[numeric])
            times.append(stamps[numeric])
            for row in np.flatnonzero(is_string).tolist():
                strings.append((batch_keys[row], batch.strings[int(batch.values[row])], int(stamps[row])))
        if bad:
            self.counters.add("EventUndecodableCount", len(bad))
            raise MalformedEventError(f"{len(bad)} events are not Avro sample batches", bad)
        self._expire_empty()
        with self._lock:
            members = dict(self._members)
        if not members:
            raise EventDeliveryException(f"sink {self.name}: no live VHMS shard")
        all_values = np.concatenate(values) if values else np.zeros(0)
        all_times = np.concatenate(times) if times else np.zeros(0, dtype=np.int64)
        shard_of = np.array(self._route(keys), dtype=object) if keys else np.zeros(0, dtype=object)
        string_shards = self._route([k for k, _, _ in strings])
        for shard, addresses in members.items():
            rows = np.flatnonzero(shard_of == shard)
            picked = [i for i, s in enumerate(string_shards) if s == shard]
            if not len(rows) and not picked:
                continue
            if not addresses:
                raise EventDeliveryException(
                    f"sink {self.name}: shard {shard} has no live member (restarting?)"
                )
            columns = (
                [keys[i] for i in rows.tolist()],
                all_values[rows].astype("<f8").tobytes(),
                all_times[rows].astype("<i8").tobytes(),
                [strings[i][0] for i in picked],
                [strings[i][1] for i in picked],
                np.array([strings[i][2] for i in picked], dtype="<i8").tobytes(),
            )
            for address in addresses:
                connection = self._connections.setdefault(address, _Connection(address, self.timeout))
                try:
                    reply = connection.ingest(columns)
                except (OSError, WireError) as exc:
                    self.counters.add("ConnectionFailedCount")
                    raise EventDeliveryException(
                        f"sink {self.name}: shard {shard} at {address[0]}:{address[1]}: {exc}"
                    ) from None
                except vhms_thrift.VhmsException as exc:
                    raise EventDeliveryException(
                        f"sink {self.name}: shard {shard} refused: {exc.message}"
                    ) from None
                self.counters.add("SamplesStoredCount", int(reply.stored))
                self.counters.add("SamplesRefusedCount", int(reply.refused))
