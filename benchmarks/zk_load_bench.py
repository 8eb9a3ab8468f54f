"""ZooKeeper's load per bookkeeper endpoint and per polling agent, read from its ``mntr``
and ``srvr`` (the figures behind docs/operations.md §8.7, "ZooKeeper ensemble").

One standalone ``artimon zk`` server; ``--endpoints`` registrations made the way a
bookkeeper endpoint makes its own (``bookkeeper.zk.Registration``: a session of its own, an
ephemeral znode, a watch guarding it), then ``--agents`` polling agents' ZooKeeper side made
the way the ``artimon`` source makes it (``collector_agent/sources/artimon.py`` ``start``: a
client, a ``Registration`` under ``/agents/<group>``, a ``Membership`` of the contexts and
one of the agents, refreshed every 5 s). Polling itself touches no znode (the round ledger
is in memory). Each phase's deltas: znodes, ephemerals, watches, connections, write
transactions (the zxid's counter), packets received per second; then endpoints restarted
(writes per restart), and one ``get_children`` of a context of ``--children`` endpoints.

Run: python benchmarks/zk_load_bench.py [--quick] [--endpoints 200] [--agents 3] [--idle 30]
     [--children 100000]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
import uuid

from _report import report

from artimon.servers import ZooKeeperServer, four_letter_word
from bookkeeper.ground import Membership
from bookkeeper.zk import AgentInfo, EndpointInfo, Registration, ZkLayout, make_client

MNTR = (
    "zk_znode_count",
    "zk_ephemerals_count",
    "zk_watch_count",
    "zk_num_alive_connections",
    "zk_approximate_data_size",
)


def sample(zk: ZooKeeperServer) -> dict[str, int]:
    """The ``mntr`` figures above, ``packets`` received and ``writes`` (the zxid's counter)."""
    mntr = four_letter_word(zk.host, zk.port, "mntr", timeout=10)
    figures = dict(line.split("\t", 1) for line in mntr.splitlines() if "\t" in line)
    found = {key: int(figures[key]) for key in MNTR}
    found["packets"] = int(figures["zk_packets_received"])
    zxid = re.search(r"Zxid: 0x([0-9a-f]+)", four_letter_word(zk.host, zk.port, "srvr", timeout=10))
    found["writes"] = int(zxid[1], 16) & 0xFFFFFFFF if zxid else 0  # the low 32 bits count
    return found


def wait_for(done, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not done in {timeout} s")
        time.sleep(0.2)


def phase(name: str, before: dict[str, int], after: dict[str, int], count: int, seconds: float) -> dict:
    row: dict = {"phase": name, "count": count}
    for key in (*MNTR, "writes"):
        row[key.removeprefix("zk_")] = after[key] - before[key]
    row["packets/s"] = round((after["packets"] - before["packets"]) / seconds, 1)
    row["s"] = round(seconds, 2)
    return row


def register(zk: ZooKeeperServer, layout: ZkLayout, port: int) -> Registration:
    """An endpoint's registration, as ``bookkeeper.server`` makes it."""
    info = EndpointInfo("127.0.0.1", port, "app", str(uuid.uuid4()), {"dc": "jb"})
    registration = Registration(
        zk.hosts, layout.endpoint("app", info.host, info.port, info.uuid), info.to_json()
    )
    registration.start()
    return registration


def churn(zk: ZooKeeperServer, layout: ZkLayout, opened: list, count: int, before: dict[str, int]) -> dict:
    """``count`` endpoints stop and as many new ones start (a deployment), the parents there."""
    t0 = time.monotonic()
    for registration in opened[:count]:
        registration.close()
    fresh = [register(zk, layout, 30000 + i) for i in range(count)]
    wait_for(lambda: all(r.registered.is_set() for r in fresh), "new registrations")
    opened[:count] = fresh
    return phase("endpoints restart", before, sample(zk), count, time.monotonic() - t0)


def big_context(zk: ZooKeeperServer, layout: ZkLayout, children: int) -> dict:
    """One context of ``children`` znodes named as endpoints' are: the bytes and the time of one
    ``get_children`` of it, which each polling agent's refresh makes every 5 s."""
    client = make_client(zk.hosts, 30.0)
    client.start()
    try:
        path = layout.context("big")
        client.ensure_path(path)
        names = [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:8080:{uuid.uuid4()}" for i in range(children)]
        before, t0 = sample(zk), time.monotonic()
        for start in range(0, children, 1000):
            for answer in [client.create_async(f"{path}/{n}", b"") for n in names[start : start + 1000]]:
                answer.get(timeout=60)
        created, after = time.monotonic() - t0, sample(zk)
        times = []
        for _ in range(3):
            t0 = time.monotonic()
            read = client.get_children(path)
            times.append(time.monotonic() - t0)
        if len(read) != children:
            raise RuntimeError(f"get_children read {len(read)} of {children} znodes")
        size = sum(4 + len(n.encode()) for n in read)
        return {
            "phase": f"create, get_children of {children:,}",
            "count": children,
            "znode_count": after["zk_znode_count"] - before["zk_znode_count"],
            "approximate_data_size": after["zk_approximate_data_size"] - before["zk_approximate_data_size"],
            "writes": after["writes"] - before["writes"],
            "s": round(created, 2),
            "bytes": size,
            "best s": round(min(times), 3),
        }
    finally:
        client.stop()
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoints", type=int, default=200)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of each idle window")
    parser.add_argument("--children", type=int, default=100_000, help="endpoints in the one big context")
    parser.add_argument("--quick", action="store_true", help="50 endpoints, 10 s windows, 10,000 children")
    args = parser.parse_args()
    if args.quick:
        args.endpoints, args.idle, args.children = 50, 10.0, 10_000
    layout, rows, opened = ZkLayout("/artimon"), [], []
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(tmp).start() as zk:
        start = sample(zk)
        t0 = time.monotonic()
        opened.extend(register(zk, layout, 20000 + i) for i in range(args.endpoints))
        wait_for(lambda: all(r.registered.is_set() for r in opened), "registrations")
        registered = sample(zk)
        rows.append(phase("endpoints register", start, registered, args.endpoints, time.monotonic() - t0))
        time.sleep(args.idle)
        idle = sample(zk)
        rows.append(phase("endpoints idle", registered, idle, args.endpoints, args.idle))
        t0 = time.monotonic()
        watches = []
        for i in range(args.agents):
            client = make_client(zk.hosts, 10.0)
            client.start()
            me = AgentInfo("127.0.0.1", int(time.time() * 1000), f"poll{i}")
            opened.append(Registration(zk.hosts, layout.agent("site", f"agent-{i}"), me.to_json()))
            opened[-1].start()
            for path in (layout.contexts, f"{layout.root}/agents"):
                watches.append(Membership(client, path, refresh=5.0, name=f"agent {i} {path}"))
                watches[-1].start()
            opened.append(client)
        wait_for(lambda: all(w.ready.is_set() for w in watches), "agents' first reads")
        agents = sample(zk)
        rows.append(phase("agents start", idle, agents, args.agents, time.monotonic() - t0))
        time.sleep(args.idle)
        both = sample(zk)
        rows.append(phase("endpoints + agents idle", agents, both, args.agents, args.idle))
        rows.append(churn(zk, layout, opened, args.endpoints // 4, both))
        rows.append(big_context(zk, layout, args.children))
        for watch in watches:
            watch.stop()
        for thing in opened:
            (thing.close if isinstance(thing, Registration) else thing.stop)()
    columns = [
        "phase",
        "count",
        *(k.removeprefix("zk_") for k in MNTR),
        "writes",
        "s",
        "packets/s",
        "bytes",
        "best s",
    ]
    report("zk_load_bench", rows, columns)


if __name__ == "__main__":
    main()
