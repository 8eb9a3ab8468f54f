"""The dashboard's HTTP side, mounted by :func:`query_dsl.http.api.create_app`: the page at ``/``
and its files under ``/static/`` (public: they hold no data), and, behind the API's bearer
token, ``GET /api/v1/dashboards`` (the saved ones, bad files with their error),
``GET /api/v1/dashboards/{name}`` (one, 404 or 400) and ``GET /api/v1/render?q=`` (a PNG).

The page is plain JavaScript (``static/dashboard.js``) over uPlot, vendored under
``static/vendor/``: nothing is fetched from elsewhere at run time, and the page's
Content-Security-Policy says so.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import Response

from query_dsl.dashboards import Dashboard, DashboardSummary, render_png
from query_dsl.evaluator import Evaluator
from query_dsl.exceptions import DashboardError, DashboardNotFoundError, QueryError
from query_dsl.http.context import Api, authorize
from query_dsl.http.errors import error_response, limit_response
from query_dsl.parser import MAX_QUERY_LENGTH
from vhms import VhmsError

__all__ = ["web_router"]

_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
        "connect-src 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _assets(folder: Traversable, prefix: str = "") -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, read once: a request can only name one
    of these, so no path from outside ever reaches the file system."""
    out: dict[str, bytes] = {}
    for entry in folder.iterdir():
        if entry.is_dir():
            out.update(_assets(entry, f"{prefix}{entry.name}/"))
        elif not entry.name.startswith("."):
            out[prefix + entry.name] = entry.read_bytes()
    return out


def _asset_response(content: bytes, name: str) -> Response:
    suffix = name[name.rfind(".") :] if "." in name else ""
    media_type = _MEDIA_TYPES.get(suffix, "text/plain; charset=utf-8")
    return Response(content, media_type=media_type, headers=_HEADERS)


@cache
def _static() -> dict[str, bytes]:
    """The page's files, read on the first request that asks for one."""
    return _assets(files("query_dsl.http").joinpath("static"))


web_router = APIRouter()


@web_router.get("/", include_in_schema=False)
def page() -> Response:
    return _asset_response(_static()["index.html"], "index.html")


@web_router.get("/static/{path:path}", include_in_schema=False)
def static(path: str) -> Response:
    assets = _static()
    if path not in assets:
        raise HTTPException(status_code=404, detail=f"no static file {path[:100]!r}")
    return _asset_response(assets[path], path)


@web_router.get(
    "/api/v1/dashboards",
    dependencies=[Depends(authorize)],
    response_model=dict[str, list[DashboardSummary]],
)
def dashboards(api: Api) -> dict[str, list[DashboardSummary]]:
    return {"dashboards": api.dashboards.summaries() if api.dashboards is not None else []}


@web_router.get(
    "/api/v1/dashboards/{name}",
    dependencies=[Depends(authorize)],
    response_model=Dashboard,
    responses={404: {"description": "no dashboard of that name"}},
)
def dashboard(name: str, api: Api) -> Response | Dashboard:
    if api.dashboards is None:
        unset = DashboardNotFoundError("no dashboards directory is configured (artimon api --dashboards)")
        return error_response(404, unset)
    try:
        return api.dashboards.load(name)
    except DashboardNotFoundError as exc:
        return error_response(404, exc)
    except DashboardError as exc:
        return error_response(400, exc)


@web_router.get(
    "/api/v1/render",
    dependencies=[Depends(authorize)],
    response_class=Response,
    responses={200: {"content": {"image/png": {}}, "description": "the chart"}},
)
def render(
    api: Api,
    q: str = Query(..., min_length=1, max_length=MAX_QUERY_LENGTH, description="a query in the DSL"),
    start: int | None = Query(None, ge=0, le=2**53, description="default range start, epoch ms"),
    end: int | None = Query(None, ge=0, le=2**53, description="default range end, epoch ms (now)"),
    width: int = Query(800, ge=200, le=2000, description="pixels"),
    height: int = Query(400, ge=150, le=1500, description="pixels"),
    title: str | None = Query(None, max_length=200, description="default: the query"),
) -> Response:
    try:
        with api.query_budget() as budget:
            evaluator = Evaluator(api.source, start_ms=start, end_ms=end, limits=api.limits, budget=budget)
            result = evaluator.evaluate(q)
            png = render_png(result, title=q if title is None else title, width=width, height=height)
    except QueryError as exc:
        return limit_response(exc)
    except (VhmsError, ValueError) as exc:
        return error_response(400, exc)
    return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})
