"""Who is registered: a watched view of the groups under a znode and their members.

Artimon keeps its registrations two levels deep: ``/contexts/<context>/<endpoint>``,
``/agents/<group>/<agent>``, ``/vhms/<shard>/<member>``. A :class:`Membership` watches one
such tree and keeps, per group, its members with their decoded payloads and creation times.
The recipe uses only kazoo's public client API, in the style of kazoo's own recipes.

State machine (``Membership.state``)::

    STARTING --first read--> WATCHING --connection lost--> SUSPENDED
                                ^                               |
                                +---- reconnected: read again --+
    any state --stop()--> CLOSED

While SUSPENDED the last view is kept: a ZooKeeper outage is not a departure of every member.
After a reconnection (same session or a new one, whose watches are gone) the tree is read
again and the watches re-armed, every payload too after a new session (a member deleted and
created again under its name meanwhile has a new creation time); it is also read every
``refresh`` seconds in case a watch was lost. :meth:`Membership.read_now` asks for a read
after a ``sync`` (the server this client talks to catches up with the leader first) and waits
for its view: a caller that must agree with other clients at a moment (the agents of a group
at a round's start) reads what every other one would read then, not a view a slow watch left
behind. ``answered_at`` is when the last read that ZooKeeper answered began: the session was
alive then, so it cannot expire before that plus its timeout.

Watches only wake a worker thread; reads happen there, never on kazoo's event thread. A
member's payload is read once (an ephemeral znode's data does not change) with the reads of
new members in flight together. A payload that ``decode`` refuses (``ValueError``) leaves the
member out, with one warning, counted in ``refused``. A group whose last member left stays in
the view, empty, for ``grace`` seconds (a restart is not a departure), then goes.

With ``auth`` (the platform's credentials, :mod:`bookkeeper.zk.acl`) the watch also guards
the tree: the watched znode and each group are given Artimon's ACL if anyone could write
them (once per session for the znode, once per group), and a member must be ephemeral and
carry Artimon's ACL (created by the platform's identity), or it is left out and counted in
``refused`` like a bad payload: a znode left from before ACLs were turned on is no member.
A reader without the rights to create the watched znode (no credentials under a protected
root) sees an empty view until someone creates it.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from bookkeeper import ZkAccessError
from bookkeeper.zk import ZkAuth, secure_path, world_writable

__all__ = ["Member", "Membership", "MembershipState"]

log = logging.getLogger(__name__)

_READ_TIMEOUT = 10.0  # seconds for one payload read; a slower ensemble fails the read, retried later


class MembershipState(enum.Enum):
    STARTING = "starting"
    WATCHING = "watching"
    SUSPENDED = "suspended"
    CLOSED = "closed"


@dataclass(frozen=True)
class Member:
    """A registered member: its group (the decoded znode segment), its znode name, what
    ``decode`` made of its payload, and its creation time (ZooKeeper's clock, epoch ms)."""

    group: str
    name: str
    payload: Any
    created_ms: int


View = Mapping[str, tuple[Member, ...]]


def _raw(group: str, name: str, data: bytes) -> bytes:
    return data


class Membership:
    """Watch the groups under ``path`` (see the module doc). ``groups`` picks the groups to
    keep by name (all by default); ``decode(group, name, data)`` turns a payload into what
    :attr:`Member.payload` holds; ``on_change(view)`` is called, from the worker thread, with
    each new view."""

    def __init__(
        self,
        client: KazooClient,
        path: str,
        *,
        decode: Callable[[str, str, bytes], Any] = _raw,
        groups: Callable[[str], bool] | None = None,
        grace: float = 0.0,
        refresh: float = 5.0,
        on_change: Callable[[View], None] | None = None,
        name: str = "membership",
        auth: ZkAuth | None = None,
    ) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.decode = decode
        self.group_filter = groups
        self.grace = grace
        self.refresh = refresh
        self.on_change = on_change
        self.name = name
        self.auth = auth
        self.refused = 0  # members left out: a payload decode refused, or not the platform's
        self.state = MembershipState.STARTING
        self.ready = threading.Event()  # set after the first complete read
        self.version = 0  # incremented with each change of the view
        self.answered_at: float | None = None  # monotonic: when the last read ZooKeeper answered began
        self._view: dict[str, tuple[Member, ...]] = {}
        self._members: dict[str, Member | None] = {}  # "<segment>/<child>" -> member (None: refused)
        self._empty_since: dict[str, float] = {}
        self._secure_root = auth is not None  # guard the watched znode (again after a reconnection)
        self._guarded_groups: set[str] = set()
        self._unreadable: set[str] = set()
        self._refused_root = False
        self._new_session = False  # the session expired: the payloads read before are stale
        self._changed = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._fresh = threading.Condition()  # read_now: reads asked and the last one published
        self._asked = self._answered = 0
        self._thread = threading.Thread(target=self._run, name=f"{name} watch", daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self._thread.start()

    def stop(self) -> None:
        self._closed.set()
        self._changed.set()
        with self._fresh:
            self._fresh.notify_all()
        self.client.remove_listener(self._on_state)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self.state = MembershipState.CLOSED

    # -- reading the view --------------------------------------------------------------------

    def view(self) -> dict[str, tuple[Member, ...]]:
        """Every group kept (those in their grace period with no member)."""
        with self._lock:
            return dict(self._view)

    def members(self, group: str) -> tuple[Member, ...]:
        with self._lock:
            return self._view.get(group, ())

    def refresh_now(self) -> None:
        """Ask the worker for a read now (a caller that knows something changed)."""
        self._changed.set()

    def read_now(self, timeout: float) -> bool:
        """Bring the view up to date with ZooKeeper's leader: the worker syncs, reads and
        publishes (``on_change`` called if it changed) before this returns ``True``; ``False``
        after ``timeout`` seconds or when not connected (the view stays as it was)."""
        with self._fresh:
            self._asked += 1
            asked = self._asked
        self._changed.set()
        with self._fresh:
            self._fresh.wait_for(lambda: self._answered >= asked or self._closed.is_set(), timeout)
            return self._answered >= asked

    # -- the worker --------------------------------------------------------------------------

    def _trigger(self, *_: object) -> None:
        self._changed.set()

    def _on_state(self, state: str) -> None:
        # kazoo's event thread: no blocking call here
        if state == KazooState.CONNECTED:
            self._secure_root = self.auth is not None
            self._changed.set()
        elif self.state is not MembershipState.CLOSED:
            self._new_session = self._new_session or state == KazooState.LOST
            self.state = MembershipState.SUSPENDED

    def _run(self) -> None:
        while not self._closed.is_set():
            self._changed.clear()
            asked = self._asked
            read = False
            began = time.monotonic()
            if self.client.connected:
                if self._new_session:
                    self._new_session = False
                    self._members.clear()
                try:
                    if asked > self._answered:
                        self.client.sync_async(self.path).get(timeout=_READ_TIMEOUT)
                    found = self._read()
                except (KazooException, KazooTimeoutError) as exc:
                    log.debug("%s: read of %s interrupted: %s", self.name, self.path, exc)
                except ZkAccessError as exc:
                    if not self._refused_root:
                        self._refused_root = True
                        log.error("%s: %s", self.name, exc)
                else:
                    self.answered_at = began
                    self._publish(found)
                    self.state = MembershipState.WATCHING
                    self.ready.set()
                    read = True
                    with self._fresh:
                        self._answered = asked
                        self._fresh.notify_all()
            # not read: look again soon (a connection may come up before our listener is in)
            self._changed.wait(self._next_wait() if read else min(0.2, self.refresh))

    def _next_wait(self) -> float:
        wait = self.refresh
        if self._empty_since:
            first = min(self._empty_since.values())
            wait = min(wait, max(0.05, first + self.grace - time.monotonic()))
        return wait

    def _children(self, path: str) -> list[str]:
        return list(self.client.get_children(path, watch=self._trigger))

    def _segments(self) -> list[str] | None:
        """The groups' znode names; ``None`` when the watched znode does not exist and this
        client may not create it (an exists-watch then tells when it appears)."""
        if self._secure_root and self.auth is not None:
            self._secure_root = False  # a refusal is logged once, and the read goes on without
            secure_path(self.client, self.path, self.auth.acl())
        try:
            return self._children(self.path)
        except NoNodeError:
            pass
        try:
            self.client.ensure_path(self.path)
        except NoAuthError:
            if self.client.exists(self.path, watch=self._trigger) is None:
                return None
        return self._children(self.path)

    def _guard_group(self, path: str) -> None:
        """Give a world-writable group Artimon's ACL (once per group)."""
        if self.auth is None or path in self._guarded_groups:
            return
        acls, stat = self.client.get_acls(path)
        if world_writable(acls):
            try:
                self.client.set_acls(path, self.auth.acl(), version=stat.aversion)
            except NoAuthError:
                log.error("%s: %s is writable by anyone and its ACL may not be changed", self.name, path)
            else:
                log.warning("%s: %s was writable by anyone; Artimon's ACL set on it", self.name, path)
        self._guarded_groups.add(path)

    def _read(self) -> dict[str, tuple[Member, ...]]:
        segments = self._segments()
        if segments is None:
            return {}
        found: dict[str, tuple[Member, ...]] = {}
        listed: set[str] = set()
        for segment in segments:
            group = unquote(segment)
            if self.group_filter is not None and not self.group_filter(group):
                continue
            group_path = f"{self.path}/{segment}"
            try:
                self._guard_group(group_path)
                children = self._children(group_path)
            except NoNodeError:
                continue
            except NoAuthError:
                if group_path not in self._unreadable:
                    self._unreadable.add(group_path)
                    log.warning(
                        "%s: %s may not be read with these credentials; skipped", self.name, group_path
                    )
                continue
            keys = [f"{segment}/{child}" for child in children]
            listed.update(keys)
            pending = [
                (
                    key,
                    child,
                    self.client.get_async(f"{self.path}/{key}"),
                    self.client.get_acls_async(f"{self.path}/{key}") if self.auth else None,
                )
                for key, child in zip(keys, children, strict=True)
                if key not in self._members
            ]
            for key, child, answer, acl_answer in pending:
                try:
                    data, stat = answer.get(timeout=_READ_TIMEOUT)
                    acls = acl_answer.get(timeout=_READ_TIMEOUT)[0] if acl_answer is not None else None
                except NoNodeError:
                    continue  # left between the listing and the read
                if (
                    acls is not None
                    and self.auth is not None
                    and not (stat.ephemeralOwner and self.auth.owns(acls))
                ):
                    self.refused += 1
                    log.warning(
                        "%s: ignoring %s/%s: not an ephemeral znode of the platform's identity",
                        self.name,
                        group,
                        child,
                    )
                    self._members[key] = None
                    continue
                self._members[key] = self._decode(group, child, data or b"", int(stat.ctime))
            found[group] = tuple(
                member for key in sorted(keys) if (member := self._members.get(key)) is not None
            )
        for key in set(self._members) - listed:
            del self._members[key]
        return found

    def _decode(self, group: str, child: str, data: bytes, created_ms: int) -> Member | None:
        try:
            payload = self.decode(group, child, data)
        except ValueError as exc:
            self.refused += 1
            log.warning("%s: ignoring %s/%s: %s", self.name, group, child, exc)
            return None
        return Member(group, child, payload, created_ms)

    def _publish(self, found: dict[str, tuple[Member, ...]]) -> None:
        now = time.monotonic()
        with self._lock:
            previous = self._view
            view: dict[str, tuple[Member, ...]] = {}
            for group, members in found.items():
                if members:
                    self._empty_since.pop(group, None)
                    view[group] = members
            for group in previous:
                if group not in view:
                    self._empty_since.setdefault(group, now)
            for group, since in list(self._empty_since.items()):
                if now - since >= self.grace:
                    del self._empty_since[group]
                else:
                    view[group] = ()
            if view == previous:
                return
            self._view = view
            self.version += 1
        if self.on_change is not None:
            try:
                self.on_change(view)
            except Exception:  # a listener's bug must not stop the watch
                log.exception("%s: on_change failed", self.name)
