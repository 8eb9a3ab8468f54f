"""ZooKeeper for every Artimon process: the znode layout, ephemeral registration that
outlives session loss, and the credentials and ACLs that keep anonymous clients from
writing any of it.

Layout (``layout.py``: the paths, the endpoint and agent payloads and their checks, the
record a registration leaves under ``/known`` (:class:`KnownRecord`), and
:func:`json_object`, the bounded read of any znode's JSON),
:class:`Registration` (``registration.py``, its state machine in its doc), ``acl.py``
(:class:`ZkAuth`, :func:`resolve_zk_auth`, :func:`secure_path`). The membership recipe that
watches who is registered, and the one-shot listing of endpoints, are the platform's
(:mod:`bookkeeper.ground`).
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
from bookkeeper.zk.layout import (
    DEFAULT_ROOT,
    MAX_LABELS,
    MAX_PAYLOAD,
    AgentInfo,
    EndpointInfo,
    KnownRecord,
    ZkLayout,
    json_object,
    resolve_zk,
)
from bookkeeper.zk.registration import Registration, RegistrationState, make_client

__all__ = [
    "AUTH_ENV",
    "AUTH_FILE_ENV",
    "DEFAULT_ROOT",
    "MAX_LABELS",
    "MAX_PAYLOAD",
    "AgentInfo",
    "EndpointInfo",
    "KnownRecord",
    "Registration",
    "RegistrationState",
    "ZkAuth",
    "ZkLayout",
    "json_object",
    "make_client",
    "resolve_zk",
    "resolve_zk_auth",
    "secure_path",
    "world_writable",
]
