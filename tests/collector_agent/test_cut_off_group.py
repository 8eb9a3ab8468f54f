"""Two polling agents of a group, one of them cut off from ZooKeeper (a relay to the real
server that stops carrying anything, and whose new connections time out, as across a
partition) while both still reach every endpoint: the cut-off agent stops polling before
its session could expire (``collector_agent.sources.cut_off``), the other takes its share
over once it did, and after the heal the first rejoins in a new session and takes its share
back, never an endpoint polled by both for one round."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from artimon.stack import agent_properties
from bookkeeper import Bookkeeper, resolve_zk
from collector_agent import Agent, Event
from collector_agent.sources.cut_off import ensemble_unreachable

INTERVAL = 2  # seconds per round
SESSION = 4  # seconds: the agents' ZooKeeper session timeout
ENDPOINTS = 8


class Relay:
    """A TCP relay from 127.0.0.1 to ``target`` that :meth:`cut` turns into a partition: what
    it carries stops where it is, unclosed, and new connections time out (its accept queue is
    kept full); :meth:`heal` closes what it held and carries new connections again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=1)
        self.listener.settimeout(0.1)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.cut_off = threading.Event()
        self._held: list[socket.socket] = []
        self._fillers: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            with self._accepting:  # no accept once cut: the queue it fills stays full
                inbound = None if self.cut_off.is_set() else self._take()
            if inbound is None:
                time.sleep(0.02)
                continue
            try:
                outbound = socket.create_connection(self.target, timeout=5)
            except OSError:
                inbound.close()
                continue
            with self._lock:
                self._held += [inbound, outbound]
            for source, sink in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _take(self) -> socket.socket | None:
        try:
            return self.listener.accept()[0]
        except OSError:  # timed out (0.1 s), or closed
            return None

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        source.settimeout(0.05)
        while not self._closed and not self.cut_off.is_set():
            try:
                data = source.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if self.cut_off.is_set():
                return  # dropped: the partition began
            if not data:
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            with contextlib.suppress(OSError):
                sink.sendall(data)

    def cut(self) -> None:
        with self._accepting:
            self.cut_off.set()
        for _ in range(8):  # fill the accept queue: the kernel then drops new connections' SYNs
            filler = socket.socket()
            filler.settimeout(0.3)
            try:
                filler.connect(self.listener.getsockname())
            except OSError:
                filler.close()
                break
            self._fillers.append(filler)

    def heal(self) -> None:
        with self._lock:
            held, self._held = self._held, []
        for sock in held + self._fillers:
            sock.close()
        self._fillers = []
        self.cut_off.clear()

    def close(self) -> None:
        self._closed = True
        self.heal()
        self.listener.close()


def _properties(zk: str, agent_id: str) -> str:
    source = {
        "type": "artimon",
        "zk": zk,
        "interval": INTERVAL,
        "agentId": agent_id,
        "group": "cut",
        "sessionTimeout": SESSION,
        "readTimeout": 2,
        "connectTimeout": 1,
        "channels": "ch",
    }
    return agent_properties(
        "g",
        sources={"poll": source},
        channels={"ch": {"type": "memory", "capacity": 100000}, "idle": {"type": "memory"}},
        sinks={"none": {"type": "null", "channel": "idle"}},
    )


Polled = Counter[tuple[str, int, str]]  # (endpoint, round ms, agent) -> events


class Drain:
    """Takes what each agent polled out of its channel ``ch``."""

    def __init__(self, agents: list[Agent]) -> None:
        self.agents = agents
        self.polled: Polled = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            stopping = self._stop.wait(0.05)
            for agent in self.agents:
                channel = agent.channels.get("ch")  # there once the agent started
                if channel is None:
                    continue
                with channel.transaction() as tx:
                    got: list[Event] = tx.take_batch(1000)
                with self._lock:
                    self.polled.update(
                        (
                            e.headers["artimon.endpoint"],
                            int(e.headers["artimon.round"]),
                            e.headers["artimon.agent"],
                        )
                        for e in got
                    )
            if stopping:
                return

    def rounds_of(self, agent: str, since: int) -> dict[int, set[str]]:
        """The rounds from ``since`` on that ``agent`` polled, each with its endpoints."""
        with self._lock:
            keys = list(self.polled)
        rounds: dict[int, set[str]] = {}
        for endpoint, r, who in keys:
            if who == agent and r >= since:
                rounds.setdefault(r, set()).add(endpoint)
        return rounds

    def stop(self) -> Polled:
        self._stop.set()
        self._thread.join()
        return self.polled


