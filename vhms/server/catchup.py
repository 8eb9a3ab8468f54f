"""A replica catching up from a live peer of its shard.

The sharded client writes a batch to every live member of a shard and commits it once one
stored it, so a member that was down (or restarted with an empty data directory) lacks what
was written meanwhile. At start, after registering (so that live ingest reaches it from then
on), a member reads its shard's other members from ZooKeeper (the registrations the client
reads) and pulls the peer's store from the first that answers, chunk by chunk
(``catch_up_chunk``: the series ``[first, next)`` in the snapshot's ``.npz`` layout, at most
``max_bytes`` of ring data each, one call at a time, each within the client's timeout).

Each chunk is merged under the store's lock with what live ingest stored meanwhile:

- the finest ring by sample time: per (series, bucket) the later sample stays (at a tie,
  the local one), so a later write of a bucket is never lost whichever came first;
- a coarser ring's bucket that the finest ring covers whole is recomputed from the merged
  finest ring (what ingest does); an older one takes the peer's value where the local
  bucket is empty;
- STRING series keep their later value.

Until it has caught up, the member refuses reads with ``CatchingUpError`` (the sharded
client asks the next member) and says ``catching up`` on ``/health``.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import ssl
import threading
import zipfile
from typing import Any

import numpy as np

from bookkeeper import WireError
from bookkeeper.zk import ZkAuth
from vhms.client import ShardedClient, VhmsClient
from vhms.exceptions import SnapshotError, VhmsError
from vhms.server.coarse import CoarseRing
from vhms.server.finest import FinestRing
from vhms.server.rings import decode_values, encode_values
from vhms.server.snapshot import series_arrays, unpack_strings
from vhms.server.store import Store

__all__ = ["MAX_CHUNK_BYTES", "CatchUp", "catch_up", "merge_chunk", "pull", "read_chunk"]

log = logging.getLogger(__name__)

MAX_CHUNK_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class CatchUp:
    """How a starting member catches up (``VhmsService.start(catch_up=...)``): when the shard
    has other members, after ``delay`` seconds (for the writers to see its registration, so
    that live ingest reaches it before it reads its peer), chunks of at most ``chunk_bytes``
    of ring data, each call within ``timeout`` seconds; ``ssl_context`` (a client context)
    when the members speak TLS."""

    delay: float = 2.0
    timeout: float = 30.0
    chunk_bytes: int = 8 * 1024 * 1024
    ssl_context: ssl.SSLContext | None = None


def _bytes_per_series(store: Store) -> int:
    return sum(
        ring.slots * (8 + (np.dtype(ring.time_dtype).itemsize if isinstance(ring, FinestRing) else 0))
        for ring in store.rings
    )


def read_chunk(store: Store, first: int, max_bytes: int) -> tuple[bytes, int, int]:
    """The series from ``first`` that fit ``max_bytes`` of ring data (at least one; the cap
    :data:`MAX_CHUNK_BYTES`) as ``.npz`` bytes, the next chunk's first series and the
    store's series count."""
    if first < 0 or max_bytes <= 0:
        raise ValueError(f"catch-up chunk from series {first} of {max_bytes} bytes")
    per_series = max(_bytes_per_series(store), 1)
    with store._lock:
        total = store.series
        stop = min(total, max(first, first + min(max_bytes, MAX_CHUNK_BYTES) // per_series, first + 1))
        arrays = series_arrays(store, min(first, stop), stop)
    out = io.BytesIO()
    np.savez(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue(), stop, total


def _load(store: Store, data: bytes) -> tuple[list[str], dict[str, np.ndarray]]:
    """The chunk's keys and arrays, checked against the store's rings; ``SnapshotError`` if not."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        keys = unpack_strings(arrays["keys.blob"], arrays["keys.offsets"])
        for i, ring in enumerate(store.rings):
            arrays[f"ring{i}.head"] = arrays[f"ring{i}.head"].astype(np.int64)
            arrays[f"ring{i}.values"] = arrays[f"ring{i}.values"].astype(np.float64)
            if isinstance(ring, FinestRing):
                arrays[f"ring{i}.times"] = arrays[f"ring{i}.times"].astype(ring.time_dtype)
            shape = arrays[f"ring{i}.values"].shape
            if shape != (ring.slots, len(keys)) or arrays[f"ring{i}.head"].shape != (1,):
                raise ValueError(f"ring {i}: values of shape {shape} for {len(keys)} series")
            if isinstance(ring, FinestRing) and arrays[f"ring{i}.times"].shape != shape:
                raise ValueError(f"ring {i}: times of shape {arrays[f'ring{i}.times'].shape}")
        texts = unpack_strings(arrays["strings.blob"], arrays["strings.offsets"])
        arrays["strings.ids"] = arrays["strings.ids"].astype(np.int64)
        arrays["strings.ts"] = arrays["strings.ts"].astype(np.int64)
        if not len(arrays["strings.ids"]) == len(arrays["strings.ts"]) == len(texts):
            raise ValueError("strings of different lengths")
    except (OSError, EOFError, ValueError, TypeError, KeyError, IndexError, zipfile.BadZipFile) as exc:
        raise SnapshotError(f"a catch-up chunk that cannot be read: {exc}") from None
    return keys, arrays


def merge_chunk(store: Store, data: bytes, first: int) -> int:
    """Merge a chunk of a peer's store that starts at the peer's series ``first`` (see the
    module doc); returns the series it held."""
    keys, arrays = _load(store, data)
    with store._lock:
        ids = store.index.lookup(keys)
        kept = ids >= 0
        store.stats["catchup_series_refused"] += int((~kept).sum())
        for ring in store.rings:
            ring.grow(len(store.index))
        for i in range(len(store.rings)):
            head = int(arrays[f"ring{i}.head"][0])
            if head >= 0 and kept.any():
                _merge_ring(store, i, head, arrays, ids, kept)
        local_of = dict(zip(range(first, first + len(keys)), ids.tolist(), strict=True))
        texts = unpack_strings(arrays["strings.blob"], arrays["strings.offsets"])
        for peer_id, ts, text in zip(
            arrays["strings.ids"].tolist(), arrays["strings.ts"].tolist(), texts, strict=True
        ):
            local = local_of.get(peer_id, -1)
            current = store.strings.get(local)
            if local >= 0 and (current is None or current[0] < ts):
                store.strings[local] = (int(ts), text)
    store.stats["catchup_series"] += len(keys)
    return len(keys)


def _merge_ring(
    store: Store, i: int, head: int, arrays: dict[str, Any], ids: np.ndarray, kept: np.ndarray
) -> None:
    ring = store.rings[i]
    ring.advance(head)
    slots = np.arange(ring.slots)
    bucket = head - (head - slots) % ring.slots  # the peer's bucket in each slot
    live = bucket > ring.head - ring.slots  # those the local ring still covers
    peer = encode_values(arrays[f"ring{i}.values"])[:, kept]
    local_ids = ids[kept]
    if i > 0:
        _merge_coarse(ring, bucket[live], peer[live], local_ids)
        _recompute_covered(store, ring, local_ids)
        return
    assert isinstance(ring, FinestRing)  # the finest ring keeps times
    peer_times = arrays[f"ring{i}.times"][:, kept][live]
    grid_buckets = np.repeat(bucket[live], len(local_ids))
    grid_ids = np.tile(local_ids, int(live.sum()))
    values, times = ring.cells(grid_buckets, grid_ids)
    peer_bits = peer[live].reshape(-1)
    peer_times = peer_times.reshape(-1)
    take = (peer_bits != 0) & ((values == 0) | (peer_times > times))
    if take.any():
        ring.overwrite(grid_buckets[take], grid_ids[take], peer_bits[take], peer_times[take])


def _merge_coarse(
    ring: FinestRing | CoarseRing, buckets: np.ndarray, peer: np.ndarray, ids: np.ndarray
) -> None:
    """The peer's ``[buckets, ids]`` stored bits where the local bucket is empty, through the
    ring's ``gather`` and ``scatter`` (a sealed block's chunk that takes any is decoded and
    encoded again, once a chunk of the catch-up)."""
    grid_buckets = np.repeat(buckets, len(ids))
    grid_ids = np.tile(ids, len(buckets))
    local = encode_values(ring.gather(grid_buckets, grid_ids))
    take = (peer.reshape(-1) != 0) & (local == 0)
    if take.any():
        ring.scatter(grid_buckets[take], grid_ids[take], decode_values(peer.reshape(-1)[take]))


def _recompute_covered(store: Store, ring: FinestRing | CoarseRing, ids: np.ndarray) -> None:
    """A coarse ring's buckets the finest ring covers whole (or up to its head) and holds a
    sample of, recomputed from it (an empty one stays as it is: ``count`` would make it 0)."""
    finest = store.rings[0]
    ratio = ring.step_ms // finest.step_ms
    if finest.head < 0 or ring.head < 0:
        return
    first = -(-(finest.head - finest.slots + 1) // ratio)  # the first coarse bucket covered whole
    last = finest.head // ratio  # its later fine buckets are still to come: empty
    buckets = np.arange(max(first, ring.head - ring.slots + 1), min(last, ring.head) + 1)
    if not len(buckets) or not len(ids):
        return
    grid_ids = np.repeat(ids, len(buckets))
    grid_buckets = np.tile(buckets, len(ids))
    fine = grid_buckets[:, None] * ratio + np.arange(ratio)[None, :]
    filled = (encode_values(finest.gather(fine, grid_ids[:, None])) != 0).any(axis=1)
    if filled.any():
        store._recompute(ring, ratio, grid_ids[filled], grid_buckets[filled])


def pull(
    store: Store,
    peers: list[tuple[str, int]],
    *,
    chunk_bytes: int,
    timeout: float,
    ssl_context: ssl.SSLContext | None,
    stop: threading.Event,
) -> tuple[str, int] | None:
    """Merge the store of the first of ``peers`` that answers every chunk; returns that peer
    (``None``: none did, or ``stop`` was set). A peer that fails mid-way leaves what was
    merged (merging again is idempotent) and the next one is read from its start."""
    for address in peers:
        first = 0
        try:
            with VhmsClient(
                *address, timeout=timeout, max_frame_size=2 * chunk_bytes + (1 << 20), ssl_context=ssl_context
            ) as client:
                while not stop.is_set():
                    data, following, total = client.catch_up_chunk(first, chunk_bytes)
                    if following <= first and following < total:
                        raise VhmsError(f"chunk from series {first} ends at {following}")
                    merge_chunk(store, data, first)
                    store.stats["catchup_bytes"] += len(data)
                    store.stats["catchup_chunks"] += 1
                    if following >= total:
                        with store._lock:  # the sealed blocks decoded to take the peer's cells
                            for ring in store.rings:
                                ring.seal_open()
                        return address
                    first = following
            return None
        except (WireError, VhmsError, OSError) as exc:
            store.stats["catchup_peer_failures"] += 1
            log.warning("catching up from %s:%d failed at series %d: %s", *address, first, exc)
    return None


def catch_up(
    store: Store,
    shard: str,
    me: tuple[str, int],
    zk_hosts: str | None,
    zk_auth: ZkAuth | str | None,
    options: CatchUp,
    stop: threading.Event,
) -> tuple[str, int] | None:
    """The shard's other live members as the sharded client reads them from ZooKeeper (none:
    done at once), after ``options.delay`` again, and :func:`pull` from them; returns the
    peer caught up from."""
    with ShardedClient(zk_hosts, zk_auth=zk_auth, timeout=options.timeout, name="vhms-catch-up") as view:
        view.wait_ready(options.timeout)
        if not [address for address in view.shards.get(shard, []) if address != me]:
            return None
        if stop.wait(options.delay):
            return None
        peers = [address for address in view.shards.get(shard, []) if address != me]
    source = pull(
        store,
        peers,
        chunk_bytes=options.chunk_bytes,
        timeout=options.timeout,
        ssl_context=options.ssl_context,
        stop=stop,
    )
    if peers and source is None:
        log.warning("shard %s: no peer of %s answered; serving what this member holds", shard, peers)
    return source
