"""``artimon up`` watches itself: its prometheus source scrapes the /metrics of its query API, VHMS
shard and of its agent into VHMS, and the saved dashboard "artimon" answers with data."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from playwright.sync_api import expect, sync_playwright

from query_dsl import Client, Matrix

ARTIMON = [sys.executable, "-m", "artimon"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _api_url(process: subprocess.Popen[str], timeout: float) -> str:
    """The query API's URL, from its ``[ready] query api`` line, once the agent is ready."""
    found: dict[str, str] = {}
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("[ready] query api"):
                found["url"] = line.split()[3].removesuffix("/api/v1/query")
            if line.startswith("[ready] agent"):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout):
        raise AssertionError(f"artimon up did not start its agent within {timeout} s")
    return found["url"]


def screenshot_has_data(page_url: str, panels: int) -> None:
    """The dashboard in headless Chromium (Debian's, driven by Playwright): every panel
    drawn with at least one series; a screenshot in test-artifacts/."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium (.ci/run does it)")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(page_url)
            expect(page.locator(".panel")).to_have_count(panels, timeout=30_000)
            for panel in page.locator(".panel").all():
                expect(panel).to_have_attribute("data-state", "ok", timeout=30_000)
                assert int(panel.get_attribute("data-series") or 0) >= 1, panel.inner_text()[:200]
            page.screenshot(path=ARTIFACTS / "dashboard-artimon.png", full_page=True)
        finally:
            browser.close()


@pytest.mark.slow
def test_up_collects_its_own_metrics_and_the_artimon_dashboard_has_data(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"}
    command = [*ARTIMON, "up", "--data-dir", str(tmp_path / "data"), "--no-spark", "--interval", "1"]
    command += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0"]
    with open(tmp_path / "up.log", "w") as log:
        up = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    try:
        url = _api_url(up, timeout=120)
        with Client(url) as client:

            def last_values(query: str) -> list[float]:
                answer = client.query(query)
                assert isinstance(answer, Matrix)
                return [float(row[~np.isnan(row)][-1]) for row in answer.values if (~np.isnan(row)).any()]

            wait(
                lambda: last_values('fetch("up{job=artimon}", last=5m)') == [1.0, 1.0, 1.0],
                timeout=60,
                what="the query API, VHMS and the agent scraped, all up",
            )
            wait(  # raw_ingest is off (--no-spark): the landing files wait, and the lag shows it
                lambda: (
                    last_values('fetch("artimon_raw_ingest_landing_files", last=5m)')[-1:] >= [1.0]
                    and last_values('fetch("artimon_raw_ingest_lag_seconds", last=5m)')[-1:] > [0.0]
                ),
                timeout=60,
                what="the landing files waiting for Spark, and their age",
            )
            zk = last_values('fetch("~zookeeper_(up|znode_count)", last=5m)')
            assert len(zk) == 2 and 1.0 in zk and max(zk) >= 5, zk  # up, and /zookeeper, /artimon...
            assert last_values('fetch("artimon_alert_rules", last=5m)') == [0.0]  # no rules file
            dashboard = httpx.get(f"{url}/api/v1/dashboards/artimon", timeout=30).json()
            assert dashboard["title"].startswith("Artimon")
            for panel in dashboard["panels"]:  # every panel answers values
                wait(lambda panel=panel: last_values(panel["query"]), timeout=60, what=panel["title"])
        screenshot_has_data(f"{url}/?d=artimon", len(dashboard["panels"]))
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
        if up.stdout is not None:
            up.stdout.close()
