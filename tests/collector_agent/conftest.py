"""Fixtures of the agent's tests: reading back what a source's samples became in VHMS."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from vhms.service import VhmsService


def latest_values(shard: VhmsService, selector: str) -> dict[str, float]:
    """The last value of each selected series in the shard (the last ten minutes), by key."""
    now = int(time.time() * 1000)
    result = shard.store.fetch(selector, now - 600_000, now + 60_000)
    found = {}
    for key, row in zip(result.keys, result.values, strict=True):
        present = row[~np.isnan(row)]
        if len(present):
            found[key] = float(present[-1])
    return found


@pytest.fixture
def latest() -> Callable[[VhmsService, str], dict[str, float]]:
    return latest_values
