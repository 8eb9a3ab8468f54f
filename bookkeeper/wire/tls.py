"""Optional TLS on the Thrift hops, with the standard library's :mod:`ssl` and PEM files.

A server needs its certificate chain and key; given a client CA it also requires a client
certificate signed by it (mutual TLS). A client trusts the given CA file (else the system's
CAs), may present a certificate of its own, and checks that the server's certificate names
the host it dialled (an IP address must then be among the certificate's IP SANs) unless
``check_hostname`` is false. Both sides speak TLS 1.2 or newer.

The handshake runs on a non-blocking socket against one deadline (:func:`handshake`): a
socket timeout bounds each read, so a peer that trickles a handshake one byte at a time
would otherwise hold a server thread for as long as it likes.
"""

from __future__ import annotations

import os
import select
import ssl
import time

from bookkeeper.exceptions import TlsConfigError

__all__ = ["client_context", "handshake", "server_context"]

PathLike = str | os.PathLike[str]


def _load_chain(
    context: ssl.SSLContext, certfile: PathLike, keyfile: PathLike | None, password: str | None
) -> None:
    try:
        context.load_cert_chain(certfile, keyfile, password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"certificate {certfile} (key {keyfile or certfile}) does not load: {exc}"
        ) from None


def _load_ca(context: ssl.SSLContext, cafile: PathLike) -> None:
    try:
        context.load_verify_locations(cafile)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"CA file {cafile} does not load: {exc}") from None


def server_context(
    certfile: PathLike,
    keyfile: PathLike | None = None,
    *,
    password: str | None = None,
    client_ca: PathLike | None = None,
) -> ssl.SSLContext:
    """A server's context: ``certfile`` holds the certificate chain (and the key unless
    ``keyfile`` is given); with ``client_ca``, clients must present a certificate it signed.
    ``TlsConfigError`` names a file that does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, certfile, keyfile, password)
    if client_ca is not None:
        _load_ca(context, client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(
    cafile: PathLike | None = None,
    *,
    certfile: PathLike | None = None,
    keyfile: PathLike | None = None,
    password: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client's context: servers must present a certificate signed by ``cafile`` (else by
    one of the system's CAs); ``certfile`` (and ``keyfile``) is the client's own, for a
    server that asks for one. ``TlsConfigError`` names a file that does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    if cafile is not None:
        _load_ca(context, cafile)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if certfile is not None:
        _load_chain(context, certfile, keyfile, password)
    return context


def handshake(sock: ssl.SSLSocket, deadline: float) -> None:
    """Complete the TLS handshake of ``sock`` by the ``time.monotonic()`` ``deadline``
    (``TimeoutError`` past it; ``ssl.SSLError`` when it fails). The socket is left blocking
    again, its timeout unset."""
    sock.setblocking(False)
    poller = select.poll()  # not select.select: a busy server's descriptors pass FD_SETSIZE
    try:
        while True:
            try:
                sock.do_handshake()
                return
            except ssl.SSLWantReadError:
                events = select.POLLIN
            except ssl.SSLWantWriteError:
                events = select.POLLOUT
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("TLS handshake did not finish in time")
            poller.register(sock, events)
            try:
                poller.poll(left * 1000)
            finally:
                poller.unregister(sock)
    finally:
        sock.setblocking(True)
