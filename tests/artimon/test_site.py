"""The site harness on real namespaces: hosts on a bridge with no way out, partitions,
leftovers of a crashed run removed, and a ZooKeeper ensemble of 3 that elects a new leader
when its leader is killed and takes a partitioned follower back. Root only (namespaces)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from kazoo.retry import KazooRetry
from support import wait_until

from artimon.servers import ZooKeeperEnsemble
from artimon.site import STATE_DIR, Network, Site, clean_leftovers, live_sites
from artimon.site.hosts import ip


def _leftovers(prefix: str) -> list[str]:
    """Namespaces, links and state files of ``prefix`` still on the machine."""
    names = ip("netns", "list").split() + ip("-o", "link", "show").replace("@", " ").split()
    found = [name.rstrip(":") for name in names if name.startswith(prefix)]
    return found + [str(path) for path in STATE_DIR.glob(f"{prefix}.json")]


def _probe(host_namespace: str, address: str, port: int, word: str = "srvr") -> str:
    """A four-letter word sent from inside ``host_namespace`` (a partitioned host still
    reaches itself); its answer, '' if none."""
    script = textwrap.dedent(f"""
        import socket
        try:
            with socket.create_connection(({address!r}, {port}), timeout=1) as s:
                s.sendall({word!r}.encode()); print(s.recv(65536).decode(errors="replace"))
        except OSError:
            pass
    """)
    done = subprocess.run(
        ["ip", "netns", "exec", host_namespace, sys.executable, "-I", "-c", script],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return done.stdout


def _listener(network: Network, host: str) -> subprocess.Popen[str]:
    script = textwrap.dedent(f"""
        import socket
        server = socket.create_server(({network.host(host).address!r}, 9000))
        print("listening", flush=True)
        while True:
            conn, _ = server.accept(); conn.sendall(b"hello"); conn.close()
    """)
    command = network.host(host).command([sys.executable, "-I", "-c", script])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "listening\n"
    return process


@pytest.mark.usefixtures("netns")
def test_hosts_reach_each_other_on_the_bridge_and_nothing_outside() -> None:
    with Network(3) as network:
        prefix = network.prefix
        assert network.bridge == f"{prefix}-br" and len(prefix) == len("art-") + 6
        for host in network.hosts:
            assert ip("-n", host.namespace, "route", "show", "default").strip() == ""
            assert ip("-6", "-n", host.namespace, "route", "show", "default").strip() == ""
            no_route = subprocess.run(
                ["ip", "-n", host.namespace, "route", "get", "192.0.2.1"], capture_output=True, text=True
            )
            assert no_route.returncode != 0 and "unreachable" in no_route.stderr
        listener = _listener(network, "h2")
        try:
            assert _probe(network.host("h1").namespace, "198.18.0.2", 9000, "hi").startswith("hello")
            network.partition("h2")
            assert network.partitioned("h2")
            assert _probe(network.host("h1").namespace, "198.18.0.2", 9000, "hi") == ""
            network.heal("h2")
            wait_until(
                lambda: _probe(network.host("h1").namespace, "198.18.0.2", 9000, "hi").startswith("hello"),
                timeout=20,
                what="h2 reachable again after heal",
            )
        finally:
            listener.kill()
            listener.wait()
            assert listener.stdout is not None
            listener.stdout.close()
    assert _leftovers(prefix) == []


@pytest.mark.usefixtures("netns")
def test_a_crashed_runs_namespaces_bridge_and_processes_are_removed_by_the_next_run() -> None:
    script = textwrap.dedent("""
        import subprocess, sys, time
        from artimon.site import Network
        network = Network(2).start()
        sleeper = subprocess.Popen(network.host("h1").command(["sleep", "600"]))
        print(network.prefix, sleeper.pid, flush=True)
        time.sleep(600)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    prefix, sleeper = owner.stdout.readline().split()
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    owner.stdout.close()
    record = json.loads((STATE_DIR / f"{prefix}.json").read_text())
    assert record["namespaces"] == [f"{prefix}-h1", f"{prefix}-h2"]
    assert f"{prefix}-h1" in _leftovers(prefix) and f"{prefix}-br" in _leftovers(prefix)
    assert Path(f"/proc/{sleeper}").exists()
    with Network(1) as network:  # its start removes what the dead run left
        assert _leftovers(prefix) == []
        wait_until(lambda: not Path(f"/proc/{sleeper}").exists(), timeout=10, what="the sleeper gone")
    assert _leftovers(network.prefix) == []


def _modes(ensemble: ZooKeeperEnsemble) -> dict[str, str]:
    """Each member's mode by its host (member i runs on host h<i>)."""
    return {f"h{i}": member.mode() for i, member in enumerate(ensemble.members, 1)}


