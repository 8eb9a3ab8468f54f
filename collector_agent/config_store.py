"""Agents' central configuration in ZooKeeper: versions, the current pointer, agents' reports.

A configuration belongs to a **target**: a group of agents (``--config-group``) or one agent
(its ``--agent-id``; one agent's configuration overrides its group's). Under the layout's
root (:class:`bookkeeper.zk.ZkLayout`)::

    /config/groups/<group>/v0000000007     persistent  the properties text of version 7
    /config/groups/<group>/current         persistent  JSON Pointer: the version to apply
    /config/agents/<agent-id>/...          the same for one agent
    /config/status/<agent-id>              ephemeral   JSON AgentReport: what the agent runs

A version is written once and never changed. :meth:`ConfigStore.write` adds version N+1
and moves the pointer in one ZooKeeper transaction, conditional on the pointer's znode
version read before: two pushes at once cannot both win (the loser gets
``ConfigConflictError``, nothing written). :meth:`ConfigStore.point` moves the pointer back
(a rollback) the same way. History keeps the ``keep`` newest versions, and always the
current and previous ones.

With credentials (:mod:`bookkeeper.zk.acl`) every znode under ``/config`` is created private
to the identity (nobody else reads or writes a configuration); without, they are open.

Limits, each refused with ``MalformedConfigError`` when read (or ``CentralConfigError`` when
written): a version's text at most ``MAX_CONFIG_BYTES`` and UTF-8; a pointer or report at
most ``MAX_RECORD_BYTES`` of a JSON object with the fields below and their types.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from bookkeeper.zk import ZkAuth, ZkLayout, json_object, secure_path
from collector_agent.exceptions import CentralConfigError, ConfigConflictError, MalformedConfigError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_RECORD_BYTES",
    "AgentReport",
    "ConfigStore",
    "ConfigTarget",
    "Pointer",
]

MAX_CONFIG_BYTES = 512 * 1024  # under ZooKeeper's jute.maxbuffer (1 MiB) with room to spare
MAX_RECORD_BYTES = 8 * 1024
MAX_REASON = 2000  # characters of a refusal's reason kept in a report
DEFAULT_KEEP = 10
_VERSION_DIGITS = 10


@dataclass(frozen=True)
class ConfigTarget:
    """Whose configuration: ``group`` or ``agent``, and its name."""

    kind: Literal["group", "agent"]
    name: str

    def directory(self, layout: ZkLayout) -> str:
        return layout.group_config(self.name) if self.kind == "group" else layout.agent_config(self.name)

    @property
    def key(self) -> str:
        """How an agent's report names what it follows: ``group/<name>`` or ``agent/<name>``."""
        return f"{self.kind}/{self.name}"

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def _int(raw: dict[str, Any], key: str, what: str, low: int = 0) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**63:
        raise MalformedConfigError(f"{what} has {key} {value!r} (an integer from {low})")
    return value


def _str(raw: dict[str, Any], key: str, what: str, limit: int = 256) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or len(value) > limit:
        raise MalformedConfigError(f"{what} has {key} {str(value)[:200]!r} (a string of at most {limit})")
    return value


class _JsonRecord:
    """A record stored as one sorted JSON object (its dataclass fields)."""

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()  # type: ignore[call-overload]


@dataclass(frozen=True)
class Pointer(_JsonRecord):
    """The ``current`` znode: the version agents apply, the one it replaced (0: none), when
    and by whom it was set, and the version it rolled back from (0: not a rollback)."""

    version: int
    previous: int
    at_ms: int
    by: str
    rolled_back_from: int = 0

    @classmethod
    def from_json(cls, data: bytes) -> Pointer:
        what = "configuration pointer"
        raw = json_object(data, what, MAX_RECORD_BYTES, MalformedConfigError)
        return cls(
            _int(raw, "version", what, low=1),
            _int(raw, "previous", what),
            _int(raw, "at_ms", what),
            _str(raw, "by", what),
            _int(raw, "rolled_back_from", what),
        )


