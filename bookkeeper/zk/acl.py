"""ZooKeeper credentials, and the ACLs Artimon puts on the znodes it creates.

**Credentials** are one digest identity (``user:password``) for the whole platform, taken
from, in order: the ``auth`` argument of the API (a :class:`ZkAuth` or its text),
``$ARTIMON_ZK_AUTH`` (``user:password``), or the file named by ``$ARTIMON_ZK_AUTH_FILE``
(``artimon --zk-auth-file`` sets it; a file keeps the password out of ``ps`` and shell
history). No credentials: znodes are created open (``world:anyone`` all rights), ZooKeeper's
default and Artimon's behaviour before ACLs.

**ACLs**, with credentials:

=====================================================  ==========================================
znodes                                                 ACL
=====================================================  ==========================================
the root, ``/contexts``, ``/agents``, ``/vhms``, below  ``digest:<user>`` all, ``world:anyone`` read
``/config`` and below                                   ``digest:<user>`` all
=====================================================  ==========================================

Discovery stays open to readers (``artimon endpoints``, a dashboard, an anonymous query
API): a registration reveals an address and labels, no secret; nobody but the identity can
create, change or delete a znode. An agent's configuration is readable by the identity only.

**Tightening.** A znode Artimon creates under, or watches, that grants ``world:anyone`` more
than read (made before ACLs were turned on, or by ``zkCli`` without an ACL) is given
Artimon's ACL on the way (``secure_path``; an open ACL grants the ADMIN right this needs),
with one warning. ``/`` and ``/zookeeper`` are never touched.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError
from kazoo.security import ACL, ANYONE_ID_UNSAFE, Permissions, make_digest_acl, make_digest_acl_credential

from bookkeeper.exceptions import ZkAccessError, ZkAuthError

__all__ = [
    "AUTH_ENV",
    "AUTH_FILE_ENV",
    "ZkAuth",
    "resolve_zk_auth",
    "secure_path",
    "world_writable",
]

log = logging.getLogger(__name__)

AUTH_ENV = "ARTIMON_ZK_AUTH"
AUTH_FILE_ENV = "ARTIMON_ZK_AUTH_FILE"
_MAX_AUTH_FILE = 4096  # a line of credentials, not a file to slurp whole
_WRITE_RIGHTS = Permissions.WRITE | Permissions.CREATE | Permissions.DELETE | Permissions.ADMIN
_UNTOUCHED = ("/", "/zookeeper")


@dataclass(frozen=True)
class ZkAuth:
    """A digest identity; ``password`` never appears in a repr or a message."""

    user: str
    password: str = field(repr=False)

    @classmethod
    def parse(cls, text: str, source: str = AUTH_ENV) -> ZkAuth:
        """``user:password`` (the password may hold ``:``); ``ZkAuthError`` naming ``source``."""
        user, colon, password = text.strip().partition(":")
        if not colon or not user or not password:
            raise ZkAuthError(f"{source}: ZooKeeper credentials must be user:password (non-empty both)")
        if any(c.isspace() for c in user):
            raise ZkAuthError(f"{source}: the ZooKeeper user {user!r} contains whitespace")
        return cls(user, password)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ZkAuth:
        """Credentials from the first line of a file."""
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read(_MAX_AUTH_FILE)
        except (OSError, UnicodeError) as exc:
            raise ZkAuthError(f"ZooKeeper credentials file {str(path)!r} cannot be read: {exc}") from None
        lines = text.splitlines()
        return cls.parse(lines[0] if lines else "", f"ZooKeeper credentials file {str(path)!r}")

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """What kazoo's ``auth_data`` takes."""
        return [("digest", f"{self.user}:{self.password}")]

    @property
    def digest_id(self) -> str:
        """The id ZooKeeper keeps in ACLs for this identity (``user:base64(sha1)``)."""
        return str(make_digest_acl_credential(self.user, self.password))

    def acl(self, *, private: bool = False) -> list[ACL]:
        """All rights for this identity, and read for anyone unless ``private``."""
        owner = make_digest_acl(self.user, self.password, all=True)
        return [owner] if private else [owner, ACL(Permissions.READ, ANYONE_ID_UNSAFE)]

    def owns(self, acls: Sequence[ACL]) -> bool:
        """Whether ``acls`` give this identity every right (a znode Artimon created)."""
        return any(
            entry.id.scheme == "digest"
            and entry.id.id == self.digest_id
            and entry.perms & Permissions.ALL == Permissions.ALL
            for entry in acls
        )


def resolve_zk_auth(
    auth: ZkAuth | str | None = None, environ: Mapping[str, str] | None = None
) -> ZkAuth | None:
    """The credentials to use: ``auth``, else ``$ARTIMON_ZK_AUTH``, else the file
    ``$ARTIMON_ZK_AUTH_FILE`` names, else ``None`` (see the module doc)."""
    if isinstance(auth, ZkAuth):
        return auth
    if auth:
        return ZkAuth.parse(auth, "auth")
    env = os.environ if environ is None else environ
    if env.get(AUTH_ENV):
        return ZkAuth.parse(env[AUTH_ENV], AUTH_ENV)
    if env.get(AUTH_FILE_ENV):
        return ZkAuth.from_file(Path(env[AUTH_FILE_ENV]))
    return None


def world_writable(acls: Sequence[ACL]) -> bool:
    """Whether anyone at all may create, change, delete or re-ACL the znode."""
    return any(entry.id == ANYONE_ID_UNSAFE and entry.perms & _WRITE_RIGHTS for entry in acls)


def secure_path(client: KazooClient, path: str, acl: list[ACL]) -> int:
    """Make every znode of ``path`` (from the top, ``/`` and ``/zookeeper`` excepted) exist,
    created with ``acl``, and give ``acl`` to those that are world-writable. Returns how many
    were tightened; ``ZkAccessError`` when ZooKeeper refuses (no or other credentials)."""
    parts = [part for part in path.split("/") if part]
    tightened = 0
    for depth in range(1, len(parts) + 1):
        node = "/" + "/".join(parts[:depth])
        if node in _UNTOUCHED:
            continue
        try:
            try:
                current, stat = client.get_acls(node)  # reading an ACL needs no right
            except NoNodeError:
                try:
                    client.create(node, b"", acl=acl)
                    continue
                except NodeExistsError:  # created meanwhile by another client: check it
                    current, stat = client.get_acls(node)
            if world_writable(current):
                client.set_acls(node, acl, version=stat.aversion)
                tightened += 1
                log.warning("ZooKeeper znode %s was writable by anyone; Artimon's ACL set on it", node)
        except NoAuthError:
            raise ZkAccessError(
                f"ZooKeeper refuses to create or secure {node} with these credentials "
                f"(set {AUTH_ENV} or {AUTH_FILE_ENV} to the platform's)"
            ) from None
    return tightened
