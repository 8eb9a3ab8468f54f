"""Hosts of a site as Linux network namespaces on one bridge, on this machine.

``Network(3).start()`` makes a bridge ``art-<6 hex>-br`` and, per host, a namespace
``art-<6 hex>-h<i>`` joined to it by a veth pair (``eth0`` inside, ``art-<6 hex>-h<i>b`` on
the bridge) with the address ``198.18.0.<i>/24``. 198.18.0.0/15 is RFC 2544's benchmarking
range; the harness owns 198.18.0.0/24 and no other address. The bridge has no uplink and no
namespace has a default route (checked at start: :class:`SiteError` otherwise), so nothing a
host sends can leave the machine. The root namespace has ``198.18.0.254`` on the bridge, so
clients and readiness probes of this process reach every host; hence one site per machine
at a time (a second one is refused while the first one's process lives).

A process runs on a host through :meth:`Host.command` (``ip netns exec <namespace> ...``:
``ip`` execs it, so its PID is the program's own) and binds the host's address.
:meth:`Network.partition` sets the host's bridge-side link down (nobody, the root namespace
included, reaches it; its processes keep running), :meth:`Network.heal` sets it up again.

Leftovers: before it makes anything, ``start()`` writes ``/run/artimon-site/<prefix>.json``
(its PID, the PID's start time, its bridge and namespaces); ``stop()`` removes the links,
the namespaces, the bridge and that file. A run that died without ``stop()`` leaves them:
the next ``start()`` removes every site whose recorded process is dead (killing what still
runs in its namespaces), see :mod:`artimon.site.leftovers`.

Lifecycle: NEW --start()--> UP --stop()--> DOWN (a stopped network is not started again).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from artimon.site.leftovers import STATE_DIR, SiteError, SiteRecord, clean_leftovers, live_sites

__all__ = ["MAX_HOSTS", "ROOT_ADDRESS", "SUBNET", "Host", "Network", "ip", "unavailable_reason"]

SUBNET = "198.18.0.0/24"
ROOT_ADDRESS = "198.18.0.254"
MAX_HOSTS = 99  # h1..h99 keeps the bridge-side link name within Linux's 15 characters


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip args`` and return its output; :class:`SiteError` with its message if it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise SiteError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def unavailable_reason() -> str | None:
    """Why this machine cannot host a site (not root, no ``ip netns``), or ``None``."""
    if os.geteuid() != 0:
        return "a site needs root (network namespaces, veth pairs and a bridge)"
    try:
        ip("netns", "list")
    except (OSError, SiteError) as exc:
        return f"`ip netns` is unavailable: {exc}"
    return None


@dataclass(frozen=True)
class Host:
    """One host: ``name`` (``h1``), its ``namespace``, its ``address`` and its bridge-side
    ``link``; a :class:`~artimon.servers.Placement` for the launchers (a port of its own
    for every well-known one)."""

    name: str
    namespace: str
    address: str
    link: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def port_for(self, well_known: int) -> int:
        return well_known


class Network:
    """``hosts`` namespaces on one bridge (see the module doc)."""

    def __init__(self, hosts: int, *, state_dir: Path = STATE_DIR) -> None:
        if not 1 <= hosts <= MAX_HOSTS:
            raise ValueError(f"a site has 1 to {MAX_HOSTS} hosts, not {hosts}")
        self.prefix = f"art-{secrets.token_hex(3)}"
        self.bridge = f"{self.prefix}-br"
        self.hosts = [
            Host(f"h{i}", f"{self.prefix}-h{i}", f"198.18.0.{i}", f"{self.prefix}-h{i}b")
            for i in range(1, hosts + 1)
        ]
        self.state_dir = state_dir
        self._record = SiteRecord.of_this_process(
            state_dir / f"{self.prefix}.json",
            self.bridge,
            [h.namespace for h in self.hosts],
            [h.link for h in self.hosts],
        )
        self.up = False

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise ValueError(f"no host {name!r} in site {self.prefix} (hosts: {[h.name for h in self.hosts]})")

    def start(self) -> Self:
        """Remove dead runs' leftovers, then make the bridge and the hosts; :class:`SiteError`
        if another site is up or a host could route outside."""
        clean_leftovers(self.state_dir)
        others = live_sites(self.state_dir)
        if others:
            raise SiteError(
                f"site {others[0].prefix} of PID {others[0].pid} is up: it owns {SUBNET} on this machine"
            )
        self._record.write()
        self.up = True
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{ROOT_ADDRESS}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            for host in self.hosts:
                self._add_host(host)
            self._check_no_default_route()
        except BaseException:
            self.stop()
            raise
        return self

    def _add_host(self, host: Host) -> None:
        ip("netns", "add", host.namespace)
        ip("link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
        ip("link", "set", host.link, "master", self.bridge, "up")
        ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        ip("-n", host.namespace, "link", "set", "eth0", "up")
        ip("-n", host.namespace, "link", "set", "lo", "up")

    def _check_no_default_route(self) -> None:
        for host in self.hosts:
            for family in ("-4", "-6"):
                routes = ip(family, "-n", host.namespace, "route", "show", "default").strip()
                if routes:
                    raise SiteError(f"host {host.name} has a default route ({routes}): a site has no uplink")

    def partition(self, host: str) -> None:
        """Cut ``host`` off the bridge (its link down); its processes keep running."""
        ip("link", "set", self.host(host).link, "down")

    def heal(self, host: str) -> None:
        """Join ``host`` to the bridge again (its link up), and forget what every host (the
        root namespace too) learnt of its neighbours meanwhile: an address that did not
        resolve while cut off otherwise answers "no route to host" for seconds after."""
        ip("link", "set", self.host(host).link, "up")
        for each in self.hosts:
            ip("-n", each.namespace, "neigh", "flush", "all")
        ip("neigh", "flush", "dev", self.bridge)

    def partitioned(self, host: str) -> bool:
        """Whether ``host``'s bridge-side link is set down."""
        flags = ip("-o", "link", "show", self.host(host).link).split("<", 1)[1].split(">", 1)[0]
        return "UP" not in flags.split(",")

    def stop(self) -> None:
        """Remove the hosts (and whatever still runs in them), the bridge and the state file."""
        if self.up:
            self._record.remove()
            self.up = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
