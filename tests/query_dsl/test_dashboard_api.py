"""The dashboard's HTTP side on a real uvicorn server: the page and its files, saved
dashboards (good, bad and hostile files and names), the PNG render and the bearer token."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from bookkeeper.ground import BackgroundServer
from query_dsl import Limits
from query_dsl.dashboards import EXAMPLES, MAX_FILE_BYTES, MAX_PANELS, DashboardDirectory
from query_dsl.dashboards.figure import draw
from query_dsl.exceptions import DashboardError, DashboardNotFoundError
from query_dsl.http.api import create_app
from query_dsl.matrix import Matrix
from query_dsl.testing import demo_store
from vhms import LocalClient

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE
PANEL = {"title": "Requests", "query": 'fetch("http.requests") | map(rate, 10m) | reduce(sum, by=[status])'}
GOOD = {
    "title": "Web",
    "refresh": 30,
    "range": "30m",
    "panels": [PANEL, {**PANEL, "type": "table", "width": 4}],
}


def write(directory: Path, name: str, document: object) -> None:
    (directory / f"{name}.json").write_text(json.dumps(document))


@pytest.fixture(scope="module")
def dashboards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("dashboards")
    write(directory, "web", GOOD)
    write(directory, "typo", {**GOOD, "panles": []})
    write(directory, "badquery", {**GOOD, "panels": [{"query": 'fetch("x")\n | map(rate 5m)'}]})
    (directory / "notjson.json").write_bytes(b"\xff\xfe{ nope")
    (directory / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (directory / "huge.json").write_text(json.dumps({**GOOD, "title": "x" * MAX_FILE_BYTES}))
    (directory / "bad name.json").write_text(json.dumps(GOOD))
    (directory / ".swap.json").write_text("{")
    (directory / "readme.txt").write_text("not a dashboard")
    return directory


@pytest.fixture(scope="module")
def server(dashboards: Path) -> Iterator[BackgroundServer]:
    app = create_app(LocalClient(demo_store(NOW)), limits=Limits(max_points=5000), dashboards_dir=dashboards)
    srv = BackgroundServer(app)
    srv.start()
    yield srv
    srv.stop()


def test_the_page_and_its_files(server: BackgroundServer) -> None:
    page = httpx.get(f"{server.url}/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert 'src="static/vendor/uPlot.iife.min.js"' in page.text and 'id="query-error"' in page.text
    for path, media_type in [
        ("dashboard.js", "text/javascript"),
        ("dashboard.css", "text/css"),
        ("vendor/uPlot.iife.min.js", "text/javascript"),
        ("vendor/uPlot.min.css", "text/css"),
    ]:
        response = httpx.get(f"{server.url}/static/{path}", timeout=10)
        assert response.status_code == 200 and response.headers["content-type"].startswith(media_type)
    missing = httpx.get(f"{server.url}/static/nope.js", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "no static file 'nope.js'"
    for path in ("../api.py", "..%2F..%2Fapi.py", "vendor/../../api.py", "%00", "vendor", "vendor/"):
        assert httpx.get(f"{server.url}/static/{path}", timeout=10).status_code == 404, path


def test_listing_shows_good_files_and_bad_ones_with_their_error(server: BackgroundServer) -> None:
    listed = {
        d["name"]: d for d in httpx.get(f"{server.url}/api/v1/dashboards", timeout=10).json()["dashboards"]
    }
    assert sorted(listed) == ["bad name", "badquery", "deep", "huge", "notjson", "typo", "web"]
    assert listed["web"] == {"name": "web", "title": "Web", "panels": 2, "error": None}
    assert "panles: Extra inputs are not permitted" in listed["typo"]["error"]
    assert "line 2, column 13" in listed["badquery"]["error"]
    assert "not UTF-8 JSON" in listed["notjson"]["error"] and "not UTF-8 JSON" in listed["deep"]["error"]
    assert "over the 262,144-byte limit" in listed["huge"]["error"]
    assert "is not allowed" in listed["bad name"]["error"]


def test_one_dashboard(server: BackgroundServer) -> None:
    web = httpx.get(f"{server.url}/api/v1/dashboards/web", timeout=10).json()
    assert web == {
        "title": "Web",
        "refresh": 30,
        "range": "30m",
        "panels": [
            {**PANEL, "type": "line", "width": 6},
            {**PANEL, "type": "table", "width": 4},
        ],
    }


@pytest.mark.parametrize(
    ("name", "status", "kind"),
    [
        ("missing", 404, "DashboardNotFoundError"),
        ("typo", 400, "DashboardError"),
        ("huge", 400, "DashboardError"),
        (".swap", 400, "DashboardError"),
        ("x" * 65, 400, "DashboardError"),
        ("%C3%A9t%C3%A9", 400, "DashboardError"),
    ],
)
def test_bad_names_and_files_are_clear_errors(
    server: BackgroundServer, name: str, status: int, kind: str
) -> None:
    response = httpx.get(f"{server.url}/api/v1/dashboards/{name}", timeout=10)
    assert response.status_code == status, response.text
    assert response.json()["error"]["kind"] == kind


def test_no_name_reaches_outside_the_directory(server: BackgroundServer, dashboards: Path) -> None:
    for name in ("..%2Fweb", "..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd"):  # slashes: no such route
        assert httpx.get(f"{server.url}/api/v1/dashboards/{name}", timeout=10).status_code == 404
    nested = DashboardDirectory(dashboards / "inner")
    for name in ("..", "../web", "/etc/passwd", "web/", "web\\x", "web\x00", "web.json/.."):
        with pytest.raises(DashboardError, match="is not allowed"):
            nested.load(name)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_render_png(server: BackgroundServer) -> None:
    params = {
        "q": PANEL["query"],
        "start": NOW - 30 * MINUTE,
        "end": NOW + MINUTE,
        "width": 640,
        "height": 320,
    }
    response = httpx.get(f"{server.url}/api/v1/render", params=params, timeout=30)
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    assert png_size(response.content) == (640, 320)
    default = httpx.get(
        f"{server.url}/api/v1/render", params={"q": 'fetch("rack.temperature.celsius")'}, timeout=30
    )
    assert png_size(default.content) == (800, 400)
    for query in ("6 * 7", 'fetch("no.such.series")'):
        assert httpx.get(f"{server.url}/api/v1/render", params={"q": query}, timeout=30).status_code == 200
    # text the font cannot draw, or that matplotlib would read as mathtext, is drawn anyway
    hostile = {"q": "1", "title": "cost $5 and $\\frac{ \x82 \x00 中文 °C"}
    assert httpx.get(f"{server.url}/api/v1/render", params=hostile, timeout=30).status_code == 200


@pytest.mark.parametrize(
    ("params", "status", "kind"),
    [
        ({"q": 'fetch("x")\n | map(rate 5m)'}, 400, "QuerySyntaxError"),
        ({"q": 'fetch("x", last=2)'}, 400, "QueryTypeError"),
        ({"q": 'fetch("http.requests", last=1w, resolution=60s)'}, 413, "QueryLimitError"),
        (
            {"q": 'fetch("http.requests")', "start": 0, "end": 2**53},
            413,
            "QueryLimitError",
        ),  # the store's limit, as the API
        ({"q": ""}, 422, None),
        ({}, 422, None),
        ({"q": "1", "width": 100_000}, 422, None),
        ({"q": "1", "height": 10}, 422, None),
        ({"q": "1", "width": "wide"}, 422, None),
        ({"q": "1", "title": "t" * 500}, 422, None),
        ({"q": "1", "start": -5}, 422, None),
    ],
)
def test_render_errors(server: BackgroundServer, params: dict, status: int, kind: str | None) -> None:
    response = httpx.get(f"{server.url}/api/v1/render", params=params, timeout=30)
    assert response.status_code == status, response.text
    if kind:
        error = response.json()["error"]
        assert error["kind"] == kind
        if kind == "QuerySyntaxError":
            assert (error["line"], error["column"]) == (2, 13)


def test_render_refuses_more_series_than_it_draws(tmp_path: Path) -> None:
    store = demo_store(NOW)
    store.ingest([f"many{{i={i}}}" for i in range(600)], np.ones(600), np.full(600, NOW))
    srv = BackgroundServer(create_app(LocalClient(store)))
    srv.start()
    try:
        response = httpx.get(f"{srv.url}/api/v1/render", params={"q": 'fetch("many")'}, timeout=30)
        assert response.status_code == 413 and "at most 500 series" in response.json()["error"]["message"]
        weeks = {"q": 'fetch("http.requests", last=3w, resolution=60s)'}  # 12 series x 30,240 minutes
        response = httpx.get(f"{srv.url}/api/v1/render", params=weeks, timeout=30)
        assert response.status_code == 413 and "at most 200,000 points" in response.json()["error"]["message"]
        unset = httpx.get(f"{srv.url}/api/v1/dashboards/web", timeout=10)
        assert unset.status_code == 404 and "--dashboards" in unset.json()["error"]["message"]
        assert httpx.get(f"{srv.url}/api/v1/dashboards", timeout=10).json() == {"dashboards": []}
    finally:
        srv.stop()


def test_the_token_guards_data_not_the_page(dashboards: Path) -> None:
    srv = BackgroundServer(
        create_app(LocalClient(demo_store(NOW)), token="s3cret", dashboards_dir=dashboards)
    )
    srv.start()
    try:
        assert httpx.get(f"{srv.url}/", timeout=10).status_code == 200
        assert httpx.get(f"{srv.url}/static/dashboard.js", timeout=10).status_code == 200
        for path in ("/api/v1/dashboards", "/api/v1/dashboards/web", "/api/v1/render?q=1"):
            assert httpx.get(f"{srv.url}{path}", timeout=10).status_code == 401
            ok = httpx.get(f"{srv.url}{path}", headers={"Authorization": "Bearer s3cret"}, timeout=30)
            assert ok.status_code == 200
    finally:
        srv.stop()


def test_the_shipped_examples_are_valid() -> None:
    summaries = DashboardDirectory(EXAMPLES).summaries()
    assert [(s.name, s.error) for s in summaries] == [("artimon", None), ("demo", None)]


def test_directory_rules(tmp_path: Path) -> None:
    directory = DashboardDirectory(tmp_path / "absent")
    assert directory.summaries() == []
    with pytest.raises(DashboardNotFoundError):
        directory.load("web")
    write(tmp_path, "wide", {**GOOD, "panels": [PANEL] * (MAX_PANELS + 1)})
    write(tmp_path, "narrow", {**GOOD, "panels": [{**PANEL, "width": 13}], "range": "soon", "refresh": -1})
    with pytest.raises(DashboardError, match="at most 48 items"):
        DashboardDirectory(tmp_path).load("wide")
    with pytest.raises(
        DashboardError, match=r"refresh: .*; range: 'soon' is not a duration.*; panels\.0\.width: "
    ):
        DashboardDirectory(tmp_path).load("narrow")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(DashboardError, match="cannot be read"):
        DashboardDirectory(tmp_path).load("dir")


def test_a_lone_point_is_drawn_as_a_marker_on_a_time_axis_of_a_few_steps() -> None:
    minute = 60_000
    at = 1_700_000_000_000
    lone = Matrix(
        ["t", "t"], [{"rack": "r1"}, {"rack": "r2"}], np.array([at]), np.array([[25.0], [26.0]]), minute
    )
    axes = draw(lone, title="lone").axes[0]
    assert all(line.get_marker() == "o" for line in axes.get_lines())
    low, high = axes.get_xlim()  # in days, matplotlib's date unit
    assert 0 < (high - low) * 86_400_000 <= 2.001 * minute
    gappy = Matrix(["t"], [{}], np.arange(4) * minute + at, np.array([[1.0, np.nan, 2.0, 3.0]]), minute)
    assert draw(gappy, title="gap").axes[0].get_lines()[0].get_marker() == "o"  # the 1.0 stands alone
    full = Matrix(["t"], [{}], np.arange(4) * minute + at, np.array([[1.0, 2.0, 2.0, 3.0]]), minute)
    assert draw(full, title="full").axes[0].get_lines()[0].get_marker() in (None, "None", "")
