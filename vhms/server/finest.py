"""The finest ring: its newest buckets plain (what ingest writes), its closed ones sealed a
block at a time with their sample times (:mod:`vhms.server.sealed`).

A finest bucket is **closed** once it is ``horizon`` buckets behind the head: the late-sample
horizon, past which ingest rarely writes (a round's batch writes the head; a retried batch,
a write-ahead log replay and a replica's catch-up may write any bucket of the retention: they
still can, into a closed block of a chunk, decoded to take writes and encoded again later).
The default horizon, 10 minutes, is past what ordinary writers lag by (the agents' sinks
retry a failed batch within seconds: the runner's backoff, ``maxBackoffSleep`` 5 s;
recording rules write at their evaluation's time) and keeps what dashboards ask most
(``rate[5m]``, ``increase[10m]``, the lookback) in plain rows: a closed block's read costs
a decode. A shard down for longer, or a Kafka consumer behind, writes into closed blocks,
counted (``finest_sealed_cells_written``). The plain part is a ring of ``horizon + K + 2``
slots and more (a whole number of blocks).

Each cell keeps the later of the samples written to it (at a tie, the one written last), and
its time as an offset from the bucket's start (:mod:`vhms.server.rings`).
"""

from __future__ import annotations

import numpy as np

from vhms.resolutions import Resolution
from vhms.server.decoded import DecodedBlocks
from vhms.server.open_blocks import offsets_of
from vhms.server.rings import MASK, SHIFT, chunks_of
from vhms.server.sealed import MAX_BLOCK, SealedRing

__all__ = ["DEFAULT_HORIZON_MS", "FinestRing"]

DEFAULT_HORIZON_MS = 10 * 60_000
# a block spans this at least (and MAX_BLOCK buckets): a fine step's read of an hour crosses a
# few blocks, not dozens (each a few numpy calls)
BLOCK_MS = 10 * 60_000


class FinestRing(SealedRing):
    """The finest resolution's buckets and sample times (see the module doc); buckets more
    than ``horizon_ms`` behind the head are sealed (at least two buckets; a horizon of the
    whole retention or more: none, the ring all plain)."""

    def __init__(
        self, resolution: Resolution, cache: DecodedBlocks, horizon_ms: int = DEFAULT_HORIZON_MS
    ) -> None:
        self.horizon = min(max(2, -(-horizon_ms // resolution.step_ms)), resolution.slots)
        block = max(1, min(resolution.slots // 4, max(MAX_BLOCK, -(-BLOCK_MS // resolution.step_ms))))
        super().__init__(
            resolution, self.horizon + block + 2, block, cache, timed=True, name="finest", spread=True
        )

    def closed(self, newest: int) -> int:
        return newest - self.horizon

    def cells(self, buckets: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The stored bits and sample times of ``(buckets[i], ids[i])`` (1-d, buckets held)."""
        bits = np.zeros(len(ids), dtype=np.uint64)
        offsets: np.ndarray = np.zeros(len(ids), dtype=self.time_dtype)
        sealed = self.is_sealed(buckets)
        plain = ~sealed
        if plain.any():
            slots, chunk_of = buckets[plain] % self.plain.slots, ids[plain] >> SHIFT
            assert self.plain.times is not None
            count = int(plain.sum())
            got_bits = np.zeros(count, np.uint64)
            got_offsets: np.ndarray = np.zeros(count, self.time_dtype)
            for chunk in chunks_of(chunk_of):
                where = chunk_of == chunk
                local = ids[plain][where] & MASK
                got_bits[where] = self.plain.values[chunk][slots[where], local]
                got_offsets[where] = self.plain.times[chunk][slots[where], local]
            bits[plain], offsets[plain] = got_bits, got_offsets
        for number, chunk, where in self.groups(buckets, ids, sealed):
            local, rows = ids[where] & MASK, buckets[where] - number * self.block
            sources = [(self.stored(number, chunk), bits), (self.stored(number, chunk, True), offsets)]
            for source, out in sources:
                if isinstance(source, np.ndarray):
                    out[where] = source[rows, local]
                elif source is not None:
                    unique, inverse = np.unique(local, return_inverse=True)
                    got = source.decode(unique)[rows, inverse]
                    out[where] = got if out is bits else offsets_of(got, self.time_dtype)
        return bits, offsets

    def overwrite(
        self, buckets: np.ndarray, ids: np.ndarray, stored: np.ndarray, offsets: np.ndarray
    ) -> None:
        """Write stored bits and sample times at ``(buckets[i], ids[i])`` (1-d, buckets held;
        of cells written twice the last stays); a sealed block of a chunk is decoded to take
        them (:meth:`vhms.server.open_blocks.OpenBlocks.opened`)."""
        sealed = self.is_sealed(buckets)
        plain = ~sealed
        if plain.any():
            slots, chunk_of = buckets[plain] % self.plain.slots, ids[plain] >> SHIFT
            assert self.plain.times is not None
            for chunk in chunks_of(chunk_of):
                where = chunk_of == chunk
                local, at = ids[plain][where] & MASK, slots[where]
                self.plain.values[chunk][at, local] = stored[plain][where]
                timed = offsets[plain][where] != 0
                if timed.any():
                    self.plain.times[chunk][at[timed], local[timed]] = offsets[plain][where][timed]
                self.plain.written[chunk][at] = True
        for number, chunk, where in self.groups(buckets, ids, sealed):
            rows = buckets[where] - number * self.block
            values, times = self.open.opened((number, chunk), rows)
            assert times is not None  # the finest ring's blocks have times
            values[rows, ids[where] & MASK] = stored[where]
            times[rows, ids[where] & MASK] = offsets[where]

    def put_samples(
        self, buckets: np.ndarray, ids: np.ndarray, stored: np.ndarray, offsets: np.ndarray
    ) -> None:
        """Write samples (in time order, buckets held) where they are not older than what the
        cell holds: of two samples of a bucket the later stays (the one that came last, at a
        tie). An empty cell's time is 0, the earliest a sample can have."""
        newer = offsets >= self.cells(buckets, ids)[1]
        if newer.any():
            self.overwrite(buckets[newer], ids[newer], stored[newer], offsets[newer])
