"""Artimon's own processes as launchers (``artimon.servers.own``) on this machine's network: a
VHMS shard member, the query API over it and an agent polling an application into it, each
``python -m artimon ...`` on free ports of 127.0.0.1, ready when its ``/health`` answers; the
VHMS member killed (-9) and started again on its data keeps what it had."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from artimon.servers import LOCAL, AgentServer, QueryApiServer, VhmsShard
from artimon.stack import agent_properties
from bookkeeper import Bookkeeper


def _series(url: str) -> list[str]:
    answer = httpx.get(f"{url}/api/v1/series", params={"match": "site.test"}, timeout=30)
    return list(answer.json().get("series", [])) if answer.status_code == 200 else []


def test_an_agent_polls_an_app_into_a_shard_member_read_by_the_api(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    app = Bookkeeper("own-servers")
    app.integer("site.test", k="v").set(42)
    app.serve("127.0.0.1", zk_hosts=zk_hosts)
    properties = tmp_path / "agent.properties"
    properties.write_text(
        agent_properties(
            "a",
            sources={"poll": {"type": "artimon", "zk": zk_hosts, "interval": 1, "channels": "ch"}},
            channels={"ch": {"type": "memory"}},
            sinks={"store": {"type": "vhms", "channel": "ch", "zk": zk_hosts}},
        )
    )
    vhms = VhmsShard(tmp_path / "vhms", "s1", zk_hosts, resolutions="1s:600")
    api = QueryApiServer(tmp_path / "api", zk_hosts)
    agent = AgentServer(tmp_path / "agent", properties, "a")
    try:
        with vhms, api, agent:
            assert vhms.address == api.address == agent.address == LOCAL.address
            assert httpx.get(f"{vhms.http_url}/health", timeout=10).json()["shard"] == "s1"
            assert httpx.get(f"{agent.monitor_url}/health", timeout=10).json()["agent"] == "a"
            wait(lambda: len(_series(api.url)) == 1, 60, "the app's series through agent, VHMS and API")
            agent.stop()  # nothing written while the member is down
            assert vhms.kill() > 0 and not vhms.running
            vhms.start()
            assert httpx.get(f"{vhms.http_url}/health", timeout=10).json()["series"] >= 1
            wait(lambda: len(_series(api.url)) == 1, 60, "the series again after the restart")
        assert not (vhms.running or api.running or agent.running)
    finally:
        app.close()
