"""Read a bookkeeper endpoint into a :class:`~bookkeeper.batch.SampleBatch`."""

from __future__ import annotations

import ssl

from bookkeeper._thrift import endpoint_thrift
from bookkeeper.batch import SampleBatch
from bookkeeper.wire.client import FramedClient
from bookkeeper.wire.frames import DEFAULT_MAX_FRAME_SIZE

__all__ = ["EndpointClient", "read_endpoint"]


class EndpointClient(FramedClient):
    """A connection to one endpoint, reused across reads; reconnects after a failure
    (:class:`~bookkeeper.wire.FramedClient`).

    ``connect_timeout`` bounds the TCP connect (and the TLS handshake), ``timeout`` a whole
    call (send and read of the answer), ``max_frame_size`` the answer's size; with
    ``ssl_context`` (:func:`bookkeeper.wire.client_context`) it speaks TLS and the endpoint's
    certificate must name ``server_hostname`` (default ``host``) if the context checks names.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        connect_timeout: float = 5.0,
        timeout: float = 10.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        super().__init__(
            host,
            port,
            endpoint_thrift.BookkeeperEndpoint,
            connect_timeout=connect_timeout,
            timeout=timeout,
            max_frame_size=max_frame_size,
            ssl_context=ssl_context,
            server_hostname=server_hostname,
        )

    def ping(self) -> int:
        """The endpoint's protocol version."""
        return int(self.call("ping", idempotent=True))

    def snapshot(self) -> SampleBatch:
        """Every variable of the endpoint's context."""
        return SampleBatch.from_thrift(self.call("snapshot", idempotent=True))

    def __enter__(self) -> EndpointClient:
        return self


def read_endpoint(
    host: str, port: int, *, timeout: float = 10.0, ssl_context: ssl.SSLContext | None = None
) -> SampleBatch:
    """One snapshot of the endpoint at ``host:port`` over a fresh connection."""
    with EndpointClient(
        host, port, connect_timeout=timeout, timeout=timeout, ssl_context=ssl_context
    ) as client:
        return client.snapshot()