@pytest.mark.usefixtures("netns")
@pytest.mark.slow
def test_zookeeper_ensemble_of_three_elects_a_new_leader_and_takes_a_partitioned_follower_back(
    tmp_path: Path,
) -> None:
    with Site(4, tmp_path) as site:
        prefix = site.network.prefix
        ensemble = site.zookeeper_ensemble(["h1", "h2", "h3"])
        pids = [member.pid for member in ensemble.members]
        assert sorted(_modes(ensemble).values()) == ["follower", "follower", "leader"]
        # the client runs in the root namespace, which has 198.18.0.254 on the bridge
        client = KazooClient(hosts=ensemble.hosts, timeout=10.0)
        client.start(timeout=30)
        try:
            client.create("/site/before", b"1", makepath=True)
            old_leader = next(host for host, mode in _modes(ensemble).items() if mode == "leader")
            site.kill(old_leader, "zookeeper")
            survivors = [host for host in ("h1", "h2", "h3") if host != old_leader]
            wait_until(
                lambda: sorted(_modes(ensemble)[host] for host in survivors) == ["follower", "leader"],
                timeout=60,
                what="a new leader among the two left",
            )
            wait_until(lambda: client.connected, timeout=30, what="the client reconnected")
            client.create("/site/after-leader-killed", b"2")
            site.restart(old_leader, "zookeeper", timeout=60)
            assert _modes(ensemble)[old_leader] == "follower"

            follower = next(host for host, mode in _modes(ensemble).items() if mode == "follower")
            inside = site.host(follower).namespace
            site.partition(follower)
            wait_until(
                lambda: "not currently serving" in _probe(inside, site.host(follower).address, 2181),
                timeout=60,
                what=f"the partitioned follower {follower} to leave the quorum",
            )
            # two of three still make a quorum; the client may have been on the partitioned
            # member: it moves to another (a retried create may find its own first attempt)
            KazooRetry(max_tries=-1, delay=0.2, max_delay=2, deadline=60, ignore_expire=False)(
                _create_once, client, "/site/during-partition", b"3"
            )
            site.heal(follower)
            wait_until(
                lambda: _modes(ensemble)[follower] in ("follower", "leader"), timeout=60, what="rejoined"
            )
            assert set(client.get_children("/site")) == {"before", "after-leader-killed", "during-partition"}
        finally:
            client.stop()
            client.close()
    assert _leftovers(prefix) == []
    assert [pid for pid in pids if pid is not None and Path(f"/proc/{pid}").exists()] == []
    assert os.path.exists(tmp_path / "zookeeper" / "zk1" / "data" / "myid")


@pytest.mark.usefixtures("netns")
def test_artimon_site_up_then_down(tmp_path: Path) -> None:
    artimon = [sys.executable, "-m", "artimon", "site"]
    up = subprocess.Popen(
        [*artimon, "up", "--hosts", "2", "--data-dir", str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert up.stdout is not None
    lines = [up.stdout.readline() for _ in range(3)]
    assert lines[0].startswith("h1  198.18.0.1 ") and lines[1].startswith("h2  198.18.0.2 ")
    prefix = lines[2].split()[1]
    assert lines[2] == f"site {prefix} is up. Ctrl-C (or artimon site down) removes it.\n"
    assert f"{prefix}-h2" in _leftovers(prefix)
    down = subprocess.run([*artimon, "down"], capture_output=True, text=True, timeout=90, check=False)
    assert down.returncode == 0, down.stderr
    assert f"site {prefix} of PID {up.pid} stopped." in down.stdout
    assert up.wait(timeout=30) == 0
    assert up.stdout.read() == f"site {prefix} removed.\n"
    up.stdout.close()
    assert _leftovers(prefix) == []


@pytest.mark.usefixtures("netns")
def test_artimon_site_up_refuses_a_topology_on_too_few_hosts(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "artimon", "site", "up", "--hosts", "4", "--topology", "full"]
    done = subprocess.run([*command, "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--topology needs --hosts 8 or more" in done.stderr


def test_state_files_that_are_not_a_sites_record_are_left_alone(tmp_path: Path) -> None:
    """Garbage, a name outside ``art-*`` or an oversized file is not acted on; a record of a
    live owner is a live site, not a leftover."""
    (tmp_path / "art-000001.json").write_text("not json")
    outside = {"prefix": "art-000002", "pid": 2**22 + 1, "pid_started": 1, "bridge": "eth0"}
    (tmp_path / "art-000002.json").write_text(json.dumps({**outside, "namespaces": [], "links": []}))
    (tmp_path / "art-000003.json").write_text(" " * (65 << 10))
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    mine = {"prefix": "art-000004", "pid": os.getpid(), "pid_started": started, "bridge": "art-000004-br"}
    (tmp_path / "art-000004.json").write_text(json.dumps({**mine, "namespaces": [], "links": []}))
    assert clean_leftovers(tmp_path) == []
    assert [record.prefix for record in live_sites(tmp_path)] == ["art-000004"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"art-00000{i}.json" for i in range(1, 5)]


def _create_once(client: KazooClient, path: str, value: bytes) -> None:
    """Create ``path``; found with ``value``, it is a create whose answer was lost."""
    try:
        client.create(path, value)
    except NodeExistsError:
        assert client.get(path)[0] == value
