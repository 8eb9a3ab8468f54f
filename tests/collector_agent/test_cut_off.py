"""An agent cut off from ZooKeeper (``collector_agent.sources.cut_off``): when it presumes its
session expired, and when not. The partition itself (no server reachable: the agent polls
nothing, and no endpoint is polled by two agents in a round) is the site test's
(tests/artimon/test_site_topology.py: an app host partitioned longer than the session)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooState

from collector_agent.sources.cut_off import SessionWatch, ensemble_unreachable


@pytest.fixture
def listening() -> Iterator[str]:
    """A server that accepts connections (as a ZooKeeper server without quorum does)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


def _refusing() -> str:
    """An address whose host answers and whose port nobody listens on (a server down)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        return f"127.0.0.1:{server.getsockname()[1]}"


def test_a_server_that_answers_or_refuses_is_reachable(listening: str) -> None:
    assert not ensemble_unreachable(listening)
    assert not ensemble_unreachable(f"{_refusing()},{listening}")
    assert not ensemble_unreachable(_refusing())
    assert ensemble_unreachable("127.0.0.1:not-a-port")


def test_an_ensemble_down_or_without_quorum_keeps_the_membership(listening: str) -> None:
    for connect in (listening, _refusing()):
        watch = SessionWatch(connect, session_timeout=0.05)
        watch.on_state(KazooState.CONNECTED)
        watch.on_state(KazooState.SUSPENDED)
        time.sleep(0.1)  # past the session timeout, still cut off
        assert watch.gone_before() == 0  # no session expires while the ensemble is down
        watch.on_state(KazooState.CONNECTED)
        assert watch.gone_before() == 0


def test_an_expired_session_leaves_its_old_znodes_behind(listening: str) -> None:
    watch = SessionWatch(listening, session_timeout=30)
    watch.on_state(KazooState.SUSPENDED)
    cut_ms = int(time.time() * 1000)
    assert watch.gone_before() == 0  # within the session timeout: still a member
    watch.on_state(KazooState.LOST)  # the ensemble said so on reconnecting
    watch.on_state(KazooState.CONNECTED)  # a new session: its znode is newer than the cut
    assert cut_ms - 1000 <= watch.gone_before() <= cut_ms + 1000
