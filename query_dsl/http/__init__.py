"""The query API over HTTP: the DSL's routes (``api.py``: ``create_app`` builds the app),
Prometheus's API under ``/prometheus`` (``prom_api.py``, its parameters in
``prom_params.py``), the dashboard page and its routes (``web.py``, files in ``static/``),
the JSON answer (``answer.py``), the request body limit (``body_limit.py``), the error shape
(``errors.py``), the API's own ``/metrics`` (``self_metrics.py``), what the module-level
routes read from the app (``context.py``), and the Python client of the API (``client.py``).
"""

from __future__ import annotations

from query_dsl.http.answer import encode_answer, strings_answer
from query_dsl.http.api import QueryRequest, create_app, query_router, to_csv
from query_dsl.http.body_limit import MAX_BODY_BYTES, BodyLimitMiddleware
from query_dsl.http.client import Client
from query_dsl.http.context import Api, ApiContext, api_context, authorize
from query_dsl.http.errors import error_response
from query_dsl.http.prom_api import BASE_PATH, prometheus_router
from query_dsl.http.self_metrics import ApiMetrics, Collector, metrics_app
from query_dsl.http.web import web_router

__all__ = [
    "BASE_PATH",
    "MAX_BODY_BYTES",
    "Api",
    "ApiContext",
    "ApiMetrics",
    "BodyLimitMiddleware",
    "Client",
    "Collector",
    "QueryRequest",
    "api_context",
    "authorize",
    "create_app",
    "encode_answer",
    "error_response",
    "metrics_app",
    "prometheus_router",
    "query_router",
    "strings_answer",
    "to_csv",
    "web_router",
]
