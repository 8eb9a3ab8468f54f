"""A site: a :class:`~artimon.site.hosts.Network` of hosts and the components running on
them, with faults as operations.

``Site(hosts=3, data_dir=...)`` is the network plus the launchers started on it, each process
of them named in a table ``(host, component) -> process``: :meth:`Site.add` takes a
launcher whose processes are placed on the site's hosts (``host=`` a :class:`Host`) and
names them, :meth:`Site.start_together` starts launchers side by side;
:meth:`Site.zookeeper_ensemble` puts one ZooKeeper member on each of the hosts given
(component ``zookeeper``, data in ``data_dir/zookeeper/zk<i>``); the grown-up topology is
:class:`artimon.site.Topology`. Faults: ``partition(host)`` / ``heal(host)`` (its link down
/ up), ``kill(host, component)`` (``kill -9``, the data as the crash left it),
``restart(host, component)`` (started again on that data, awaited until ready). ``stop()``
stops the launchers in the reverse order of their start, then removes the network.

Lifecycle: NEW --start()--> UP --stop()--> DOWN.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from artimon.servers import Launcher, ServerGroup, ServerProcess, ZooKeeperEnsemble
from artimon.site.hosts import Host, Network
from artimon.site.leftovers import STATE_DIR

__all__ = ["Site"]

L = TypeVar("L", bound=Launcher)


class Site:
    """Hosts and their components, with faults (see the module doc)."""

    def __init__(self, hosts: int, data_dir: str | Path, *, state_dir: Path = STATE_DIR) -> None:
        self.network = Network(hosts, state_dir=state_dir)
        self.data_dir = Path(data_dir)
        self.components: dict[tuple[str, str], ServerProcess] = {}
        self.launchers: list[Launcher] = []

    @property
    def hosts(self) -> list[Host]:
        return self.network.hosts

    def host(self, name: str) -> Host:
        return self.network.host(name)

    def start(self) -> Self:
        self.network.start()
        return self

    def add(self, launcher: L, components: Sequence[str]) -> L:
        """Name each process of ``launcher`` (``components``, in the order of its
        ``processes``) on the host it is placed on; the launcher stops with the site."""
        processes: list[ServerProcess] = []
        if isinstance(launcher, ServerGroup):
            processes = launcher.processes
        elif isinstance(launcher, ServerProcess):
            processes = [launcher]
        if len(processes) != len(components):
            raise ValueError(f"{len(components)} names for the {len(processes)} processes of {launcher.name}")
        for process, component in zip(processes, components, strict=True):
            host = next((h for h in self.hosts if h.address == process.placement.address), None)
            if host is None:
                raise ValueError(f"{process.name} is not on a host of site {self.network.prefix}")
            if (host.name, component) in self.components:
                raise ValueError(f"host {host.name} has a component {component!r} already")
            self.components[(host.name, component)] = process
        self.launchers.append(launcher)
        return launcher

    def start_together(self, launchers: Sequence[Launcher], timeout: float | None = None) -> None:
        """Start ``launchers`` side by side (each :meth:`~artimon.servers.Launcher.start`
        with ``timeout``), returning once all are ready; the first error once all are done."""
        with ThreadPoolExecutor(max_workers=max(1, len(launchers)), thread_name_prefix="site-start") as pool:
            starts = [pool.submit(launcher.start, timeout) for launcher in launchers]
        for start in starts:
            start.result()

    def zookeeper_ensemble(self, hosts: list[str], timeout: float = 120.0) -> ZooKeeperEnsemble:
        """A ZooKeeper ensemble, one member per host of ``hosts``, started and serving."""
        ensemble = ZooKeeperEnsemble(self.data_dir / "zookeeper", [self.host(name) for name in hosts])
        return self.add(ensemble, ["zookeeper"] * len(hosts)).start(timeout)

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
        """Stop every launcher, the last started first, then remove the hosts and the bridge."""
        try:
            for launcher in reversed(self.launchers):
                launcher.stop()
        finally:
            self.network.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
