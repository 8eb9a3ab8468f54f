"""The dashboard page in real headless Chromium (Debian's ``chromium``, driven by Playwright;
never Playwright's own browser download) against a real uvicorn serving the query API over
a store filled with the demo's series. Screenshots land in ``test-artifacts/`` at the root.

Waits are Playwright's ``expect`` (polling with a deadline), never sleeps; the page's
Content-Security-Policy forbids ``eval``, so nothing here evaluates script in the page.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from bookkeeper.ground import BackgroundServer
from query_dsl.dashboards import EXAMPLES
from query_dsl.http.api import create_app
from query_dsl.testing import demo_store
from vhms import LocalClient

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TIMEOUT_MS = 30_000  # a loaded 2-core machine: generous, and only spent when something is wrong
expect.set_options(timeout=TIMEOUT_MS)
MINUTE = 60_000
WEB = {
    "title": "Web tier",
    "refresh": 30,
    "range": "30m",
    "panels": [
        {
            "title": "Requests by status",
            "query": 'fetch("http.requests") | map(rate, 10m) | reduce(sum, by=[status])',
        },
        {"title": "Disks", "query": 'fetch("disk.used.bytes")', "type": "table", "width": 6},
        {"title": "Broken", "query": 'fetch("x", last=2)', "width": 12},
    ],
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium (.ci/run does it)")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def serve(tmp_path: Path, token: str | None = None) -> BackgroundServer:
    shutil.copy(EXAMPLES / "demo.json", tmp_path / "demo.json")
    (tmp_path / "web.json").write_text(json.dumps(WEB))
    now = int(time.time() * 1000) // MINUTE * MINUTE  # the page's ranges end at the browser's now
    server = BackgroundServer(create_app(LocalClient(demo_store(now)), token=token, dashboards_dir=tmp_path))
    server.start()
    return server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BackgroundServer]:
    srv = serve(tmp_path)
    yield srv
    srv.stop()


def open_page(browser: Browser, width: int = 1280) -> tuple[Page, list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # the browser logs every 4xx answer as "Failed to load resource": expected ones are asserted on the page
    page.on(
        "console",
        lambda m: (
            m.type == "error" and not m.text.startswith("Failed to load resource") and errors.append(m.text)
        ),
    )
    return page, errors


def test_a_saved_dashboard_then_a_bad_query(browser: Browser, server: BackgroundServer) -> None:
    page, errors = open_page(browser)
    page.goto(f"{server.url}/")
    page.get_by_role("link", name="Web tier", exact=True).click()  # the landing page lists dashboards by name
    expect(page).to_have_url(re.compile(r"\?d=web&range=30m&refresh=30$"))
    expect(page.locator("#title")).to_have_text("Web tier")

    chart, table, broken = page.locator(".panel").all()
    expect(chart).to_have_attribute("data-state", "ok")
    expect(chart).to_have_attribute("data-series", "3")
    expect(chart).to_have_attribute("data-points", "30")
    legend = chart.locator(".u-legend .u-series")
    expect(legend).to_have_count(4)  # the time row, then a row per series
    expect(legend.locator("th")).to_have_text(["Time", "status=200", "status=404", "status=500"])
    expect(legend.nth(0).locator(".u-value")).to_have_text("latest")
    plot = chart.locator(".u-over").bounding_box()
    assert plot is not None
    page.mouse.move(plot["x"] + plot["width"] * 0.5, plot["y"] + plot["height"] * 0.5)
    expect(legend.nth(0).locator(".u-value")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:00$"))
    expect(legend.nth(1).locator(".u-value")).to_have_text(re.compile(r"^\d+(\.\d+)?$"))

    expect(table).to_have_attribute("data-state", "ok")
    expect(table.locator("table.series-table tbody tr")).to_have_count(6)
    expect(broken).to_have_attribute("data-state", "error")
    expect(broken.locator(".panel-error")).to_contain_text("last= takes a duration")
    page.mouse.move(0, 0)
    page.screenshot(path=ARTIFACTS / "dashboard.png", full_page=True)

    page.locator("#range").select_option("15m")
    expect(page).to_have_url(re.compile(r"range=15m"))
    expect(chart).to_have_attribute("data-points", "15")

    page.locator("#query").fill('fetch("http.requests")\n | map(rate 5m)')
    page.locator("#run").click()
    error = page.locator("#query-error")
    expect(error).to_be_visible()
    expect(error).to_have_attribute("data-line", "2")
    expect(error).to_have_attribute("data-column", "13")
    expect(error).to_contain_text("QuerySyntaxError")
    expect(error).to_contain_text("line 2, column 13")
    expect(page.locator("#query")).to_have_class(re.compile("invalid"))
    page.screenshot(path=ARTIFACTS / "dashboard-error.png")

    page.locator("#query").fill('fetch("http.requests") | map(rate, 10m)')
    page.locator("#query").press("Enter")
    expect(error).to_be_hidden()
    expect(page.locator(".panel")).to_have_attribute("data-series", "12")
    page.reload()  # the URL holds the query and the range
    expect(page.locator("#query")).to_have_value('fetch("http.requests") | map(rate, 10m)')
    expect(page.locator("#range")).to_have_value("15m")
    expect(page.locator(".panel")).to_have_attribute("data-series", "12")
    page.locator("#table-toggle").check()
    expect(page.locator(".panel table.series-table tbody tr")).to_have_count(12)
    expect(page.locator(".panel-warning")).to_be_hidden()

    page.locator("#query").fill('fetch("http.requests") | map(rate, 1m)')  # one bucket: no rate
    page.locator("#run").click()
    warning = page.locator(".panel-warning")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("a window of one bucket holds one value, and rate needs two")
    assert errors == []


@pytest.mark.slow  # waits for a 5 s auto-refresh
def test_the_demo_dashboard_draws_every_panel_and_refreshes(
    browser: Browser, server: BackgroundServer
) -> None:
    page, errors = open_page(browser, width=1400)
    page.goto(f"{server.url}/")
    page.locator("#dashboard-select").select_option("demo")
    panels = page.locator(".panel")
    expect(panels).to_have_count(7)
    for panel, series in zip(panels.all(), ["3", "4", "1", "4", "6", "6", "1"], strict=True):
        expect(panel).to_have_attribute("data-state", "ok")
        expect(panel).to_have_attribute("data-series", series)
    free_disk = panels.nth(5)  # a table on 5 of 12 columns: every column inside the panel, none clipped
    expect(free_disk.locator(".table-shared")).to_have_text(
        "context=demo.storage dc=par env=default host=demo-host rack=r2"
    )
    expect(free_disk.locator("table.series-table th")).to_have_text(
        ["server", "volume", "last", "min", "max", "mean"]
    )
    body, mean = free_disk.locator(".body").bounding_box(), free_disk.locator("th").last.bounding_box()
    assert body is not None and mean is not None
    assert mean["x"] + mean["width"] <= body["x"] + body["width"] + 0.5, (mean, body)
    versions = panels.nth(6)  # app.up as a number, app.version as its text
    expect(versions).to_have_attribute("data-strings", "1")
    expect(versions.locator("table.strings-table tbody tr td")).to_contain_text(["app.version", "1.0.0"])
    page.screenshot(path=ARTIFACTS / "demo-dashboard.png", full_page=True)

    updated = page.locator("#updated").inner_text()
    page.locator("#refresh").select_option("5")
    expect(page).to_have_url(re.compile(r"refresh=5"))
    expect(page.locator("#updated")).not_to_have_text(updated)  # the page refreshed by itself
    assert errors == []


def test_a_token_is_asked_for_and_kept(browser: Browser, tmp_path: Path) -> None:
    server = serve(tmp_path, token="s3cret")
    try:
        page, errors = open_page(browser)
        page.goto(f"{server.url}/?d=web")
        expect(page.locator("#notice")).to_contain_text("set the API token")
        page.locator("#token-box summary").click()
        page.locator("#token").fill("s3cret")
        page.locator("#token").press("Enter")
        expect(page.locator(".panel").first).to_have_attribute("data-series", "3")
        page.reload()  # kept in this browser's localStorage
        expect(page.locator(".panel").first).to_have_attribute("data-series", "3")
        assert errors == []
    finally:
        server.stop()
