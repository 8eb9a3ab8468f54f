"""Which addresses a process listens on, read from Linux's ``/proc``: how tests (and an
operator) check that no listener of a command binds every interface unless asked.

A process's sockets are the ``socket:[inode]`` links under ``/proc/<pid>/fd``; the
listening TCP ones are the rows of ``/proc/net/tcp`` and ``/proc/net/tcp6`` in state
``0A`` (LISTEN) with those inodes. Children (a ZooKeeper JVM started by ``artimon up``) are
found through ``/proc/<pid>/task/<tid>/children``.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Listener", "listening"]

_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    """A listening TCP socket: its bound address (IPv4-mapped IPv6 shown as IPv4), port,
    and the process that holds it."""

    host: str
    port: int
    pid: int

    @property
    def wildcard(self) -> bool:
        """Bound to every interface (``0.0.0.0`` or ``::``)."""
        return ipaddress.ip_address(self.host).is_unspecified


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    # the kernel prints each 32-bit word in host order (little-endian here)
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(swapped) == 4:
        return str(ipaddress.IPv4Address(swapped))
    address = ipaddress.IPv6Address(swapped)
    return str(address.ipv4_mapped or address)


def _listening_inodes() -> dict[int, tuple[str, int]]:
    found: dict[int, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN:
                hex_address, _, hex_port = fields[1].partition(":")
                found[int(fields[9])] = (_address(hex_address), int(hex_port, 16))
    return found


def _descendants(pid: int) -> list[int]:
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue  # gone meanwhile
        for task in tasks:
            try:
                queue.extend(
                    int(child) for child in Path(f"/proc/{current}/task/{task}/children").read_text().split()
                )
            except OSError:
                continue
    return pids


def listening(pid: int, *, children: bool = True) -> list[Listener]:
    """The TCP sockets ``pid`` (and, with ``children``, its descendants) listen on now,
    sorted by port."""
    inodes = _listening_inodes()
    found = []
    for process in _descendants(pid) if children else [pid]:
        try:
            fds = os.listdir(f"/proc/{process}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{process}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and (inode := int(target[8:-1])) in inodes:
                host, port = inodes[inode]
                found.append(Listener(host, port, process))
    return sorted(set(found), key=lambda listener: (listener.port, listener.host, listener.pid))
