"""ZooKeeper for every Artimon process: the znode layout, ephemeral registration that
outlives session loss, the membership recipe that watches who is registered, and the
credentials and ACLs that keep anonymous clients from writing any of it.

Layout (``layout.py``: the paths, the endpoint and agent payloads and their checks),
:class:`Registration` (``registration.py``, its state machine in its doc),
:class:`Membership` (``membership.py``: watched groups of members with their payloads, a
grace period, re-read after session loss), :func:`list_endpoints` (a one-shot listing for
tools), ``acl.py`` (:class:`ZkAuth`, :func:`resolve_zk_auth`, :func:`secure_path`).
"""

from __future__ import annotations

from bookkeeper.zk.acl import (
    AUTH_ENV,
    AUTH_FILE_ENV,
    ZkAuth,
    resolve_zk_auth,
    secure_path,
    world_writable,
)
from bookkeeper.zk.discovery import list_endpoints
from bookkeeper.zk.layout import (
    DEFAULT_ROOT,
    MAX_LABELS,
    MAX_PAYLOAD,
    AgentInfo,
    EndpointInfo,
    ZkLayout,
    resolve_zk,
)
from bookkeeper.zk.membership import Member, Membership, MembershipState
from bookkeeper.zk.registration import Registration, RegistrationState, make_client

__all__ = [
    "AUTH_ENV",
    "AUTH_FILE_ENV",
    "DEFAULT_ROOT",
    "MAX_LABELS",
    "MAX_PAYLOAD",
    "AgentInfo",
    "EndpointInfo",
    "Member",
    "Membership",
    "MembershipState",
    "Registration",
    "RegistrationState",
    "ZkAuth",
    "ZkLayout",
    "list_endpoints",
    "make_client",
    "resolve_zk",
    "resolve_zk_auth",
    "secure_path",
    "world_writable",
]
