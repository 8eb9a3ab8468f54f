"""Fixtures of the agent's tests: reading back what a source's samples became in VHMS, and a
receiver whose samples land in VHMS and the Parquet history (:mod:`history_stack`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from history_stack import HistoryStack, start_history_stack, stop_history_stack
from support import latest_values

from vhms.server import VhmsService


@pytest.fixture
def latest() -> Callable[[VhmsService, str], dict[str, float]]:
    return latest_values


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HistoryStack]:
    """A receiver into VHMS and landing files for the Parquet history, one per test module."""
    stack = start_history_stack(tmp_path_factory.mktemp("landing"))
    try:
        yield stack
    finally:
        stop_history_stack(stack)
