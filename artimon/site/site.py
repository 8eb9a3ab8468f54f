"""A site: a :class:`~artimon.site.hosts.Network` of hosts and the components running on
them, with faults as operations.

``Site(hosts=3, data_dir=...)`` is the network plus a table ``(host, component) ->
launcher``; :meth:`Site.zookeeper_ensemble` puts one ZooKeeper member on each of the hosts
given (component ``zookeeper``, data in ``data_dir/<host>/zookeeper``). Faults:
``partition(host)`` / ``heal(host)`` (its link down / up), ``kill(host, component)`` (``kill
-9``, the data as the crash left it), ``restart(host, component)`` (started again on that
data, awaited until ready). ``stop()`` stops every component, then removes the network.

Lifecycle: NEW --start()--> UP --stop()--> DOWN.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Self

from artimon.servers import ServerProcess, ZooKeeperEnsemble
from artimon.site.hosts import Host, Network
from artimon.site.leftovers import STATE_DIR

__all__ = ["Site"]


class Site:
    """Hosts and their components, with faults (see the module doc)."""

    def __init__(self, hosts: int, data_dir: str | Path, *, state_dir: Path = STATE_DIR) -> None:
        self.network = Network(hosts, state_dir=state_dir)
        self.data_dir = Path(data_dir)
        self.components: dict[tuple[str, str], ServerProcess] = {}
        self.ensembles: list[ZooKeeperEnsemble] = []

    @property
    def hosts(self) -> list[Host]:
        return self.network.hosts

    def host(self, name: str) -> Host:
        return self.network.host(name)

    def start(self) -> Self:
        self.network.start()
        return self

    def zookeeper_ensemble(self, hosts: list[str], timeout: float = 120.0) -> ZooKeeperEnsemble:
        """A ZooKeeper ensemble, one member per host of ``hosts``, started and serving."""
        chosen = [self.host(name) for name in hosts]
        ensemble = ZooKeeperEnsemble(
            self.data_dir / "zookeeper",
            [host.address for host in chosen],
            wrappers=[host.command([]) for host in chosen],
        )
        for host, member in zip(chosen, ensemble.members, strict=True):
            self.components[(host.name, "zookeeper")] = member
        self.ensembles.append(ensemble)
        ensemble.start(timeout)
        return ensemble

    def component(self, host: str, component: str) -> ServerProcess:
        try:
            return self.components[(host, component)]
        except KeyError:
            raise ValueError(f"no component {component!r} on host {host!r}") from None

    def partition(self, host: str) -> None:
        self.network.partition(host)

    def heal(self, host: str) -> None:
        self.network.heal(host)

    def kill(self, host: str, component: str) -> int:
        """``kill -9`` the component; its PID."""
        return self.component(host, component).kill()

    def restart(self, host: str, component: str, timeout: float | None = None) -> ServerProcess:
        """Start the component again on its data, awaited until ready."""
        return self.component(host, component).start(timeout)

    def exited(self) -> list[str]:
        """The components that are not running (killed, or exited on their own)."""
        return [f"{component} on {host}" for (host, component), p in self.components.items() if not p.running]

    def stop(self) -> None:
        """Stop every component, then remove the hosts and the bridge."""
        try:
            for launcher in self.components.values():
                launcher.stop()
        finally:
            self.network.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
