"""A batch whose samples all fall in one finest bucket (an agent's round) is written along
a row of each chunk (``Store._ingest_finest_bucket``, ``PlainRing.take_row``/``put_row``); it
must store exactly what the general path stores."""

from __future__ import annotations

import numpy as np

from vhms.server import Store
from vhms.server.store import CHUNK

MINUTE = 60_000
RESOLUTIONS = "60s:10,300s:4,900s:4:max"


def _minute(
    rng: np.random.Generator, keys: list[str], base: int, minute: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Samples of one minute: a random subset of the series, some twice, at random ms."""
    picked = rng.choice(len(keys), size=len(keys) // 2 + 200, replace=True)
    values = rng.random(len(picked)) * 100
    return [keys[i] for i in picked], values, base + minute * MINUTE + rng.integers(0, MINUTE, len(picked))


def test_a_batch_of_one_bucket_stores_what_the_general_path_stores() -> None:
    rng = np.random.default_rng(7)
    keys = [f"m{{host=h{i}}}" for i in range(CHUNK + 3000)]  # ids across two chunks
    base = (int(np.datetime64("now", "ms").astype(np.int64)) // (15 * MINUTE) - 2) * 15 * MINUTE
    minutes = [_minute(rng, keys, base, m) for m in range(8)]
    late = _minute(rng, keys, base, 5)
    by_bucket, mixed = Store(RESOLUTIONS), Store(RESOLUTIONS)
    by_bucket.ingest(keys, np.zeros(len(keys)), np.full(len(keys), base))  # the same ids in both
    mixed.ingest(keys, np.zeros(len(keys)), np.full(len(keys), base))
    for batch in [*minutes, late]:
        by_bucket.ingest(*batch)
    for first, second in zip(minutes[::2], minutes[1::2], strict=True):  # two buckets a batch
        mixed.ingest(
            first[0] + second[0], np.concatenate([first[1], second[1]]), np.concatenate([first[2], second[2]])
        )
    again = minutes[7]  # the late batch with a sample stored already (a replay's: no change)
    mixed.ingest(late[0] + again[0][-1:], np.append(late[1], again[1][-1]), np.append(late[2], again[2][-1]))
    end = base + 8 * MINUTE
    for resolution in (60, 300, 900):
        ours = by_bucket.fetch(
            "m", end - 10 * MINUTE, end, resolution=resolution, sample_times=resolution == 60
        )
        theirs = mixed.fetch(
            "m", end - 10 * MINUTE, end, resolution=resolution, sample_times=resolution == 60
        )
        np.testing.assert_array_equal(ours.values, theirs.values)
        if resolution == 60:
            np.testing.assert_array_equal(ours.sample_times, theirs.sample_times)
