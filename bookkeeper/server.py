"""The bookkeeper endpoint: a bookkeeper's variables served over framed binary Thrift."""

from __future__ import annotations

import logging
import ssl
import uuid
from typing import TYPE_CHECKING, Any

from bookkeeper._thrift import PROTOCOL_VERSION, endpoint_thrift
from bookkeeper.wire.net import advertised_address
from bookkeeper.wire.thrift_server import FramedThriftServer, ServerLimits
from bookkeeper.zk.acl import ZkAuth
from bookkeeper.zk.layout import EndpointInfo, resolve_zk
from bookkeeper.zk.registration import Registration

if TYPE_CHECKING:
    from bookkeeper._bookkeeper import Bookkeeper

__all__ = ["DEFAULT_ENDPOINT_LIMITS", "DEFAULT_REQUEST_MAX_FRAME_SIZE", "EndpointServer"]

log = logging.getLogger(__name__)

# Requests carry no arguments; anything bigger than this is not a request of ours.
DEFAULT_REQUEST_MAX_FRAME_SIZE = 64 * 1024
DEFAULT_ENDPOINT_LIMITS = ServerLimits(max_frame_size=DEFAULT_REQUEST_MAX_FRAME_SIZE)


class _Handler:
    def __init__(self, bk: Bookkeeper) -> None:
        self._bk = bk

    def ping(self) -> int:
        return PROTOCOL_VERSION

    def snapshot(self) -> Any:
        return self._bk.snapshot().to_thrift()


class EndpointServer:
    """Serves one bookkeeper; optionally registered in ZooKeeper (see :meth:`register`).

    ``limits`` bound what clients may hold (:class:`bookkeeper.wire.ServerLimits`; default
    :data:`DEFAULT_ENDPOINT_LIMITS`: requests of 64 KiB at most); ``ssl_context``
    (:func:`bookkeeper.wire.server_context`) serves TLS only."""

    def __init__(
        self,
        bk: Bookkeeper,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: ServerLimits = DEFAULT_ENDPOINT_LIMITS,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.bookkeeper = bk
        self.uuid = uuid.uuid4().hex
        self._server = FramedThriftServer(
            endpoint_thrift.BookkeeperEndpoint,
            _Handler(bk),
            host,
            port,
            limits=limits,
            ssl_context=ssl_context,
            name=f"bookkeeper[{bk.context}]",
        )
        self.host = self._server.host
        self.port = self._server.port
        self.registration: Registration | None = None

    @property
    def stats(self) -> dict[str, int]:
        """Connection and request counters (``connections``, ``requests``, ``bad_frames``,
        ``evicted_full``... see :mod:`bookkeeper.wire.thrift_server`)."""
        return dict(self._server.stats)

    def start(self) -> None:
        self._server.start()

    def register(
        self,
        zk_hosts: str | None = None,
        *,
        advertise_host: str | None = None,
        session_timeout: float = 10.0,
        zk_auth: ZkAuth | str | None = None,
    ) -> Registration:
        """Register as ephemeral ``/contexts/<context>/<ip>:<port>:<uuid>`` and keep it so;
        ``zk_auth`` (default ``$ARTIMON_ZK_AUTH``...) as :class:`Registration` takes it."""
        connect, layout = resolve_zk(zk_hosts)
        ip = advertise_host or advertised_address(self.host)
        bk = self.bookkeeper
        info = EndpointInfo(ip, self.port, bk.context, self.uuid, dict(bk.framework_labels))
        self.registration = Registration(
            connect,
            layout.endpoint(bk.context, ip, self.port, self.uuid),
            info.to_json(),
            session_timeout=session_timeout,
            auth=zk_auth,
        )
        self.registration.start()
        return self.registration

    def stop(self) -> None:
        if self.registration is not None:
            self.registration.close()
            self.registration = None
        self._server.stop()
