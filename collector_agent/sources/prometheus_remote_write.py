"""``prometheus_remote_write``: Prometheus remote write 1.0 and 2.0 (``POST /api/v1/write``)
and OTLP/HTTP metrics (``POST /api/v1/otlp/v1/metrics``) on one HTTP listener.

A Prometheus server (or any remote-write client: Grafana Agent, vmagent, OpenTelemetry's
exporter) configured with ``remote_write: [{url: http://<bind>:<port>/api/v1/write}]``
sends snappy-compressed protobuf bodies, a 1.0 ``WriteRequest`` or, with the ``Content-Type``
``application/x-protobuf;proto=io.prometheus.write.v2.Request``, a 2.0 ``Request``; an
OpenTelemetry SDK or Collector posts an ``ExportMetricsServiceRequest`` (protobuf, plain or
gzip) to ``otlpPath``. Each request becomes one event whose body is an Avro sample batch
(``bookkeeper/ground/sample_batch.avsc``) and whose headers are ``artimon.context`` (the
``context`` key) and ``artimon.source`` (this source's name). There is no ``artimon.round``
header: every sample keeps its own time down to the millisecond. Names and labels map as
:mod:`collector_agent.remote_write`, :mod:`collector_agent.remote_write_v2` and
:mod:`collector_agent.otlp` say.

Answers, so that a sender retries what it should and only that (Prometheus retries 5xx and
408 and drops the request on any other 4xx; an OTLP exporter retries 429, 502, 503, 504):

- 204 (remote write), with ``X-Prometheus-Remote-Write-{Samples,Histograms,Exemplars}-Written``;
  200 (OTLP) with an ``ExportMetricsServiceResponse``: the batch is committed in every
  required channel (OTLP's ``partial_success`` counts the points refused one by one);
- 400: the body is not snappy (gzip), not the message, or over ``maxSeries``,
  ``maxSamples``, ``maxElements`` or ``maxDecodedBytes``; or, in remote write, some series
  were refused one by one (the others were committed first, and the text counts the
  refusals by reason and words the first five);
- 408: the body did not arrive within ``readTimeout``;
- 413: the body is over ``maxBodySize``;
- 415: an encoding or a content type that is not one of the above;
- 503: a required channel refused the batch (full);
- 500: anything else went wrong on our side.

Keys: ``bind`` (required, as for the ``thrift`` source), ``port`` (required, 0 =
ephemeral), ``path`` (default ``/api/v1/write``), ``otlpPath`` (default
``/api/v1/otlp/v1/metrics``), ``otlpPromoteResourceAttributes`` (resource attributes made
labels, comma-separated), ``context`` (default ``prometheus``), ``maxBodySize`` (compressed
bytes, default 8 MiB), ``maxDecodedBytes`` (default 32 MiB), ``maxSeries`` (per request,
default 100,000), ``maxSamples`` (per request, default 200,000), ``maxElements`` (a 2.0 or
OTLP parse, default 1,000,000), ``readTimeout`` (s, default 30), ``maxConnections``
(concurrent requests, default 64; more get uvicorn's 503), ``webConfigFile`` (Prometheus's
web configuration file: TLS, ``basic_auth_users``, headers; :mod:`bookkeeper.ground.webconfig`).
A ``bind`` beyond loopback needs credentials: a ``webConfigFile`` with ``basic_auth_users`` or
``client_auth_type: RequireAndVerifyClientCert``; without them the source refuses to start.

Counted besides the source counters (``AppendBatchReceivedCount`` per request,
``EventReceivedCount``/``EventAcceptedCount`` per sample): ``RequestRefusedCount`` (400,
413, 415), ``RemoteWrite1RequestCount``, ``RemoteWrite2RequestCount``, ``OtlpRequestCount``,
``SeriesRefusedCount`` and ``SamplesRefusedCount`` (series refused one by one),
``ReadTimeoutCount``, ``MetadataIgnoredCount``, ``ExemplarsIgnoredCount``; series refused
by reason, ``SeriesRefused<reason>Count`` (:data:`collector_agent.write_body.SERIES_REFUSALS`).

Bodies are decoded on the listener's event loop, one at a time (docs/operations.md §6
states the memory that bounds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from bookkeeper.ground import (
    BackgroundServer,
    WebConfig,
    WebConfigError,
    encode_sample_batch,
    is_loopback,
    load_web_config,
)
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, WriteRequestError
from collector_agent.otlp import decode_otlp_request
from collector_agent.remote_write import decode_write_request
from collector_agent.remote_write_v2 import CONTENT_TYPE, decode_write_request_v2
from collector_agent.sources.base import EventDrivenSource
from collector_agent.write_body import SERIES_REFUSALS, DecodedWrite, WriteLimits, gunzip_body

__all__ = ["RemoteWriteSource"]

log = logging.getLogger(__name__)


# requests by protocol, counted once their Content-Type is accepted
_PROTOCOL_COUNTERS = {
    "prometheus.WriteRequest": "RemoteWrite1RequestCount",
    "io.prometheus.write.v2.Request": "RemoteWrite2RequestCount",
    "otlp": "OtlpRequestCount",
}


class _BodyTooLarge(Exception):
    pass


class RemoteWriteSource(EventDrivenSource):
    counter_names = (
        *EventDrivenSource.counter_names,
        "RequestRefusedCount",
        *_PROTOCOL_COUNTERS.values(),
        "SeriesRefusedCount",
        *(f"SeriesRefused{reason}Count" for reason in SERIES_REFUSALS),
        "SamplesRefusedCount",
        "ReadTimeoutCount",
        "MetadataIgnoredCount",
        "ExemplarsIgnoredCount",
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._server: BackgroundServer | None = None
        self.port = 0

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.bind = context.get_str("bind")
        self.requested_port = context.get_int("port", minimum=0, maximum=65535)
        self.path = context.get_str("path", "/api/v1/write")
        if not self.path.startswith("/"):
            raise context.error("path", f"{self.path!r} does not start with /")
        self.otlp_path = context.get_str("otlpPath", "/api/v1/otlp/v1/metrics")
        if not self.otlp_path.startswith("/") or self.otlp_path == self.path:
            raise context.error("otlpPath", f"{self.otlp_path!r} does not start with / or is the path")
        promoted = context.get_str("otlpPromoteResourceAttributes", "")
        self.otlp_promote = frozenset(key.strip() for key in promoted.split(",") if key.strip())
        self.batch_context = context.get_str("context", "prometheus")
        self.max_body = context.get_int("maxBodySize", 8 * 1024 * 1024, minimum=1024)
        self.limits = WriteLimits(
            max_decoded_bytes=context.get_int("maxDecodedBytes", 32 * 1024 * 1024, minimum=1024),
            max_series=context.get_int("maxSeries", 100_000, minimum=1),
            max_samples=context.get_int("maxSamples", 200_000, minimum=1),
            max_elements=context.get_int("maxElements", 1_000_000, minimum=1),
        )
        self.read_timeout = context.get_float("readTimeout", 30.0, minimum=0.1)
        self.max_connections = context.get_int("maxConnections", 64, minimum=1)
        self.web_config = self._web_config(context)

    def _web_config(self, context: Context) -> WebConfig | None:
        path = context.get_str("webConfigFile", "")
        try:
            web_config = load_web_config(path) if path else None
        except WebConfigError as exc:
            raise context.error("webConfigFile", str(exc)) from None
        if not is_loopback(self.bind) and (web_config is None or not web_config.authenticates):
            raise context.error(
                "bind",
                f"{self.bind} is beyond loopback and a write endpoint there needs credentials: set "
                "webConfigFile to a web configuration file with basic_auth_users or "
                "client_auth_type: RequireAndVerifyClientCert",
            )
        return web_config

    @property
    def url(self) -> str:
        """Where a client sends its requests (``remote_write.url``)."""
        scheme = "http" if self.web_config is None else self.web_config.scheme
        return f"{scheme}://{self.bind}:{self.port}{self.path}"

    def start(self) -> None:
        app = Starlette(
            routes=[
                Route(self.path, self._receive, methods=["POST"]),
                Route(self.otlp_path, self._receive_otlp, methods=["POST"]),
            ]
        )
        self._server = BackgroundServer(
            app,
            self.bind,
            self.requested_port,
            name=f"remote-write[{self.name}]",
            limit_concurrency=self.max_connections,
            web_config=self.web_config,
        )
        self._server.start()
        self.port = self._server.port
        super().start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        super().stop()

    def metrics(self) -> dict[str, float]:
        values = self.counters.snapshot()
        values["OpenConnectionCount"] = 0
        return values

    def _refuse(self, status: int, why: str) -> Response:
        self.counters.add("RequestRefusedCount")
        log.debug("remote-write source %s: %d: %s", self.name, status, why)
        return PlainTextResponse(why + "\n", status_code=status)

    async def _read_body(self, request: Request) -> bytearray:
        # one buffer grown in place (no list of chunks joined into a second copy)
        body = bytearray()
        async for chunk in request.stream():
            if len(body) + len(chunk) > self.max_body:
                raise _BodyTooLarge
            body += chunk
        return body

    async def _body(self, request: Request) -> bytearray | Response:
        """The body read within ``maxBodySize`` and ``readTimeout``, or the answer refusing it."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            return self._refuse(
                413, f"the body declares {int(declared):,} bytes, more than maxBodySize={self.max_body:,}"
            )
        try:
            return await asyncio.wait_for(self._read_body(request), self.read_timeout)
        except _BodyTooLarge:
            return self._refuse(413, f"the body passed maxBodySize={self.max_body:,} bytes")
        except TimeoutError:
            self.counters.add("ReadTimeoutCount")
            return PlainTextResponse(
                f"the body did not arrive within {self.read_timeout} s\n", status_code=408
            )
        except ClientDisconnect:
            return Response(status_code=400)

    async def _receive(self, request: Request) -> Response:
        """Remote write 1.0 or 2.0, as the ``Content-Type``'s ``proto`` parameter says."""
        self.counters.add("AppendBatchReceivedCount")
        encoding = request.headers.get("content-encoding", "snappy").strip().lower()
        if encoding != "snappy":
            return self._refuse(415, f"Content-Encoding {encoding!r}: only snappy is accepted")
        content_type = request.headers.get("content-type", "application/x-protobuf")
        proto = _proto(content_type)
        decoder = _WRITE_DECODERS.get(proto)
        if decoder is None:
            return self._refuse(
                415, f"Content-Type {content_type!r}: remote write 1.0 or {CONTENT_TYPE} is accepted"
            )
        self.counters.add(_PROTOCOL_COUNTERS[proto])
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        decoded = await self._decode_and_commit(partial(decoder, body, self.batch_context, self.limits))
        if isinstance(decoded, Response):
            return decoded
        written = {
            _WRITTEN.format("Samples"): str(len(decoded.batch) - decoded.histogram_rows),
            _WRITTEN.format("Histograms"): str(decoded.histograms),
            _WRITTEN.format("Exemplars"): "0",
        }
        if decoded.refused_series:
            return PlainTextResponse(_refusals(decoded) + "\n", status_code=400, headers=written)
        return Response(status_code=204, headers=written)

    async def _receive_otlp(self, request: Request) -> Response:
        """OTLP/HTTP metrics in protobuf, plain or gzip; answered as OTLP says (200 with an
        ``ExportMetricsServiceResponse`` whose ``partial_success`` counts refused points)."""
        self.counters.add("AppendBatchReceivedCount")
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            return self._refuse(415, f"Content-Encoding {encoding!r}: gzip or none is accepted")
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/x-protobuf":
            return self._refuse(
                415, f"Content-Type {content_type!r}: only application/x-protobuf is accepted"
            )
        self.counters.add(_PROTOCOL_COUNTERS["otlp"])
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        decoded = await self._decode_and_commit(partial(self._decode_otlp, body, encoding == "gzip"))
        if isinstance(decoded, Response):
            return decoded
        answer = ExportMetricsServiceResponse()
        if decoded.refused_series:
            answer.partial_success.rejected_data_points = decoded.refused_samples
            answer.partial_success.error_message = _refusals(decoded)
        return Response(answer.SerializeToString(), status_code=200, media_type="application/x-protobuf")

    def _decode_otlp(self, body: bytearray, gzipped: bool) -> DecodedWrite:
        data = gunzip_body(body, self.limits) if gzipped else body
        if len(data) > self.limits.max_decoded_bytes:
            raise WriteRequestError(f"the body is over maxDecodedBytes={self.limits.max_decoded_bytes:,}")
        return decode_otlp_request(data, self.batch_context, self.limits, self.otlp_promote)

    async def _decode_and_commit(self, decode: Callable[[], DecodedWrite]) -> DecodedWrite | Response:
        """The decoded request once committed, or the answer refusing it (400) or asking the
        sender to retry; decoded here, on the event loop, one request at a time."""
        try:
            decoded = decode()
        except WriteRequestError as exc:
            self.counters.add("EventReadFail")
            return self._refuse(400, str(exc))
        failed = await run_in_threadpool(self._commit, decoded)
        return decoded if failed is None else failed

    def _commit(self, decoded: DecodedWrite) -> Response | None:
        """Put the batch into the channels (blocking: a channel may wait for room); ``None``
        once committed, else the answer that asks the sender to retry."""
        counters = self.counters
        batch = decoded.batch
        counters.add("EventReceivedCount", len(batch))
        counters.add("MetadataIgnoredCount", decoded.metadata)
        counters.add("ExemplarsIgnoredCount", decoded.exemplars)
        if len(batch):
            event = Event(
                {"artimon.context": self.batch_context, "artimon.source": self.name},
                encode_sample_batch(batch),
            )
            try:
                self.channel_processor.process_batch([event])
            except ChannelException as exc:
                counters.add("ChannelWriteFail")
                return PlainTextResponse(
                    f"the channel refused the samples, retry later: {exc}\n", status_code=503
                )
            except Exception:
                counters.add("GenericProcessingFail")
                log.exception("remote-write source %s: processing failed", self.name)
                return PlainTextResponse("processing failed, retry later\n", status_code=500)
            counters.add("EventAcceptedCount", len(batch))
        counters.add("AppendBatchAcceptedCount")
        if decoded.refused_series:
            counters.add("SeriesRefusedCount", decoded.refused_series)
            for reason, count in decoded.refused.items():
                counters.add(f"SeriesRefused{reason}Count", count)
            counters.add("SamplesRefusedCount", decoded.refused_samples)
        return None


def _refusals(decoded: DecodedWrite) -> str:
    refused = decoded.refused_series
    more = refused - len(decoded.examples)
    by_reason = ", ".join(f"{reason} {count}" for reason, count in decoded.refused.most_common())
    return (
        f"{refused} series refused ({decoded.refused_samples} samples; {by_reason}), the other "
        f"{len(decoded.batch)} samples stored: {'; '.join(decoded.examples)}"
        + (f"; and {more} more" if more > 0 else "")
    )


def _proto(content_type: str) -> str:
    """The ``proto`` parameter of an ``application/x-protobuf`` type (1.0's when absent), or
    ``""`` for another type."""
    media, *parameters = (part.strip() for part in content_type.split(";"))
    if media.lower() != "application/x-protobuf":
        return ""
    for parameter in parameters:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "proto":
            return value.strip().strip('"')
    return "prometheus.WriteRequest"


_WRITTEN = "X-Prometheus-Remote-Write-{}-Written"
_WRITE_DECODERS: dict[str, Callable[[bytearray, str, WriteLimits], DecodedWrite]] = {
    "prometheus.WriteRequest": decode_write_request,
    "io.prometheus.write.v2.Request": decode_write_request_v2,
}
