"""The demo applications of ``artimon up --demo`` as a component."""

from __future__ import annotations

from artimon.demo import DemoApps
from artimon.stack.servers import ZooKeeper


class Demo:
    """Three applications serving labeled variables, registered in ZooKeeper."""

    name = "demo"

    def __init__(self, zookeeper: ZooKeeper, host: str) -> None:
        self.zookeeper = zookeeper
        self.host = host
        self.apps: DemoApps | None = None

    def start(self) -> None:
        self.apps = DemoApps(self.zookeeper.hosts, host=self.host)
        self.apps.start()

    def ready_lines(self) -> list[str]:
        count = len(self.apps.bookkeepers) if self.apps else 0
        return [f"[ready] demo apps  {count} contexts serving"]

    def stop(self) -> None:
        if self.apps is not None:
            self.apps.stop()
