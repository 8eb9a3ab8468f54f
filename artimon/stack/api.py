"""The HTTP query API with its dashboard page, in the stack's process, as a component: it
reads the in-process store, serves the dashboards saved under ``<data-dir>/dashboards``
(the stack's own ``artimon`` dashboard copied there at the first start, the demo's with
``--demo``) and the site's view at ``/status`` (:mod:`artimon.status`), and adds to its
``/metrics`` the alert engine's counters, the landing
backlog and ZooKeeper's gauges. Its queries' limits and memory budget come from
``artimon up``'s ``--query-*`` flags."""

from __future__ import annotations

import shutil
from pathlib import Path

from artimon.stack.metrics import LandingBacklog, ZooKeeperMetrics
from artimon.stack.servers import ZooKeeper
from artimon.stack.vhms import Vhms
from artimon.status import add_status_routes
from bookkeeper.ground import BackgroundServer, WebConfig
from query_dsl import EXAMPLES, Limits, MemoryBudget, create_app
from query_dsl.alerts import AlertEngineMetrics
from vhms import LocalClient

READY_QUERY = 'fetch("http.requests", last=10m) | map(rate, {window}) | reduce(sum, by=[method])'


class QueryApi:
    """See the module doc; ``alert_metrics`` gets its engine from the alerts component."""

    name = "query api"

    def __init__(
        self,
        vhms: Vhms,
        zookeeper: ZooKeeper,
        data: Path,
        *,
        host: str,
        port: int,
        demo: bool,
        limits: Limits | None = None,
        budget: MemoryBudget | None = None,
        web_config: WebConfig | None = None,
    ) -> None:
        self.web_config = web_config
        self.vhms = vhms
        self.limits = limits
        self.budget = budget
        self.zookeeper = zookeeper
        self.data = data
        self.dashboards = data / "dashboards"
        self.host = host
        self.port = port
        self.demo = demo
        self.alert_metrics = AlertEngineMetrics(None)
        self.server: BackgroundServer | None = None

    @property
    def url(self) -> str:
        if self.server is None:
            raise RuntimeError("the query API is not running")
        return self.server.url

    def _copy_dashboards(self) -> None:
        self.dashboards.mkdir(parents=True, exist_ok=True)
        if self.demo and not (self.dashboards / "demo.json").exists():
            shutil.copy(EXAMPLES / "demo.json", self.dashboards / "demo.json")
        if not (self.dashboards / "artimon.json").exists():  # the stack's own panels, from its /metrics
            shutil.copy(EXAMPLES / "artimon.json", self.dashboards / "artimon.json")

    def start(self) -> None:
        self._copy_dashboards()
        zk_host, _, zk_port = self.zookeeper.hosts.split(",")[0].partition("/")[0].rpartition(":")
        own: list[AlertEngineMetrics | LandingBacklog | ZooKeeperMetrics] = [self.alert_metrics]
        own += [LandingBacklog(self.data / "landing"), ZooKeeperMetrics(zk_host, int(zk_port))]
        source = LocalClient(self.vhms.service.store)
        app = create_app(
            source, limits=self.limits, dashboards_dir=self.dashboards, extra_metrics=own, budget=self.budget
        )
        add_status_routes(app, self.zookeeper.hosts)
        self.server = BackgroundServer(
            app, self.host, self.port, name="query-api", web_config=self.web_config
        )
        self.server.start()

    def ready_lines(self) -> list[str]:
        step_s = self.vhms.service.store.resolutions[0].step_s
        window = "1m" if step_s <= 30 else "5m"  # two buckets at least
        page = f"{self.url}/?d=demo" if self.demo else f"{self.url}/"
        return [
            f"[ready] query api  {self.url}/api/v1/query (try: artimon query --url {self.url} "
            f"'{READY_QUERY.format(window=window)}')",
            f"[ready] dashboard  {page} (saved dashboards in {self.dashboards})",
        ]

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
