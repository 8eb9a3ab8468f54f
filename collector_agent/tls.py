"""TLS keys of the agent's Thrift and Avro components, Flume's names adapted to PEM files.

Flume's Thrift and Avro sources and sinks say ``ssl = true`` and name Java key stores; here the same
keys name PEM files, read by the standard library's :mod:`ssl`:

- ``ssl``: ``true`` turns TLS on (default ``false``);
- ``keystore``: the component's own certificate chain, in PEM, with its private key unless
  ``keystore-key`` names another file; required by a server, optional for a client (a
  server asking for client certificates wants one);
- ``keystore-key``, ``keystore-password``: the private key's file and its password;
- ``truststore``: PEM CA certificates. A client trusts the servers they signed (default: the
  system's CAs); a server given one requires clients to present a certificate it signed
  (mutual TLS);
- ``ssl-check-hostname`` (client, default ``true``): the server's certificate must name the
  host dialled (an IP address among its IP SANs);
- ``keystore-type``, ``truststore-type``: only ``PEM`` (Flume's ``JKS`` is refused by name).
"""

from __future__ import annotations

import ssl

from bookkeeper import TlsConfigError
from bookkeeper.wire import client_context, server_context
from collector_agent.context import Context

__all__ = ["client_ssl_context", "server_ssl_context"]


def _check_types(context: Context) -> None:
    for key in ("keystore-type", "truststore-type"):
        kind = context.get_str(key, "PEM").strip()
        if kind.upper() != "PEM":
            raise context.error(key, f"{kind!r}: only PEM files are supported")


def server_ssl_context(context: Context) -> ssl.SSLContext | None:
    """The server context the keys describe, ``None`` without ``ssl = true``."""
    if not context.get_bool("ssl", False):
        return None
    _check_types(context)
    try:
        return server_context(
            context.get_str("keystore"),
            context.get_optional("keystore-key"),
            password=context.get_optional("keystore-password"),
            client_ca=context.get_optional("truststore"),
        )
    except TlsConfigError as exc:
        raise context.error("ssl", str(exc)) from None


def client_ssl_context(context: Context) -> ssl.SSLContext | None:
    """The client context the keys describe, ``None`` without ``ssl = true``."""
    if not context.get_bool("ssl", False):
        return None
    _check_types(context)
    try:
        return client_context(
            context.get_optional("truststore"),
            certfile=context.get_optional("keystore"),
            keyfile=context.get_optional("keystore-key"),
            password=context.get_optional("keystore-password"),
            check_hostname=context.get_bool("ssl-check-hostname", True),
        )
    except TlsConfigError as exc:
        raise context.error("ssl", str(exc)) from None
