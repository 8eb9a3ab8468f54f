"""A kept-alive framed-Thrift connection: the one client every Artimon hop uses (an
agent polling an endpoint, the Flume Thrift sink, the VHMS client).

The connection opens on the first call and is reused. A failure of the transport (the
peer gone, a timeout, an answer that does not decode or belongs to another call) closes
it, so the next call starts on a fresh socket and never reads a stale answer; an exception
the service declares (``throws``) leaves it open. An idempotent call that fails on a
connection that was already open (the peer may have closed it while it sat idle: the
request is written, the answer is an end-of-file or a reset) is tried once more on a fresh
one.

A client carries one call at a time: a second call made while one is under way (from
another thread, say a late poll of an earlier round) is refused at once rather than
written into the same socket, where either call could read the other's answer. Callers
that overlap keep a client each (the artimon source checks one out per endpoint and poll;
VHMS's sharded client keeps a pool per member).

With an ``ssl_context`` (:func:`bookkeeper.wire.client_context`) the connection speaks TLS;
the server's certificate must name ``server_hostname`` (default: ``host``) when the context
checks host names. A failed handshake raises :class:`~bookkeeper.TlsError`.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TException

from bookkeeper.exceptions import EndpointUnavailableError, TlsError, WireError
from bookkeeper.wire.frames import DEFAULT_MAX_FRAME_SIZE, encode_call, exchange
from bookkeeper.wire.tls import handshake

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
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.service = service
        self.protocol_factory = protocol_factory or TCyBinaryProtocolFactory()  # type: ignore[no-untyped-call]
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.max_frame_size = max_frame_size
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname or host
        self._sock: socket.socket | None = None
        self._seqid = 0
        self._busy = threading.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def connect(self) -> bool:
        """Open the connection unless it is open; ``True`` when this opened it.
        ``EndpointUnavailableError`` when the peer cannot be reached in ``connect_timeout``
        (the TLS handshake included), ``TlsError`` when the handshake fails."""
        if self._sock is not None:
            return False
        deadline = time.monotonic() + self.connect_timeout
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise EndpointUnavailableError(f"connect to {self.address}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            sock = self._secure(sock, self.ssl_context, deadline)
        self._sock = sock
        return True

    def _secure(self, sock: socket.socket, context: ssl.SSLContext, deadline: float) -> ssl.SSLSocket:
        wrapped = context.wrap_socket(
            sock, server_hostname=self.server_hostname, do_handshake_on_connect=False
        )
        try:
            handshake(wrapped, deadline)
        except ssl.SSLError as exc:
            wrapped.close()
            raise TlsError(f"TLS handshake with {self.address} failed: {exc}") from None
        except OSError as exc:  # a timeout, a reset: down, overloaded, or not speaking TLS
            wrapped.close()
            raise EndpointUnavailableError(
                f"TLS handshake with {self.address} (does it speak TLS?): {exc or type(exc).__name__}"
            ) from None
        return wrapped

    def call(self, api: str, *args: Any, idempotent: bool = False) -> Any:
        """``api(*args)`` and its result; see the module doc for what a failure does."""
        encode = partial(encode_call, self.protocol_factory, self.service, api, args)
        return self.call_encoded(api, encode, idempotent)

    def call_encoded(self, api: str, encode: Callable[[int], bytes], idempotent: bool = False) -> Any:
        """As :meth:`call`, the request being ``encode(seqid)``: the message calling ``api``
        in this client's protocol, encoded by the caller."""
        if not self._busy.acquire(blocking=False):
            raise WireError(f"{api} to {self.address}: a call is already under way on this client")
        try:
            reused = self._sock is not None
            try:
                return self._call_once(api, encode)
            except EndpointUnavailableError:
                if not (idempotent and reused):
                    raise
            return self._call_once(api, encode)
        finally:
            self._busy.release()

    def _call_once(self, api: str, encode: Callable[[int], bytes]) -> Any:
        self.connect()
        assert self._sock is not None  # connect() opened it or raised
        self._seqid = (self._seqid + 1) & 0x7FFFFFFF
        self._sock.settimeout(self.timeout)
        try:
            return exchange(
                self._sock,
                self.service,
                api,
                encode(self._seqid),
                self.protocol_factory,
                self.max_frame_size,
                self._seqid,
                time.monotonic() + self.timeout,
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
