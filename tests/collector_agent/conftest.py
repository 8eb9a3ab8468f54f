"""Fixtures of the agent's tests: reading back what a source's samples became in VHMS."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support import latest_values

from vhms.server import VhmsService


@pytest.fixture
def latest() -> Callable[[VhmsService, str], dict[str, float]]:
    return latest_values
