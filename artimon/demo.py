"""Demo applications for ``artimon up --demo``: a web tier, disks and racks whose
variables move like real ones, each in a context of its own, registered in ZooKeeper."""

from __future__ import annotations

import argparse
import random
import signal
import sys
import threading

from bookkeeper import Bookkeeper

__all__ = ["DemoApps", "main"]

_METHODS = {"GET": 0.7, "POST": 0.2, "PUT": 0.07, "DELETE": 0.03}
_STATUSES = {"200": 0.93, "404": 0.04, "500": 0.03}


class DemoApps:
    """Three demo applications updated every ``tick`` seconds from one daemon thread, each
    serving on ``host`` (an ephemeral port) and registered in ZooKeeper from ``start()``,
    every variable set by then."""

    def __init__(
        self, zk_hosts: str | None, *, host: str = "127.0.0.1", tick: float = 1.0, seed: int = 42
    ) -> None:
        self.tick = tick
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self.web = Bookkeeper("demo.web", labels={"dc": "par", "rack": "r1"})
        self.storage = Bookkeeper("demo.storage", labels={"dc": "par", "rack": "r2"})
        self.racks = Bookkeeper("demo.racks", labels={"dc": "par"})
        self.bookkeepers = [self.web, self.storage, self.racks]
        self._zk_hosts = zk_hosts
        self._host = host
        self._requests = {
            (m, s): self.web.integer("http.requests", method=m, status=s) for m in _METHODS for s in _STATUSES
        }
        self._latency = self.web.double("http.latency.ms")
        self._disks = {
            (host, volume): (
                self.storage.integer("disk.size.bytes", server=host, volume=volume),
                self.storage.integer("disk.used.bytes", server=host, volume=volume),
            )
            for host in ("db1", "db2")
            for volume in ("/", "/data", "/logs")
        }
        for size, used in self._disks.values():
            size.set(500 * 2**30)
            used.set(self._random.randrange(50, 300) * 2**30)
        self._temperatures = {
            rack: self.racks.double("rack.temperature.celsius", rack=rack)
            for rack in ("r1", "r2", "r3", "r4")
        }
        self.web.boolean("app.up").set(True)
        self.web.string("app.version").set("1.0.0")
        self._update()  # every gauge has its first value before anyone can read it (no 0 °C)
        self._thread = threading.Thread(target=self._run, name="demo-apps", daemon=True)

    def start(self) -> None:
        for bk in self.bookkeepers:
            bk.serve(self._host, zk_hosts=self._zk_hosts)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for bk in self.bookkeepers:
            bk.close()

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            self._update()

    def _update(self) -> None:
        rnd = self._random
        load = rnd.randint(50, 150)
        for (method, status), counter in self._requests.items():
            counter.add(int(load * _METHODS[method] * _STATUSES[status] + rnd.random()))
        self._latency.set(20 + rnd.expovariate(1 / 15))
        for _, used in self._disks.values():
            used.add(rnd.randrange(0, 2**24))
        for rack, temperature in self._temperatures.items():
            base = 24.0 + int(rack[1:])
            temperature.set(round(base + rnd.gauss(0, 0.5), 2))


def main(argv: list[str] | None = None) -> int:
    """``python -m artimon.demo --zk HOSTS --host ADDRESS``: the demo applications in a process
    of their own (a site's app host runs them so), ``READY`` printed once they serve, until
    SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m artimon.demo", description=main.__doc__)
    parser.add_argument("--zk", required=True, help="the ZooKeeper connect string they register in")
    parser.add_argument("--host", default="127.0.0.1", help="the address they serve on")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    apps = DemoApps(args.zk, host=args.host)
    apps.start()
    print(f"READY {len(apps.bookkeepers)} demo applications on {args.host}", flush=True)
    try:
        stop.wait()
    finally:
        apps.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
