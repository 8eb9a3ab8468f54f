"""VHMS's client side: one connection to a shard member (:class:`VhmsClient`), and the
sharded client every writer and reader shares (:class:`ShardedClient`).

The sharded client knows the shards and their members (replicas) from ZooKeeper
(``/artimon/vhms/<shard>/<ip>:<port>``, through :class:`bookkeeper.ground.Membership`) or from a
static list. It routes each series to the shard that :class:`vhms.placement.HashRing` names
and writes it to every live member of that shard; it reads each shard from one live
member, trying the next one when a member fails, and merges the shards' answers by columns.

Replicas: a write to a shard succeeds when at least one of its members stored it. A member
that fails (refuses, or does not answer within ``timeout``) is counted
(``stats["member_failures"]``) and passed over for ``member_backoff`` seconds, doubled with
each failure in a row up to ``max_member_backoff`` and reset by a success, so a member that
is down or hung but still registered costs one timeout per backoff, not one per batch;
when every member of a shard is passed over, all are tried.
A shard whose last member left stays on the ring for ``grace`` seconds (a restart is not a
departure): writes to it fail meanwhile, so the sink keeps its events in the channel
instead of moving them to another shard.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from bookkeeper import WireError
from bookkeeper.ground import LabelColumn, LabelColumns, Member, Membership, concat, row_keys, series_hashes
from bookkeeper.wire import FramedClient, IngestColumns
from bookkeeper.zk import MAX_PAYLOAD, ZkAuth, make_client, resolve_zk, resolve_zk_auth
from vhms.exceptions import (
    CatchingUpError,
    FetchLimitError,
    ProtocolVersionError,
    SelectorError,
    UnavailableError,
    VhmsError,
    WalError,
)
from vhms.idl import encode_ingest_batch, vhms_thrift
from vhms.placement import HashRing
from vhms.results import NAME, CoarseSpan, FetchResult

__all__ = ["Address", "ShardedClient", "VhmsClient", "merge_results"]

log = logging.getLogger(__name__)

Address = tuple[str, int]
T = TypeVar("T")

_KINDS: dict[str, type[VhmsError]] = {
    "SelectorError": SelectorError,
    "FetchLimitError": FetchLimitError,
    "WalError": WalError,
    "ProtocolVersionError": ProtocolVersionError,
    "CatchingUpError": CatchingUpError,
}


class VhmsClient(FramedClient):
    """One kept-alive connection to a VHMS member; ``timeout`` bounds each call; with
    ``ssl_context`` (:func:`bookkeeper.wire.client_context`) it speaks TLS. Every call is
    idempotent, so one that fails on a connection the member closed while it sat idle is
    tried again on a fresh one (:class:`bookkeeper.wire.FramedClient`)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 30.0,
        max_frame_size: int = 512 * 1024 * 1024,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(
            host,
            port,
            vhms_thrift.Vhms,
            connect_timeout=timeout,
            timeout=timeout,
            max_frame_size=max_frame_size,
            ssl_context=ssl_context,
        )

    def _vhms_call(self, api: str, *args: Any) -> Any:
        try:
            return self.call(api, *args, idempotent=True)  # every VHMS call is idempotent
        except vhms_thrift.VhmsException as exc:
            raise _KINDS.get(exc.kind, VhmsError)(exc.message) from None

    def ingest(self, columns: IngestColumns) -> tuple[int, int]:
        """Store numeric and STRING samples; returns ``(stored, refused)``."""
        reply = self._vhms_call("ingest_columns", encode_ingest_batch(columns))
        return int(reply.stored), int(reply.refused)

    def fetch(
        self,
        selector: str,
        start_ms: int,
        end_ms: int,
        resolution: str | int = "auto",
        *,
        sample_times: bool = False,
    ) -> FetchResult:
        reply = self._vhms_call("fetch", selector, start_ms, end_ms, str(resolution), sample_times)
        timestamps = np.frombuffer(reply.timestamps, dtype="<i8")
        labels: LabelColumns = {
            column.label: LabelColumn(list(column.values), np.frombuffer(column.codes, dtype="<i4"))
            for column in reply.labels or []
        }
        count = len(labels[NAME][1]) if NAME in labels else 0
        if any(len(codes) != count for _, codes in labels.values()) or any(
            len(codes) and (codes.max() >= len(values) or codes.min() < -1)
            for values, codes in labels.values()
        ):
            raise WireError(f"VHMS {self.address}: label columns that do not agree")
        values = np.frombuffer(reply.values, dtype="<f8")
        if len(values) != count * len(timestamps):
            raise WireError(f"VHMS {self.address}: {len(values)} values for {count} series")
        if not labels:
            return FetchResult.empty(int(reply.step_ms))
        times = None
        if reply.sample_times is not None:
            times = np.frombuffer(reply.sample_times, dtype="<i8")
            if len(times) != len(values):
                raise WireError(f"VHMS {self.address}: {len(times)} sample times for {len(values)} values")
            times = times.reshape(count, len(timestamps))
        shape = (count, len(timestamps))
        spans = _decode_spans(reply.coarse_spans, self.address)
        return FetchResult(labels, timestamps, values.reshape(shape), int(reply.step_ms), times, spans)

    def series(self, selector: str) -> list[str]:
        return list(self._vhms_call("series", selector))

    def label_names(self) -> list[str]:
        return list(self._vhms_call("label_names"))

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        """The last value and its time of each selected STRING series."""
        reply = self._vhms_call("strings", selector)
        times = np.frombuffer(reply.timestamps or b"", dtype="<i8").tolist()
        if not len(reply.keys or []) == len(reply.values or []) == len(times):
            raise WireError(f"VHMS {self.address}: string columns of different lengths")
        return {key: (ts, text) for key, text, ts in zip(reply.keys, reply.values, times, strict=True)}

    def label_values(self, label: str) -> list[str]:
        return list(self._vhms_call("label_values", label))

    def catch_up_chunk(self, first_series: int, max_bytes: int) -> tuple[bytes, int, int]:
        """A chunk of the member's store for a replica catching up (``vhms.server.catchup``):
        its ``.npz`` bytes, the next chunk's first series, the member's series count."""
        reply = self._vhms_call("catch_up_chunk", first_series, max_bytes)
        if reply.next_series is None or reply.total_series is None:
            raise WireError(f"VHMS {self.address}: a catch-up chunk without its bounds")
        return reply.data or b"", int(reply.next_series), int(reply.total_series)

    def __enter__(self) -> VhmsClient:
        return self