@dataclass(frozen=True)
class AgentReport(_JsonRecord):
    """What an agent says in ``/config/status/<agent-id>``: its group (``""``: none), what
    it follows (a target's ``key``, ``""``: nothing yet), the version it runs from there (0:
    none yet), the last version it refused (0: none) and why, and when it last changed."""

    group: str
    follows: str
    version: int
    refused: int
    reason: str
    at_ms: int

    @classmethod
    def from_json(cls, data: bytes) -> AgentReport:
        what = "agent configuration report"
        raw = json_object(data, what, MAX_RECORD_BYTES, MalformedConfigError)
        return cls(
            _str(raw, "group", what),
            _str(raw, "follows", what, limit=600),
            _int(raw, "version", what),
            _int(raw, "refused", what),
            _str(raw, "reason", what, limit=MAX_REASON),
            _int(raw, "at_ms", what),
        )


def version_name(version: int) -> str:
    return f"v{version:0{_VERSION_DIGITS}d}"


def _version_of(name: str) -> int | None:
    digits = name[1:]
    if name.startswith("v") and len(digits) == _VERSION_DIGITS and digits.isdigit():
        return int(digits)
    return None


def decode_config(data: bytes, where: str) -> str:
    """A version's text, checked: at most ``MAX_CONFIG_BYTES`` of UTF-8."""
    if len(data) > MAX_CONFIG_BYTES:
        raise MalformedConfigError(f"{where}: {len(data)} bytes exceed {MAX_CONFIG_BYTES}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedConfigError(f"{where} is not UTF-8 text: {exc}") from None


class ConfigStore:
    """Read and write targets' configurations through ``client`` (see the module doc); ``by``
    names the writer in the pointers it sets."""

    def __init__(self, client: KazooClient, layout: ZkLayout, auth: ZkAuth | None, by: str = "") -> None:
        self.client = client
        self.layout = layout
        self.auth = auth
        self.by = by[:256]

    def secure(self, path: str) -> None:
        """Make ``path`` exist; with credentials, the root readable by anyone and everything
        from ``/config`` down private (created so, or tightened)."""
        if self.auth is None:
            self.client.ensure_path(path)
            return
        secure_path(self.client, self.layout.root, self.auth.acl())
        secure_path(self.client, path, self.auth.acl(private=True))

    def _acl(self) -> Any:
        return self.auth.acl(private=True) if self.auth is not None else None

    def _pointer_path(self, target: ConfigTarget) -> str:
        return f"{target.directory(self.layout)}/current"

    def current(self, target: ConfigTarget, watch: Any = None) -> Pointer | None:
        """The target's pointer (``None``: it has none); ``watch`` is called on its next change."""
        try:
            data, _ = self.client.get(self._pointer_path(target), watch=watch)
        except NoNodeError:
            if watch is not None and self.client.exists(self._pointer_path(target), watch=watch):
                return self.current(target)  # created between the two calls
            return None
        return Pointer.from_json(data)

    def _current_stat(self, target: ConfigTarget) -> tuple[Pointer | None, ZnodeStat | None]:
        try:
            data, stat = self.client.get(self._pointer_path(target))
        except NoNodeError:
            return None, None
        return Pointer.from_json(data), stat

    def versions(self, target: ConfigTarget) -> list[int]:
        """The versions kept, oldest first."""
        try:
            children = self.client.get_children(target.directory(self.layout))
        except NoNodeError:
            return []
        return sorted(v for v in map(_version_of, children) if v is not None)

    def read(self, target: ConfigTarget, version: int) -> tuple[str, ZnodeStat]:
        """Version ``version``'s text (``CentralConfigError`` if it is not kept) and its stat."""
        path = f"{target.directory(self.layout)}/{version_name(version)}"
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            kept = self.versions(target)
            raise CentralConfigError(
                f"{target} has no version {version} (kept: {', '.join(map(str, kept)) or 'none'})"
            ) from None
        return decode_config(data, path), stat

    def write(self, target: ConfigTarget, text: str, keep: int = DEFAULT_KEEP) -> Pointer:
        """Add ``text`` as the next version and make it current (see the module doc)."""
        data = text.encode("utf-8")
        if len(data) > MAX_CONFIG_BYTES:
            raise CentralConfigError(f"a configuration of {len(data)} bytes exceeds {MAX_CONFIG_BYTES}")
        directory = target.directory(self.layout)
        self.secure(directory)
        old, stat = self._current_stat(target)
        version = max([0, *self.versions(target)]) + 1
        pointer = Pointer(version, old.version if old else 0, int(time.time() * 1000), self.by)
        transaction = self.client.transaction()
        transaction.create(f"{directory}/{version_name(version)}", data, acl=self._acl())
        if stat is None:
            transaction.create(self._pointer_path(target), pointer.to_json(), acl=self._acl())
        else:
            transaction.set_data(self._pointer_path(target), pointer.to_json(), version=stat.version)
        self._commit(transaction, target)
        self._prune(target, keep, pointer)
        return pointer

    def point(self, target: ConfigTarget, version: int, rolled_back_from: int = 0) -> Pointer:
        """Make the kept ``version`` current again (a rollback when ``rolled_back_from``)."""
        old, stat = self._current_stat(target)
        if old is None or stat is None:
            raise CentralConfigError(f"{target} has no current version")
        self.read(target, version)  # kept, or refused here before the pointer moves
        pointer = Pointer(version, old.version, int(time.time() * 1000), self.by, rolled_back_from)
        transaction = self.client.transaction()
        transaction.set_data(self._pointer_path(target), pointer.to_json(), version=stat.version)
        self._commit(transaction, target)
        return pointer

    def withdraw(self, target: ConfigTarget, version: int) -> None:
        """Remove the pointer while it still names ``version`` (a first version refused: no
        earlier one to go back to)."""
        old, stat = self._current_stat(target)
        if old is None or stat is None or old.version != version:
            raise ConfigConflictError(f"another push changed {target} meanwhile")
        transaction = self.client.transaction()
        transaction.delete(self._pointer_path(target), version=stat.version)
        self._commit(transaction, target)

    def _commit(self, transaction: Any, target: ConfigTarget) -> None:
        results = transaction.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if any(isinstance(r, BadVersionError | NodeExistsError | NoNodeError) for r in failed):
            raise ConfigConflictError(f"another push changed {target} meanwhile; nothing written, try again")
        if failed:
            raise CentralConfigError(f"ZooKeeper refused the change of {target}: {failed[0]!r}")

    def _prune(self, target: ConfigTarget, keep: int, pointer: Pointer) -> None:
        versions = self.versions(target)
        protected = {pointer.version, pointer.previous}
        for version in versions[: max(0, len(versions) - keep)]:
            if version not in protected:
                with contextlib.suppress(NoNodeError):  # pruned by a concurrent push
                    self.client.delete(f"{target.directory(self.layout)}/{version_name(version)}")

    def reports(self) -> dict[str, AgentReport | MalformedConfigError]:
        """Every live agent's report by agent id (a malformed one as its error)."""
        try:
            names = self.client.get_children(self.layout.config_statuses)
        except NoNodeError:
            return {}
        found: dict[str, AgentReport | MalformedConfigError] = {}
        for name in names:
            try:
                data, _ = self.client.get(f"{self.layout.config_statuses}/{name}")
            except NoNodeError:
                continue  # the agent left meanwhile
            agent_id = ZkLayout.context_name(name)
            try:
                found[agent_id] = AgentReport.from_json(data)
            except MalformedConfigError as exc:
                found[agent_id] = exc
        return found
