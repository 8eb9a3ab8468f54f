"""Read a bookkeeper endpoint into a :class:`~bookkeeper.batch.SampleBatch`."""

from __future__ import annotations

import socket
import time

from bookkeeper._thrift import endpoint_thrift
from bookkeeper.batch import SampleBatch
from bookkeeper.exceptions import EndpointUnavailableError
from bookkeeper.framed import DEFAULT_MAX_FRAME_SIZE, call

__all__ = ["EndpointClient", "read_endpoint"]


class EndpointClient:
    """A connection to one endpoint, reused across reads; reconnects after a failure.

    ``connect_timeout`` bounds the TCP connect, ``timeout`` a whole call (send and read of
    the answer), ``max_frame_size`` the answer's size.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        connect_timeout: float = 5.0,
        timeout: float = 10.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.max_frame_size = max_frame_size
        self._sock: socket.socket | None = None
        self._seqid = 0

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise EndpointUnavailableError(f"connect to {self.host}:{self.port}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _call(self, api: str) -> object:
        if self._sock is None:
            self._sock = self._connect()
        self._seqid = (self._seqid + 1) & 0x7FFFFFFF
        self._sock.settimeout(self.timeout)
        try:
            return call(
                self._sock,
                endpoint_thrift.BookkeeperEndpoint,
                api,
                max_frame_size=self.max_frame_size,
                seqid=self._seqid,
                deadline=time.monotonic() + self.timeout,
            )
        except BaseException:
            self.close()
            raise

    def ping(self) -> int:
        """The endpoint's protocol version."""
        return int(self._call("ping"))  # type: ignore[call-overload,no-any-return]

    def snapshot(self) -> SampleBatch:
        """Every variable of the endpoint's context."""
        return SampleBatch.from_thrift(self._call("snapshot"))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> EndpointClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_endpoint(host: str, port: int, *, timeout: float = 10.0) -> SampleBatch:
    """One snapshot of the endpoint at ``host:port`` over a fresh connection."""
    with EndpointClient(host, port, connect_timeout=timeout, timeout=timeout) as client:
        return client.snapshot()
