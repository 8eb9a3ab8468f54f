"""Monitoring: ``GET /metrics`` as Flume serves it (numbers instead of strings) or in the
Prometheus text format, and the agent's counters published through its own Bookkeeper.

JSON shape (``GET /metrics``)::

    {"CHANNEL.c1": {"ChannelSize": 5, "ChannelCapacity": 100, "ChannelFillPercentage": 5.0,
                    "EventPutAttemptCount": 22, ..., "StartTime": 1344882209413, "StopTime": 0},
     "SOURCE.r1": {...}, "SINK.k1": {...}}

``GET /ledger`` is the round ledger (:mod:`collector_agent.ledger`: which rounds are fully
stored, which wait and where); ``POST /ledger`` takes a report of a terminal in another
process (a JSON object of at most ``MAX_REPORT_BYTES``; 400 with the reason if refused, 413
if too large). Its gauges are the ``LEDGER.rounds`` group of ``/metrics``.
``GET /health`` answers ``{"status": "ok", "agent": ...}`` while the agent runs.
``GET /metrics?format=prometheus`` gives ``flume_<counter>{type="CHANNEL",component="c1",
agent="a1"} value`` lines. The self-report keeps ``flume.<counter>{type=..., component=...}``
variables in the bookkeeper of context ``artimon.agent`` (label ``agent``), so an Artimon
agent polling that endpoint monitors the agents themselves.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from bookkeeper import Bookkeeper
from bookkeeper.ground import BackgroundServer, WebConfig
from collector_agent.ledger import RoundLedger

__all__ = ["MonitorServer", "SelfReporter", "prometheus_text"]

log = logging.getLogger(__name__)

Metrics = dict[str, dict[str, float]]
_SNAKE_RE = re.compile(r"(?<!^)(?=[A-Z])")
_GAUGES = {
    "flume_channel_size",
    "flume_channel_capacity",
    "flume_channel_fill_percentage",
    "flume_open_connection_count",
    "flume_unhealthy",
    "flume_start_time",
    "flume_stop_time",
    "flume_rounds_tracked",
    "flume_rounds_incomplete",
    "flume_oldest_incomplete_round_age_seconds",
    "flume_last_round_time",
    "flume_round_interval",
}
MAX_REPORT_BYTES = 8 * 1024 * 1024


def prometheus_text(metrics: Metrics, agent: str) -> str:
    """The Prometheus text exposition of ``metrics``."""
    series: dict[str, list[str]] = {}
    for group, counters in sorted(metrics.items()):
        kind, _, component = group.partition(".")
        for counter, value in sorted(counters.items()):
            name = "flume_" + _SNAKE_RE.sub("_", counter).lower()
            labels = f'type="{kind}",component="{_escape(component)}",agent="{_escape(agent)}"'
            series.setdefault(name, []).append(f"{name}{{{labels}}} {float(value)!r}")
    lines = []
    for name, samples in series.items():
        kind = "gauge" if name in _GAUGES else "counter"
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(samples)
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def create_app(metrics: Callable[[], Metrics], agent: str, ledger: RoundLedger | None = None) -> FastAPI:
    app = FastAPI(title=f"Artimon agent {agent}", docs_url=None, redoc_url=None)
    if ledger is not None:
        _add_ledger_routes(app, ledger, agent)

    @app.get("/metrics", response_model=None)
    def get_metrics(format: str = Query("json", pattern="^(json|prometheus)$")) -> Response:
        values = metrics()
        if format == "prometheus":
            return PlainTextResponse(prometheus_text(values, agent), media_type="text/plain; version=0.0.4")
        return JSONResponse(values)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "agent": agent}

    @app.get("/")
    def index() -> PlainTextResponse:
        return PlainTextResponse(f"Artimon agent {agent}: GET /metrics\n")

    return app


def _add_ledger_routes(app: FastAPI, ledger: RoundLedger, agent: str) -> None:
    @app.get("/ledger")
    def get_ledger() -> dict[str, object]:
        return {"agent": agent, **ledger.view()}

    @app.post("/ledger")
    async def post_ledger(request: Request) -> JSONResponse:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_REPORT_BYTES:
            return JSONResponse({"error": f"a report is at most {MAX_REPORT_BYTES} bytes"}, 413)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REPORT_BYTES:
                return JSONResponse({"error": f"a report is at most {MAX_REPORT_BYTES} bytes"}, 413)
        try:
            recorded = ledger.apply_report(json.loads(body))
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            return JSONResponse({"error": str(exc)[:200]}, 400)
        return JSONResponse({"recorded": recorded})


class MonitorServer(BackgroundServer):
    """The monitoring app served from a daemon thread on ``host:port`` (0 = ephemeral);
    with a ``ledger``, ``/ledger`` too."""

    def __init__(
        self,
        metrics: Callable[[], Metrics],
        agent: str,
        host: str = "127.0.0.1",
        port: int = 41414,
        *,
        web_config: WebConfig | None = None,
        ledger: RoundLedger | None = None,
    ) -> None:
        super().__init__(
            create_app(metrics, agent, ledger),
            host,
            port,
            name="agent-monitor",
            limit_concurrency=32,
            web_config=web_config,
        )


class SelfReporter:
    """Copies the agent's counters into a Bookkeeper every ``every`` seconds."""

    def __init__(
        self,
        metrics: Callable[[], Metrics],
        agent: str,
        bk: Bookkeeper | None = None,
        every: float = 10.0,
    ) -> None:
        self.metrics = metrics
        self.bookkeeper = bk or Bookkeeper("artimon.agent", labels={})
        self.agent = agent
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent-self-report", daemon=True)

    def publish(self) -> None:
        bk = self.bookkeeper
        for group, counters in self.metrics().items():
            kind, _, component = group.partition(".")
            labels = {"type": kind, "component": component, "agent": self.agent}
            for counter, value in counters.items():
                if counter == "ChannelFillPercentage":
                    bk.double(f"flume.{counter}", labels).set(float(value))
                else:
                    bk.integer(f"flume.{counter}", labels).set(int(value))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            try:
                self.publish()
            except Exception:
                log.exception("publishing the agent's counters failed")
            if self._stop.wait(self.every):
                return
