"""``vhms``: writes the samples of Artimon events (Avro sample batches) into VHMS shards.

The sink decodes its events into ingest columns and hands them to VHMS's sharded client
(:class:`vhms.ShardedClient`): each series goes to the shard the consistent-hash ring names
(``virtualNodes`` points per shard) and to every live member (replica) of that shard.
Shards are found in ZooKeeper (``/artimon/vhms/<shard>/<ip>:<port>``, watched) or listed
statically. A batch is committed out of the channel only when every shard it touches has
stored it on at least one member; otherwise the whole batch rolls back and the sink backs
off (VHMS ingest is idempotent, so the shards that did store it are not harmed by the
retry). A member that fails (refuses, or does not answer within ``timeout``: a hung
replica) is counted (``MemberFailCount``) and passed over for ``memberBackoff`` seconds,
doubled with each failure in a row up to ``maxMemberBackoff``. ZooKeeper is read with the
process's credentials (``$ARTIMON_ZK_AUTH``...), never with a configuration key.

Keys: ``zk`` (connect string, default ``$ARTIMON_ZK``), or ``servers`` (static:
``shard@host:port`` ...), ``batchSize`` (events per transaction, default 100),
``timeout`` (s, default 30), ``virtualNodes`` (default 64), ``memberBackoff`` (s, default
10), ``maxMemberBackoff`` (s, default 300), ``shardGrace`` (s, default 30:
how long a shard whose members all left keeps its series before they move to the others,
so that a restart holds the events in the channel instead of moving them), ``time`` (``round``, default:
the round time in the ``artimon.round`` header when present, else each sample's own;
``sample``: always the sample's own); TLS to the shards: ``ssl``, ``truststore``,
``keystore``, ``keystore-key``, ``keystore-password``, ``ssl-check-hostname``
(:mod:`collector_agent.tls`; a certificate must name the address its shard registers).
Counted besides Flume's sink counters:
``SamplesStoredCount``, ``SamplesRefusedCount``, ``EventUndecodableCount`` (events whose
body is not a sample batch; they go to the dead-letter file), ``MemberFailCount`` (calls to
a shard member that failed or timed out).
"""

from __future__ import annotations

import os

from bookkeeper import MalformedFrameError, WireError, ZkAuthError
from bookkeeper.ground import decode_sample_batch
from bookkeeper.wire import IngestColumns
from bookkeeper.zk import ZkAuth, resolve_zk_auth
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import EventDeliveryException, MalformedEventError
from collector_agent.ledger import round_of
from collector_agent.sinks.base import BatchSink
from collector_agent.tls import client_ssl_context
from vhms import Address, ShardedClient, VhmsError

__all__ = ["VhmsSink"]


class VhmsSink(BatchSink):
    counter_names = (
        *BatchSink.counter_names,
        "SamplesStoredCount",
        "SamplesRefusedCount",
        "EventUndecodableCount",
        "MemberFailCount",
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.client: ShardedClient | None = None

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.timeout = context.get_float("timeout", 30.0, minimum=0.1)
        self.virtual_nodes = context.get_int("virtualNodes", 64, minimum=1)
        self.shard_grace = context.get_float("shardGrace", 30.0, minimum=0.0)
        self.member_backoff = context.get_float("memberBackoff", 10.0, minimum=0.0)
        self.max_member_backoff = context.get_float("maxMemberBackoff", 300.0, minimum=self.member_backoff)
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
        self.ssl_context = client_ssl_context(context)
        self.zk_hosts = context.get_optional("zk") or os.environ.get("ARTIMON_ZK")
        if not self.static and not self.zk_hosts:
            raise context.error("zk", "is required (or servers = shard@host:port ...; or set ARTIMON_ZK)")
        self.zk_auth: ZkAuth | None = None
        if not self.static:
            try:
                self.zk_auth = resolve_zk_auth()
            except ZkAuthError as exc:
                raise context.error("zk", str(exc)) from None

    def start(self) -> None:
        self.client = ShardedClient(
            None if self.static else self.zk_hosts,
            servers=self.static or None,
            timeout=self.timeout,
            virtual_nodes=self.virtual_nodes,
            grace=self.shard_grace,
            member_backoff=self.member_backoff,
            max_member_backoff=self.max_member_backoff,
            ssl_context=self.ssl_context,
            name=f"sink {self.name}",
            zk_auth=self.zk_auth,
        )
        # the first batch must not find an empty shard list only because ZooKeeper has not
        # been read yet (bounded: a sink starts without ZooKeeper and keeps its events)
        self.client.wait_ready(min(self.timeout, 10.0))
        if self.ledger is not None:
            self.ledger.declare("vhms", self._place)
        super().start()

    @property
    def _place(self) -> str:
        return f"sink {self.name} (channel {self.channel.name})"

    def stop(self) -> None:
        if self.ledger is not None:
            self.ledger.withdraw("vhms", self._place)
        if self.client is not None:
            self.client.close()
            self.client = None
        super().stop()

    @property
    def shards(self) -> dict[str, list[Address]]:
        return self.client.shards if self.client is not None else {}

    def deliver(self, events: list[Event]) -> None:
        parts: list[IngestColumns] = []
        bad = []
        rounds = []  # (round, endpoint, samples) of the polled batches, for the ledger
        for position, event in enumerate(events):
            try:
                batch = decode_sample_batch(event.body)
            except MalformedFrameError:
                bad.append(position)
                continue
            polled = round_of(event.headers)
            if polled is not None:
                rounds.append((*polled, len(batch)))
            round_ms = event.headers.get("artimon.round") or ""
            use_round = self.time_source == "round" and round_ms.isdigit()
            parts.append(batch.ingest_columns(int(round_ms) if use_round else None))
        if bad:
            self.counters.add("EventUndecodableCount", len(bad))
            raise MalformedEventError(f"{len(bad)} events are not Avro sample batches", bad)
        client = self.client
        assert client is not None  # started
        try:
            stored, refused = client.ingest(IngestColumns.concat(parts))
        except (VhmsError, WireError) as exc:
            self.counters.add("ConnectionFailedCount")
            raise EventDeliveryException(f"sink {self.name}: {exc}") from None
        finally:
            self.counters.set("MemberFailCount", client.stats["member_failures"])
        self.counters.add("SamplesStoredCount", stored)
        self.counters.add("SamplesRefusedCount", refused)
        if self.ledger is not None:
            for polled_ms, endpoint, samples in rounds:
                self.ledger.commit("vhms", polled_ms, endpoint, samples)
            if refused:
                self.ledger.refuse("vhms", (polled_ms for polled_ms, _, _ in rounds), refused)
