"""An agent cut off from ZooKeeper (``collector_agent.sources.cut_off``): when it presumes its
session gone (before ZooKeeper could expire it), when not, and when it polls again. Its
ZooKeeper cut off while its endpoints are not, with another agent of its group, is
tests/collector_agent/test_cut_off_group.py's; its whole host partitioned, the site test's
(tests/artimon/test_site_topology.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooState

from collector_agent.sources.cut_off import SessionState, SessionWatch, ensemble_unreachable


@pytest.fixture
def listening() -> Iterator[str]:
    """A server that accepts connections (as a ZooKeeper server without quorum does)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


UNREACHABLE = "127.0.0.1:not-a-port"  # no server of it can be reached


def _state(watch: SessionWatch) -> SessionState:
    return watch.state  # read again (not narrowed by an earlier assert)


def _refusing() -> str:
    """An address whose host answers and whose port nobody listens on (a server down)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        return f"127.0.0.1:{server.getsockname()[1]}"


def test_a_server_that_answers_or_refuses_is_reachable(listening: str) -> None:
    assert not ensemble_unreachable(listening)
    assert not ensemble_unreachable(f"{_refusing()},{listening}")
    assert not ensemble_unreachable(_refusing())
    assert ensemble_unreachable(UNREACHABLE)


def test_an_ensemble_down_or_without_quorum_keeps_the_membership(listening: str) -> None:
    for connect in (listening, _refusing()):
        watch = SessionWatch(connect, session_timeout=0.05, horizon=0.01)
        watch.on_state(KazooState.CONNECTED)
        watch.on_state(KazooState.SUSPENDED)
        time.sleep(0.1)  # past the session timeout, still cut off
        assert watch.member(answered_at=None, fresh_since=None)  # no session expires while it is down
        assert watch.state is SessionState.MEMBER


def test_cut_off_it_is_presumed_gone_before_its_session_could_expire_until_it_answers_again() -> None:
    watch = SessionWatch(UNREACHABLE, session_timeout=30, horizon=5)
    watch.on_state(KazooState.CONNECTED)
    answered = time.monotonic()
    assert watch.member(answered, None)  # 25 s at least before the session could expire
    assert not watch.member(answered - 25.5, None)  # within 5 s of it: the others may decide without it
    assert watch.state is SessionState.PRESUMED_GONE
    assert not watch.member(answered, None)  # a read answered before the presumption: no news
    assert watch.member(time.monotonic(), None)  # its session answered since: alive all along
    assert not watch.member(answered - 25.5, None)
    watch.on_state(KazooState.SUSPENDED)
    watch.on_state(KazooState.CONNECTED)  # reconnected in the same session
    assert _state(watch) is SessionState.MEMBER


def test_an_expired_session_polls_again_once_a_view_is_read_in_the_new_one() -> None:
    watch = SessionWatch(UNREACHABLE, session_timeout=30, horizon=5)
    watch.on_state(KazooState.CONNECTED)
    before = time.monotonic()
    watch.on_state(KazooState.LOST)  # the ensemble said so on reconnecting
    watch.on_state(KazooState.CONNECTED)  # a new session: the view read before has its old znode
    assert watch.state is SessionState.EXPIRED
    assert not watch.member(time.monotonic(), None)  # the round's read did not answer
    assert not watch.member(time.monotonic(), before)  # a read asked before the expiry
    assert watch.member(time.monotonic(), time.monotonic())
    assert _state(watch) is SessionState.MEMBER