def _decode_spans(data: bytes | None, address: str) -> tuple[CoarseSpan, ...]:
    """A fetch reply's coarse spans (:class:`CoarseSpan` triples of int64)."""
    if not data:
        return ()
    if len(data) % 24:
        raise WireError(f"VHMS {address}: coarse spans of {len(data)} bytes, not triples of int64")
    spans = tuple(CoarseSpan(*span) for span in np.frombuffer(data, dtype="<i8").reshape(-1, 3).tolist())
    if any(span.step_ms <= 0 or span.start_ms >= span.end_ms for span in spans):
        raise WireError(f"VHMS {address}: coarse spans that are not spans: {spans[:3]}")
    return spans


def _on_axis(part: FetchResult, axis: np.ndarray) -> FetchResult:
    """``part`` on the time axis ``axis`` (a superset of its own): no sample at the others."""
    if np.array_equal(part.timestamps, axis):
        return part
    where = np.searchsorted(axis, part.timestamps)
    values = np.full((len(part), len(axis)), np.nan)
    values[:, where] = part.values
    times = None
    if part.sample_times is not None:
        times = np.repeat(axis[None, :], len(part), axis=0)
        times[:, where] = part.sample_times
    return FetchResult(part.labels, axis, values, part.step_ms, times, part.coarse_spans)


