"""The ``alertmanager`` notifier against a real Alertmanager (Debian's
``prometheus-alertmanager``): a firing alert appears in its ``GET /api/v2/alerts`` with the
rule's labels and rendered annotations; the resolved notification ends it there."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from bookkeeper.testing import AlertmanagerServer
from query_dsl import StoreSource
from query_dsl.alerts import AlertEngine, EvaluatorSource, rules_from_dict
from vhms import Store

ALERTMANAGER = """
route:
  receiver: "null"
  group_wait: 1s
receivers:
  - name: "null"
"""


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertmanagerServer]:
    server = AlertmanagerServer(tmp_path_factory.mktemp("alertmanager"), ALERTMANAGER)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def active_alerts(server: AlertmanagerServer) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = httpx.get(f"{server.url}/api/v2/alerts", timeout=5).json()
    return [a for a in alerts if a["status"]["state"] == "active"]


def test_a_firing_alert_reaches_the_alertmanager_and_its_resolution_ends_it(
    alertmanager: AlertmanagerServer, wait: Callable[..., None]
) -> None:
    store = Store()
    now = int(time.time() * 1000)
    before = now - 60_000  # the resolution must lie in the past for the Alertmanager to end the alert
    store.ingest(["cpu{host=a}", "cpu{host=b}"], np.array([97.0, 12.0]), np.array([before - 1000] * 2))
    config = rules_from_dict(
        {
            "notifiers": {"am": {"type": "alertmanager", "url": alertmanager.url, "retries": 1}},
            "rules": [
                {
                    "name": "HotCpu",
                    "expr": 'fetch("cpu", last=5m)',
                    "condition": "> 90",
                    "labels": {"severity": "page"},
                    "annotations": {"summary": "{{ labels.host }} at {{ value }}%"},
                    "notify": ["am"],
                }
            ],
        }
    )
    with AlertEngine(config, EvaluatorSource(StoreSource(store))) as engine:
        engine.evaluate(before)
        wait(lambda: active_alerts(alertmanager), timeout=20, what="the alert in the Alertmanager")
        (alert,) = active_alerts(alertmanager)
        assert alert["labels"] == {"alertname": "HotCpu", "host": "a", "severity": "page"}
        assert alert["annotations"] == {"summary": "a at 97.0%"}
        assert alert["startsAt"].startswith(time.strftime("%Y-%m-%dT%H:%M", time.gmtime(before / 1000)))

        store.ingest(["cpu{host=a}"], np.array([50.0]), np.array([now - 1000]))
        engine.evaluate(now)
        wait(
            lambda: not active_alerts(alertmanager), timeout=20, what="the alert resolved in the Alertmanager"
        )
        stats = engine.dispatcher.stats()["am"]
        assert (stats.delivered, stats.failed_attempts) == (2, 0)
