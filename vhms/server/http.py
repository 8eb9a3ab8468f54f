"""A VHMS member's HTTP port: ``GET /health`` (503 ``catching up`` until it is whole),
``GET /stats`` and ``GET /metrics`` in the Prometheus text format."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse

if TYPE_CHECKING:
    from vhms.server.service import VhmsService

__all__ = ["http_app", "metrics_text"]


def metrics_text(service: VhmsService) -> str:
    """The shard's gauges and counters in the Prometheus text format: ``vhms_series``,
    ``vhms_store_<counter>_total`` (samples stored, refused, too old...), ``vhms_server_<counter>_total``
    (the Thrift server's connections), ``vhms_snapshots_total``; label ``shard``."""
    shard = service.shard.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    lines = [
        "# TYPE vhms_series gauge",
        f'vhms_series{{shard="{shard}"}} {service.store.series}',
        "# TYPE vhms_catching_up gauge",
        f'vhms_catching_up{{shard="{shard}"}} {int(not service.caught_up.is_set())}',
    ]
    counters = [
        *((f"vhms_store_{name}_total", value) for name, value in sorted(dict(service.store.stats).items())),
        *((f"vhms_server_{name}_total", value) for name, value in sorted(dict(service.thrift.stats).items())),
        ("vhms_snapshots_total", service.snapshots),
    ]
    for name, value in counters:
        lines += [f"# TYPE {name} counter", f'{name}{{shard="{shard}"}} {value}']
    return "\n".join(lines) + "\n"


def http_app(service: VhmsService) -> FastAPI:
    app = FastAPI(title=f"VHMS shard {service.shard}", docs_url=None, redoc_url=None)

    @app.get("/health")
    def health() -> JSONResponse:
        """200 ``ok``; 503 ``catching up`` while it pulls from a peer (not ready for reads)."""
        ready = service.caught_up.is_set()
        return JSONResponse(
            {
                "status": "ok" if ready else "catching up",
                "shard": service.shard,
                "series": service.store.series,
            },
            status_code=200 if ready else 503,
        )

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        """The shard watched as any exporter is (Prometheus text): what ``artimon up``'s
        ``prometheus`` source collects into VHMS itself."""
        return PlainTextResponse(metrics_text(service), media_type="text/plain; version=0.0.4")

    @app.get("/stats")
    def stats() -> dict[str, object]:
        store = service.store
        return {
            "shard": service.shard,
            "series": store.series,
            "catching_up": not service.caught_up.is_set(),
            "resolutions": [str(r) for r in store.resolutions],
            "heads_ms": [r.head * r.step_ms if r.head >= 0 else None for r in store.rings],
            "counters": dict(store.stats),
            "server": dict(service.thrift.stats),
            "snapshots": service.snapshots,
            "wal": service.wal_stats(),
        }

    return app
