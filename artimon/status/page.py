"""The view as a page of the dashboard server: ``GET /status`` (HTML, made on the server, no
script; it reloads itself every 10 s) and ``GET /api/v1/status`` (``artimon status
--json``'s object), added to a query API's app by :func:`add_status_routes`, both behind the
API's bearer token when it has one. Each request collects the view afresh (about a second,
in FastAPI's thread pool)."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from artimon.status.model import SiteStatus
from artimon.status.text import render_text

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["add_status_routes", "render_html"]

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
    "pre{font:13px ui-monospace,monospace;background:#f6f6f6;padding:1em;overflow-x:auto}"
    "li.bad{color:#b00020}h1{font-size:1.3em}.ok{color:#0a7a2f}.bad{color:#b00020}"
)


def render_html(status: SiteStatus) -> str:
    """The page: the verdict, what is degraded (one item per finding), then the screen of
    ``artimon status``."""
    if status.healthy:
        verdict = '<p id="verdict" class="ok">healthy: every part answered</p>'
    else:
        items = "".join(
            f'<li class="bad">{escape(f.component)}: {escape(f.why)}</li>' for f in status.degraded
        )
        verdict = f'<p id="verdict" class="bad">degraded</p><ul id="degraded">{items}</ul>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="refresh" content="10"><title>Artimon status</title>'
        f"<style>{_STYLE}</style></head><body><h1>Artimon status</h1>{verdict}"
        f'<pre id="screen">{escape(render_text(status))}</pre>'
        '<p><a href="./">dashboards</a> · <a href="api/v1/status">JSON</a></p></body></html>'
    )


def add_status_routes(app: FastAPI, zk_hosts: str | None, *, timeout: float = 1.0) -> None:
    """Serve the view of the site whose ZooKeeper is ``zk_hosts`` on ``app``."""
    # here, not at the top: an agent imports this package to register, and no query API
    from fastapi import APIRouter, Depends
    from fastapi.responses import HTMLResponse, JSONResponse

    from query_dsl.http import authorize

    router = APIRouter()

    @router.get("/status", include_in_schema=False, dependencies=[Depends(authorize)])
    def page() -> HTMLResponse:
        from artimon.status.collect import collect  # the probes (httpx, the agents' owner rule) on first use

        return HTMLResponse(render_html(collect(zk_hosts, timeout=timeout)), headers=_HEADERS)

    @router.get("/api/v1/status", dependencies=[Depends(authorize)])
    def status() -> JSONResponse:
        """The site's view: ZooKeeper's members and leader, agent groups and who owns which
        endpoint, agents' rounds and lag, VHMS shards and their replicas, services, and what
        is degraded and why (``artimon status --json``)."""
        from artimon.status.collect import collect

        return JSONResponse(collect(zk_hosts, timeout=timeout).to_json())

    app.include_router(router)
