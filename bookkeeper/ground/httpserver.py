"""An ASGI app (FastAPI) served by uvicorn from a daemon thread: how the agent's monitoring,
VHMS's health endpoint and the query API run inside a bigger process. A web configuration
file (:mod:`bookkeeper.ground.webconfig`, Prometheus's format) adds TLS, basic
authentication, headers and a rate limit to any of them.

What a request costs the server is kept small, as a dashboard fires many small queries
(docs/promql.md, "Small queries, one at a time"): uvloop's event loop and httptools' parser
(both C; asyncio's loop cost a request about 10 µs more of CPU and 18 µs of latency), no
``X-Forwarded-*`` rewriting (``proxy_headers``: nothing here reads the client's address, and a
client could forge it), no ``server`` header (Prometheus sends none; ``date``,
``content-type`` and ``content-length`` remain, as in Prometheus's answers), no access log
(it is off at the ``warning`` level, but its arguments were still formatted per request),
an answer's head sent with its body (:class:`_HeadWithBody`), and an app that can answer a
small request at once asked to, without the ASGI round (:mod:`bookkeeper.ground.immediate`)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import uvicorn

from bookkeeper.ground.immediate import ImmediateProtocol

if TYPE_CHECKING:  # the web configuration's parts (yaml, bcrypt) load only for a server given one
    from bookkeeper.ground.webconfig import WebConfig

__all__ = ["BackgroundServer"]

Bytes = bytes | bytearray | memoryview


class _HeadWithBody(asyncio.Transport):
    """A connection's transport that sends a write together with the next one made in the
    same turn of the event loop, or alone at the end of that turn. uvicorn writes an answer's
    head and its body apart: two sends, two TCP segments, and a client that may wake for
    the head alone (Go's server and aiohttp send a small answer in one). Order is kept: a held
    write leaves before anything written after it, and before the connection closes."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: Bytes | None = None

    def write(self, data: Bytes) -> None:
        if self._held is None:
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            held, self._held = self._held, None
            self._transport.writelines((held, data))  # one writev on uvloop, no copy

    def _flush(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(held)

    def writelines(self, list_of_data: Iterable[Bytes]) -> None:
        self._flush()
        self._transport.writelines(list_of_data)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + (len(self._held) if self._held is not None else 0)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)


class _Protocol(ImmediateProtocol):
    """uvicorn's httptools protocol (asking an app that answers at once first), on a
    :class:`_HeadWithBody` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_HeadWithBody(transport, self.loop))


class BackgroundServer:
    """``start()`` listens on ``host:port`` (0 = ephemeral; ``port`` then holds the real one),
    behind ``web_config`` when one is given."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str = "http",
        limit_concurrency: int = 64,
        timeout_keep_alive: int = 65,
        web_config: WebConfig | None = None,
    ) -> None:
        # an idle connection is kept longer than the longest scrape interval of the stack
        # (60 s rounds): uvicorn's 5 s met a 5 s scrape interval and closed connections as
        # requests went out on them
        tls = web_config.tls if web_config is not None else None
        if web_config is not None:
            from bookkeeper.ground.webauth import WebConfigMiddleware

            app = WebConfigMiddleware(app, web_config)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            loop="uvloop",
            http=_Protocol,
            proxy_headers=False,
            server_header=False,
            access_log=False,
            timeout_keep_alive=timeout_keep_alive,
            limit_concurrency=limit_concurrency,
            ssl_context_factory=None if tls is None else (lambda _config, _default: tls),
        )
        self.scheme = "http" if tls is None else "https"
        self._server = uvicorn.Server(config)
        self._name = name
        self._thread: threading.Thread | None = None
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        """Listen, then serve from a thread. A port that cannot be had raises ``OSError``
        here, in the caller, with the address in its message (uvicorn would only log it
        from its thread and exit that thread)."""
        try:
            sock = socket.create_server((self.host, self.port), backlog=2048)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
        # asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and
        # create_server's is 0: without this an answer of 1-64 KB waits ~40 ms for the
        # client's delayed ACK (Nagle). Accepted connections inherit it from the listener.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=self._name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:  # uvicorn offers no event to wait on
            if not self._thread.is_alive():
                raise RuntimeError(f"HTTP server could not serve on {self.host}:{self.port}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"HTTP server on {self.host}:{self.port} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
