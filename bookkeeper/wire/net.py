"""Addresses a server publishes for its peers."""

from __future__ import annotations

import socket

__all__ = ["advertised_address"]


def advertised_address(bind_host: str) -> str:
    """The address peers should dial: the bound one, or for a wildcard bind the address
    of the interface that routes outwards (no packet is sent to find it)."""
    if bind_host not in ("", "0.0.0.0", "::"):
        return bind_host
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed, only used to pick a source
        return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()