def merge_results(results: Sequence[FetchResult]) -> FetchResult:
    """One result from the shards' results (the same step): series concatenated in the
    order given; a series found in two results (a routing change, a replica) merged bucket
    by bucket, the first value winning. Shards whose stitched reads met at different
    instants (:class:`CoarseSpan`) are put on the union of their time axes. Numpy over
    label codes, never a loop per series."""
    found = [r for r in results if len(r)]
    if len(found) <= 1:
        return found[0] if found else results[0]
    axis = np.unique(np.concatenate([r.timestamps for r in found]))
    parts = [_on_axis(r, axis) for r in found]
    spans = tuple(sorted({span for part in parts for span in part.coarse_spans}))
    labels = sorted({label for part in parts for label in part.labels})
    joint: LabelColumns = {
        label: concat([part.labels.get(label, LabelColumn.absent(len(part))) for part in parts])
        for label in labels
    }
    key = row_keys(joint.values(), sum(len(p) for p in parts))
    values = np.concatenate([p.values for p in parts])
    timed = all(p.sample_times is not None for p in parts)
    times = np.concatenate([p.sample_times for p in parts if p.sample_times is not None]) if timed else None
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(first) == len(key):
        return FetchResult(joint, axis, values, parts[0].step_ms, times, spans)
    keep = np.sort(first)  # the first occurrence of each series, in input order
    target = np.empty(len(first), dtype=np.int64)
    target[np.argsort(first)] = np.arange(len(first))  # class -> its row in the output
    merged = values[keep]
    merged_times = None if times is None else times[keep]
    later = np.setdiff1d(np.arange(len(key)), keep)
    for row, into in zip(later.tolist(), target[inverse[later]].tolist(), strict=True):  # duplicates only
        missing = np.isnan(merged[into])
        merged[into] = np.where(missing, values[row], merged[into])
        if merged_times is not None and times is not None:
            merged_times[into] = np.where(missing, times[row], merged_times[into])
    return FetchResult(
        {label: LabelColumn(vals, codes[keep]) for label, (vals, codes) in joint.items()},
        axis,
        merged,
        parts[0].step_ms,
        merged_times,
        spans,
    )


