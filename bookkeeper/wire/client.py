"""A kept-alive framed-Thrift connection: the one client every Artimon hop uses (an
agent polling an endpoint, the Flume Thrift sink, the VHMS client).

The connection opens on the first call and is reused. A failure of the transport (the
peer gone, a timeout, an answer that does not decode or belongs to another call) closes
it, so the next call starts on a fresh socket and never reads a stale answer; an exception
the service declares (``throws``) leaves it open. An idempotent call that fails on a
connection that was already open (the peer may have closed it while it sat idle) is tried
once more on a fresh one.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from thriftpy2.thrift import TException

from bookkeeper.exceptions import EndpointUnavailableError
from bookkeeper.wire.framed import DEFAULT_MAX_FRAME_SIZE, call

__all__ = ["FramedClient"]


class FramedClient:
    """Calls ``service`` at ``host:port``. ``connect_timeout`` bounds the TCP connect,
    ``timeout`` a whole call (request sent and answer read), ``max_frame_size`` the answer."""

    def __init__(
        self,
        host: str,
        port: int,
        service: Any,
        *,
        protocol_factory: Any = None,
        connect_timeout: float = 5.0,
        timeout: float = 30.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.host = host
        self.port = port
        self.service = service
        self.protocol_factory = protocol_factory
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.max_frame_size = max_frame_size
        self._sock: socket.socket | None = None
        self._seqid = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def connect(self) -> bool:
        """Open the connection unless it is open; ``True`` when this opened it.
        ``EndpointUnavailableError`` when the peer cannot be reached."""
        if self._sock is not None:
            return False
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise EndpointUnavailableError(f"connect to {self.address}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        return True

    def call(self, api: str, *args: Any, idempotent: bool = False) -> Any:
        """``api(*args)`` and its result; see the module doc for what a failure does."""
        reused = self._sock is not None
        try:
            return self._call_once(api, args)
        except EndpointUnavailableError:
            if not (idempotent and reused):
                raise
        return self._call_once(api, args)

    def _call_once(self, api: str, args: tuple[Any, ...]) -> Any:
        self.connect()
        assert self._sock is not None  # connect() opened it or raised
        self._seqid = (self._seqid + 1) & 0x7FFFFFFF
        self._sock.settimeout(self.timeout)
        try:
            return call(
                self._sock,
                self.service,
                api,
                *args,
                protocol_factory=self.protocol_factory,
                max_frame_size=self.max_frame_size,
                seqid=self._seqid,
                deadline=time.monotonic() + self.timeout,
            )
        except TException:
            raise  # declared by the service: the answer was read whole, the stream is in step
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> FramedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
