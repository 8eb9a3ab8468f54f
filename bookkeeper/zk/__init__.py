"""ZooKeeper for every Artimon process: the znode layout, ephemeral registration that
outlives session loss, and the membership recipe that watches who is registered.

Layout (``layout.py``), :class:`Registration` (``registration.py``, its state machine in its
doc), :class:`Membership` (``membership.py``: watched groups of members with their payloads,
a grace period, re-read after session loss), :func:`list_endpoints` (a one-shot listing for
tools).
"""

from __future__ import annotations

from bookkeeper.zk.discovery import list_endpoints
from bookkeeper.zk.layout import DEFAULT_ROOT, EndpointInfo, ZkLayout, resolve_zk
from bookkeeper.zk.membership import Member, Membership, MembershipState
from bookkeeper.zk.registration import Registration, RegistrationState, make_client

__all__ = [
    "DEFAULT_ROOT",
    "EndpointInfo",
    "Member",
    "Membership",
    "MembershipState",
    "Registration",
    "RegistrationState",
    "ZkLayout",
    "list_endpoints",
    "make_client",
    "resolve_zk",
]