@pytest.fixture
def endpoints(zk_hosts: str) -> Iterator[list[str]]:
    """``ENDPOINTS`` applications, each its context, registered in ZooKeeper: their ``ip:port:uuid``."""
    books = [Bookkeeper(f"svc{k}", environ={}) for k in range(ENDPOINTS)]
    servers = []
    try:
        for book in books:
            book.integer("x").set(1)
            servers.append(book.serve(zk_hosts=zk_hosts, session_timeout=30))
        yield [f"{s.host}:{s.port}:{s.uuid}" for s in servers]
    finally:
        for book in books:
            book.close()


def _round_now() -> int:
    step = INTERVAL * 1000
    return int(time.time() * 1000) // step * step


@pytest.mark.slow
def test_an_agent_cut_off_from_zookeeper_never_polls_an_endpoint_its_group_took_over(
    zk_hosts: str, endpoints: list[str], wait: Callable[..., None]
) -> None:
    connect, _ = resolve_zk(zk_hosts)
    host, _, port = connect.partition(",")[0].rpartition(":")
    relay = Relay((host, int(port)))
    chroot = zk_hosts.partition("/")[2]
    cut_one = Agent.from_properties(_properties(f"{relay.address}/{chroot}", "a"), "g", {})
    other = Agent.from_properties(_properties(zk_hosts, "b"), "g", {})
    drain = Drain([cut_one, other])
    step = INTERVAL * 1000
    try:
        cut_one.start()
        other.start()
        shared = _round_now() + 2 * step  # both members by then

        def both_poll() -> bool:
            return any(drain.rounds_of("a", shared)) and any(drain.rounds_of("b", shared))

        wait(both_poll, timeout=60, what="both agents polling their shares")
        relay.cut()
        cut = _round_now()
        assert ensemble_unreachable(relay.address)  # as across a partition: no route, no answer
        wait(
            lambda: any(len(e) == ENDPOINTS for e in drain.rounds_of("b", cut).values()),
            timeout=60,
            what="the other agent polling every endpoint (the cut one's session expired)",
        )
        taken = _round_now()
        time.sleep(2 * INTERVAL)  # the partition lasts two rounds more: a schedule, not a wait
        assert cut_one.metrics()["SOURCE.poll"]["CutOffRoundCount"] > 0
        relay.heal()
        healed = _round_now()
        wait(
            lambda: any(r >= healed + 2 * step for r in drain.rounds_of("a", healed)),
            timeout=60,
            what="the cut agent back in the group, polling its share again",
        )
        back = min(drain.rounds_of("a", healed))
        end = _round_now()  # the round they stop in is not checked: a member leaving is taken over
    finally:
        for agent in (cut_one, other):
            agent.stop()
        everything = drain.stop()
        relay.close()
    polled = {key: n for key, n in everything.items() if key[1] < end}
    agents: dict[tuple[str, int], set[str]] = {}
    for endpoint, r, polling in polled:
        agents.setdefault((endpoint, r), set()).add(polling)
    shares = {
        r: Counter(w for (_, rr), who in agents.items() if rr == r for w in who)
        for r in range(shared, end, step)
    }
    marks = f"cut {cut}, taken {taken}, healed {healed}, back {back}; each agent's share per round {shares}"
    doubled = sorted(key for key, who in agents.items() if len(who) > 1)
    assert doubled == [], f"polled by both agents in one round: {doubled[:10]}; {marks}"
    assert all(n == 1 for n in polled.values()), f"an endpoint polled twice for one round; {marks}"
    assert all(r >= back for r in drain.rounds_of("a", taken)), marks  # nothing while cut off
    for r in [*range(shared, cut, step), *range(back, end, step)]:  # before the cut, after the return
        assert {e for e, rr in agents if rr == r} == set(endpoints), f"round {r} incomplete; {marks}"