def _decode_member(shard: str, name: str, data: bytes) -> Address:
    """A member's address from its znode name ``ip:port``; its JSON payload must agree."""
    host, _, port = name.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"member name {name!r} is not ip:port")
    if len(data) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(data)} bytes exceeds {MAX_PAYLOAD}")
    try:
        payload = json.loads(data) if data else {}
    except ValueError:
        raise ValueError(f"payload is not JSON: {data[:100]!r}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"payload is not a JSON object: {data[:100]!r}")
    if (
        payload.get("shard", shard) != shard
        or payload.get("port", int(port)) != int(port)
        or payload.get("host", host) != host
    ):
        raise ValueError(f"payload {payload} disagrees with its znode {shard}/{name}")
    return host, int(port)


class ShardedClient:
    """Every VHMS shard, from ZooKeeper (``zk_hosts``, default ``$ARTIMON_ZK``, read with the
    credentials ``zk_auth``, default ``$ARTIMON_ZK_AUTH``...) or the static ``servers``
    ({shard: [(host, port), ...]}); see the module doc. Its ``fetch``, ``series``,
    ``label_names`` and ``label_values`` are a query's data source. With ``ssl_context``
    every member is spoken to over TLS (its certificate must name the address it registers,
    when the context checks host names)."""

    def __init__(
        self,
        zk_hosts: str | None = None,
        *,
        servers: Mapping[str, Sequence[Address]] | None = None,
        timeout: float = 30.0,
        virtual_nodes: int = 64,
        grace: float = 30.0,
        member_backoff: float = 10.0,
        max_member_backoff: float = 300.0,
        threads: int = 8,
        ssl_context: ssl.SSLContext | None = None,
        name: str = "vhms-client",
        zk_auth: ZkAuth | str | None = None,
    ) -> None:
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.virtual_nodes = virtual_nodes
        self.member_backoff = member_backoff
        self.max_member_backoff = max(member_backoff, max_member_backoff)
        self.name = name
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._members: dict[str, list[Address]] = {}
        self._ring = HashRing([], virtual_nodes)
        self._down_until: dict[Address, float] = {}
        self._failures_in_row: Counter[Address] = Counter()
        self._idle: dict[Address, list[VhmsClient]] = {}
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
        self._zk: Any = None
        self.membership: Membership | None = None
        if servers is not None:
            self._set_members({shard: list(addresses) for shard, addresses in servers.items()})
            return
        connect, layout = resolve_zk(zk_hosts)
        auth = resolve_zk_auth(zk_auth)
        self._zk = make_client(connect, auth=auth)
        self._zk.start_async()
        self.membership = Membership(
            self._zk,
            f"{layout.root}/vhms",
            decode=_decode_member,
            grace=grace,
            on_change=self._on_view,
            name=f"{name} shards",
            auth=auth,
        )
        self.membership.start()

    # -- membership --------------------------------------------------------------------------

    def _on_view(self, view: Mapping[str, tuple[Member, ...]]) -> None:
        self._set_members({shard: [m.payload for m in members] for shard, members in view.items()})

    def _set_members(self, members: dict[str, list[Address]]) -> None:
        with self._lock:
            known = {address for addresses in self._members.values() for address in addresses}
            for address in {a for addresses in members.values() for a in addresses} - known:
                self._down_until.pop(address, None)  # registered anew: a new process, not passed over
                self._failures_in_row.pop(address, None)
            if set(members) != set(self._members):
                self._ring = HashRing(members, self.virtual_nodes)
                log.info("%s: VHMS shards now %s", self.name, sorted(members))
            self._members = members

    @property
    def shards(self) -> dict[str, list[Address]]:
        """Every shard on the ring and its live members (none during a shard's grace)."""
        with self._lock:
            return {shard: list(addresses) for shard, addresses in self._members.items()}

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the first read of the shards from ZooKeeper (at once for static ones)."""
        return self.membership is None or self.membership.ready.wait(timeout)

    def shard_of(self, key: str) -> str:
        """The shard that holds a series; ``UnavailableError`` when there is none."""
        with self._lock:
            ring = self._ring
        try:
            return ring.shard_of(key)
        except LookupError:
            raise UnavailableError("no live VHMS shard") from None

    # -- connections -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self, address: Address) -> Iterator[VhmsClient]:
        with self._lock:
            idle = self._idle.setdefault(address, [])
            client = (
                idle.pop()
                if idle
                else VhmsClient(*address, timeout=self.timeout, ssl_context=self.ssl_context)
            )
        try:
            yield client
        finally:
            with self._lock:
                self._idle.setdefault(address, []).append(client)

    def _candidates(self, addresses: list[Address]) -> list[Address]:
        """Members not passed over (all of them when every one is)."""
        now = time.monotonic()
        with self._lock:
            live = [a for a in addresses if self._down_until.get(a, 0.0) <= now]
        return live or list(addresses)

    def _failed(self, shard: str, address: Address, exc: Exception) -> None:
        self.stats["member_failures"] += 1
        with self._lock:
            first = address not in self._down_until or self._down_until[address] <= time.monotonic()
            self._failures_in_row[address] += 1
            backoff = min(
                self.member_backoff * 2 ** min(self._failures_in_row[address] - 1, 30),
                self.max_member_backoff,
            )
            self._down_until[address] = time.monotonic() + backoff
        if first:
            log.warning(
                "%s: shard %s member %s:%d failed (%s); passed over for %.0f s",
                self.name,
                shard,
                *address,
                exc,
                backoff,
            )

    def _recovered(self, address: Address) -> None:
        if address in self._down_until:
            with self._lock:
                self._down_until.pop(address, None)
                self._failures_in_row.pop(address, None)

    def _call(self, address: Address, method: Callable[[VhmsClient], T]) -> T:
        with self._connection(address) as client:
            return method(client)

    # -- writes ------------------------------------------------------------------------------

    def _route(
        self, names: list[str], label_sets: list[str], name_ids: np.ndarray, set_ids: np.ndarray
    ) -> np.ndarray:
        """The shard of each sample's series (as an object array), from the batch's columns."""
        with self._lock:
            ring = self._ring
        try:
            return ring.shards_of(series_hashes({}, names, label_sets, name_ids, set_ids))
        except LookupError:
            raise UnavailableError("no live VHMS shard") from None

    def ingest(self, columns: IngestColumns) -> tuple[int, int]:
        """Store samples on their shards, on every live member of each; returns
        ``(stored, refused)`` as the members that stored them first said.
        ``UnavailableError`` when a shard has no member that stored its part: the caller
        sends the whole batch again (ingest is idempotent)."""
        if not len(columns):
            return 0, 0
        numeric_shards = self._route(columns.names, columns.label_sets, columns.name_ids, columns.set_ids)
        string_shards = self._route(
            columns.names, columns.label_sets, columns.string_name_ids, columns.string_set_ids
        )
        members = self.shards
        work = []
        for shard in {*numeric_shards.tolist(), *string_shards.tolist()}:
            addresses = members.get(shard, [])
            if not addresses:
                raise UnavailableError(f"shard {shard} has no live member (restarting?)")
            part = columns.take(
                np.flatnonzero(numeric_shards == shard), np.flatnonzero(string_shards == shard)
            )
            work.append((shard, part, self._candidates(addresses)))
        futures = {
            (shard, address): self._pool.submit(self._call, address, lambda c, part=part: c.ingest(part))
            for shard, part, addresses in work
            for address in addresses
        }
        stored = refused = 0
        for shard, _, addresses in work:
            answer: tuple[int, int] | None = None
            errors = []
            for address in addresses:
                try:
                    reply = futures[(shard, address)].result()
                except (WireError, VhmsError, OSError) as exc:
                    self._failed(shard, address, exc)
                    errors.append(f"{address[0]}:{address[1]}: {exc}")
                    continue
                self._recovered(address)
                answer = answer or reply
            if answer is None:
                raise UnavailableError(f"shard {shard}: no member stored the batch ({'; '.join(errors)})")
            stored += answer[0]
            refused += answer[1]
        return stored, refused

    # -- reads -------------------------------------------------------------------------------

    def _read_shard(self, shard: str, addresses: list[Address], method: Callable[[VhmsClient], T]) -> T:
        """``method`` on one member of ``shard``, the next one when a member fails."""
        errors = []
        for address in self._candidates(addresses):
            try:
                result = self._call(address, method)
            except CatchingUpError as exc:  # alive, not yet whole: the next member answers
                self.stats["catching_up_skips"] += 1
                errors.append(f"{address[0]}:{address[1]}: {exc}")
                continue
            except (WireError, OSError) as exc:
                self._failed(shard, address, exc)
                errors.append(f"{address[0]}:{address[1]}: {exc}")
                continue
            self._recovered(address)
            return result
        raise UnavailableError(f"shard {shard}: no member answered ({'; '.join(errors)})")

    def _each(self, method: Callable[[VhmsClient], T]) -> list[T]:
        """``method`` on every shard that has members, in shard order."""
        self.wait_ready(self.timeout)
        live = [(shard, addresses) for shard, addresses in sorted(self.shards.items()) if addresses]
        futures = [self._pool.submit(self._read_shard, shard, addresses, method) for shard, addresses in live]
        return [future.result() for future in futures]

    def fetch(
        self,
        selector: str,
        start_ms: int,
        end_ms: int,
        resolution: str | int = "auto",
        *,
        sample_times: bool = False,
    ) -> FetchResult:
        """The selected series of every shard, merged (:func:`merge_results`); with
        ``sample_times``, each value's own time (``auto``: each shard's read stitched from
        its rings, :meth:`vhms.server.Store.fetch`)."""
        results = self._each(
            lambda c: c.fetch(selector, start_ms, end_ms, resolution, sample_times=sample_times)
        )
        if not results:
            return FetchResult.empty()
        steps = {r.step_ms for r in results}
        if len(steps) > 1:  # shards picked different rings: read them all at the coarsest
            coarsest = max(steps) // 1000
            results = self._each(
                lambda c: c.fetch(selector, start_ms, end_ms, coarsest, sample_times=sample_times)
            )
        return merge_results(results)

    def series(self, selector: str) -> list[str]:
        return sorted({key for part in self._each(lambda c: c.series(selector)) for key in part})

    def label_names(self) -> list[str]:
        return sorted({name for part in self._each(lambda c: c.label_names()) for name in part})

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        """The last value and its time of each selected STRING series, from every shard
        (the newest where two shards hold one, after a routing change)."""
        merged: dict[str, tuple[int, str]] = {}
        for part in self._each(lambda c: c.strings(selector)):
            for key, value in part.items():
                if key not in merged or merged[key][0] < value[0]:
                    merged[key] = value
        return dict(sorted(merged.items()))

    def label_values(self, label: str) -> list[str]:
        return sorted({value for part in self._each(lambda c: c.label_values(label)) for value in part})

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self.membership is not None:
            self.membership.stop()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        with self._lock:
            for clients in self._idle.values():
                for client in clients:
                    client.close()
            self._idle.clear()

    def __enter__(self) -> ShardedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
