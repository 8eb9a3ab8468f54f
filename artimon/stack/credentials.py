"""The ZooKeeper credentials of ``artimon up``: the stack runs with ACLs on by default.

Credentials the operator gives (``--zk-auth-file``, ``$ARTIMON_ZK_AUTH_FILE``,
``$ARTIMON_ZK_AUTH``: :func:`bookkeeper.zk.resolve_zk_auth`) are used as they are, so the
hosts of a site share one identity. Otherwise the stack keeps its own in
``<data-dir>/zk.auth``: ``artimon:<random>``, created at the first start with mode 0600 and
reused after; a file there that others may read is refused (ssh's rule for its keys), as
credentials anyone can read protect nothing. ``$ARTIMON_ZK_AUTH_FILE`` is then set to it,
so every component of the stack, and every process it starts, authenticates.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from bookkeeper import ZkAuthError
from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV, ZkAuth, resolve_zk_auth

__all__ = ["CREDENTIALS_FILE", "stack_credentials", "write_private"]

CREDENTIALS_FILE = "zk.auth"
_USER = "artimon"


def stack_credentials(data: Path) -> str:
    """Make every process of the stack authenticate (see the module doc); returns how other
    processes on this machine find the same credentials, for the ready line."""
    if os.environ.get(AUTH_ENV):
        resolve_zk_auth()  # checked: user:password
        return f"${AUTH_ENV}"
    if os.environ.get(AUTH_FILE_ENV):
        resolve_zk_auth()  # checked: readable, user:password
        return f"{AUTH_FILE_ENV}={os.environ[AUTH_FILE_ENV]}"
    path = data / CREDENTIALS_FILE
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise ZkAuthError(
                f"ZooKeeper credentials file {str(path)!r} may be read by others (mode {mode:o}): "
                f"chmod 600 it, or delete it for new credentials"
            )
        ZkAuth.from_file(path)
    else:
        _create(path)
    os.environ[AUTH_FILE_ENV] = str(path)
    return f"{AUTH_FILE_ENV}={path}"


def _create(path: Path) -> None:
    """``artimon:<random>`` into ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, f"{_USER}:{secrets.token_urlsafe(24)}\n")


def write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, mode 0600 from its creation, whole or not at all."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a file left by a crash had its mode already; keep it 0600 anyway
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, path)
