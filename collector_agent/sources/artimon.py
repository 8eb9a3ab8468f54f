"""``artimon``: discovers bookkeeper endpoints in ZooKeeper and polls them every interval.

Rounds start on interval boundaries (``floor(t / interval) * interval``). In each round the
agent polls the endpoints that belong to it (``collector_agent.group``) concurrently, on a
bounded pool, each with connect and read timeouts, and emits one event per endpoint: the
body is its variables as an Avro sample batch (``bookkeeper/ground/sample_batch.avsc``, the app's
own timestamps inside), the headers name ``artimon.context``, ``artimon.endpoint``
(``ip:port:uuid``), ``artimon.round`` (the round's start, epoch ms) and ``artimon.agent``.

Failures never hold a round up: an endpoint that refuses, hangs, answers garbage or too
much is counted (``PollFailCount``; ``PollTimeoutCount`` for those still running at the
round's deadline; per endpoint in ``endpoint_failures``), logged once per burst, and
skipped for that round. A round that cannot finish before the next one starts is counted
(``RoundOverrunCount``) and the next boundary is waited for; rounds missed meanwhile are
counted (``RoundSkippedCount``), never queued. At ``catchup`` of the interval the agent
looks again: endpoints whose owner died in the meantime are polled by their new owner for
that same round (``CatchupPollCount``), so a killed agent leaves no gap (a duplicate is
possible, and carries the same round header). An agent that starts less than ``catchup`` of
the interval into a round polls that round at once, once discovery has answered: a restart
(say after a SIGKILL) costs no round, and the endpoints it re-polls replace their samples of
that round with a later read (VHMS and the Parquet history keep one sample per series and
round). A new agent joining a group polls nothing early: it is a member from the first
round that begins half an interval after it registered (``collector_agent.group``).

Each poll has its endpoint's connection to itself: it checks the endpoint's kept-alive
client out of its slot (or opens a fresh one when the slot is empty) and puts it back when
it is done. A poll abandoned at its round's deadline keeps its client until its call ends
(its own ``readTimeout`` bounds that), then closes it; the next round, finding the slot
empty, opens a fresh connection, so two rounds never read one socket and an answer is
never read by a round that did not ask for it.

Discovery and group membership come from :class:`bookkeeper.ground.Membership` (endpoints
under ``/contexts``, this agent's group under ``/agents``); what this module adds is the
round scheduler, on one ZooKeeper session with the agent's registration; an agent cut off polls
nothing from shortly before that session could expire until it is back in a live one
(:mod:`collector_agent.sources.cut_off`, ``CutOffRoundCount``). Payloads are checked
(:meth:`bookkeeper.zk.EndpointInfo.from_znode`, which also requires an endpoint's payload to
agree with its znode; :class:`bookkeeper.zk.AgentInfo`): a member whose payload is refused,
or, with credentials, that is not an ephemeral znode of the platform's identity, is left out
and counted (``RegistrationRefusedCount``). ZooKeeper is used with the process's credentials
(``$ARTIMON_ZK_AUTH``..., see :mod:`bookkeeper.zk.acl`), never with a configuration key.

The round scheduler's states (``ArtimonSource.round_state``, a :class:`RoundState`)::

    STARTING --started within the first `catchup` of a round--> POLLING (startup poll)
    STARTING --otherwise--> WAITING
    WAITING --the next interval boundary--> POLLING --all answered or the deadline--> CATCHING_UP
    CATCHING_UP --at `catchup` of the interval: orphans of dead agents polled--> WAITING
    CATCHING_UP --the round ran past the next boundary (overrun)--> WAITING, the rounds
        missed meanwhile counted as skipped and never queued
    any state --stop()--> STOPPED

Events the channel still refuses at a round's deadline are dropped and counted
(``EventDroppedCount``, one per endpoint's batch) and logged with the round. Each batch
polled is told to the agent's round ledger (:mod:`collector_agent.ledger`).

Keys: ``zk`` (default ``$ARTIMON_ZK``), ``interval`` (s, 60), ``group`` (``default``),
``agentId`` (host-pid), ``contexts`` (regex on the context, ``.*``), ``labels.<key>``
(regex on an endpoint label), ``threads`` (32), ``connectTimeout`` (s, 5), ``readTimeout``
(s, 10), ``maxFrameSize`` (bytes, 64 MiB), ``catchup`` (fraction of the interval, 0.5),
``batchSize`` (events per channel transaction, 100), ``sessionTimeout`` (s, 10); TLS to the
endpoints: ``ssl``, ``truststore``, ``keystore``, ``keystore-key``, ``keystore-password``,
``ssl-check-hostname`` (:mod:`collector_agent.tls`).
"""

from __future__ import annotations

import concurrent.futures
import enum
import logging
import os
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping

from kazoo.client import KazooClient

from bookkeeper import BookkeeperError, EndpointClient, ZkAuthError
from bookkeeper.ground import Member, Membership, encode_sample_batch
from bookkeeper.zk import (
    AgentInfo,
    EndpointInfo,
    Registration,
    ZkAuth,
    ZkLayout,
    resolve_zk,
    resolve_zk_auth,
)
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.group import members_at, owner
from collector_agent.sources.base import EventDrivenSource
from collector_agent.sources.cut_off import SessionState, SessionWatch
from collector_agent.sources.rounds import emit_until, next_round_after
from collector_agent.tls import client_ssl_context

__all__ = ["ArtimonSource", "RoundState"]

log = logging.getLogger(__name__)


class RoundState(enum.Enum):
    STARTING = "starting"
    WAITING = "waiting"
    POLLING = "polling"
    CATCHING_UP = "catching up"
    STOPPED = "stopped"


class ArtimonSource(EventDrivenSource):
    # fmt: off
    counter_names = (
        *EventDrivenSource.counter_names,
        "RoundCount", "RoundOverrunCount", "RoundSkippedCount", "PollAttemptCount",
        "PollSuccessCount", "PollFailCount", "PollTimeoutCount", "CatchupPollCount",
        "StartupPollCount", "StaleViewRoundCount", "CutOffRoundCount", "EventDroppedCount",
        "EndpointCount", "AssignedEndpointCount", "AgentCount", "RegistrationRefusedCount",
        "LastRoundTime", "RoundInterval",
    )
    # fmt: on

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.zk_hosts = context.get_optional("zk") or os.environ.get("ARTIMON_ZK")
        if not self.zk_hosts:
            raise context.error("zk", "is required (or set ARTIMON_ZK)")
        try:
            self.zk_auth: ZkAuth | None = resolve_zk_auth()
        except ZkAuthError as exc:
            raise context.error("zk", str(exc)) from None
        self.interval = context.get_float("interval", 60.0, minimum=0.1)
        self.group = context.get_str("group", "default")
        self.agent_id = context.get_str("agentId", f"{socket.gethostname()}-{os.getpid()}")
        pattern = context.get_str("contexts", ".*")
        try:
            self.context_filter = re.compile(pattern)
            self.label_filters = {k: re.compile(v) for k, v in context.subset("labels").values.items()}
        except re.error as exc:
            raise context.error("contexts", f"bad regex: {exc}") from None
        self.threads = context.get_int("threads", 32, minimum=1)
        self.connect_timeout = context.get_float("connectTimeout", 5.0, minimum=0.01)
        self.read_timeout = context.get_float("readTimeout", 10.0, minimum=0.01)
        self.max_frame_size = context.get_int("maxFrameSize", 64 * 1024 * 1024, minimum=1024)
        self.catchup = context.get_float("catchup", 0.5, minimum=0.0)
        self.batch_size = context.get_int("batchSize", 100, minimum=1)
        self.session_timeout = context.get_float("sessionTimeout", 10.0, minimum=1.0)
        self.round_read = min(self.interval / 4, 3.0)  # s a round waits for its read of the group
        self.ssl_context = client_ssl_context(context)
        self.endpoint_failures: Counter[str] = Counter()
        self._failing: set[str] = set()
        self._endpoints: dict[str, EndpointInfo] = {}  # "<context segment>/<ip:port:uuid>"
        self._agents: dict[str, int] = {}  # agent id -> znode creation time (ms)
        self._idle_clients: dict[str, EndpointClient] = {}  # per endpoint, the client no poll holds
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._assigned_members: list[str] = []
        self.round_state = RoundState.STARTING

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        connect, self.layout = resolve_zk(self.zk_hosts)
        me = AgentInfo(socket.gethostname(), int(time.time() * 1000), self.name)
        path = self.layout.agent(self.group, self.agent_id)
        known = self.layout.known_record(path)  # missing, not forgotten, once killed or cut off
        self._registration = Registration(
            connect, path, me.to_json(), session_timeout=self.session_timeout, auth=self.zk_auth, known=known
        )
        self._zk: KazooClient = self._registration.client  # one session: the znode's is the one watched
        horizon = max(self.round_read, self.catchup * self.interval) + 1.0  # the others decide by then
        self._session = SessionWatch(connect, self.session_timeout, horizon, self.name)  # cut off: a member?
        self._zk.add_listener(self._session.on_state)
        self._registration.start()
        refresh = min(5.0, self.interval)
        self._endpoint_watch = Membership(
            self._zk,
            self.layout.contexts,
            decode=EndpointInfo.from_znode,  # MalformedFrameError is a ValueError: left out, counted
            groups=lambda context: self.context_filter.fullmatch(context) is not None,
            refresh=refresh,
            on_change=self._on_endpoints,
            name=f"source {self.name} endpoints",
            auth=self.zk_auth,
        )
        self._agent_watch = Membership(
            self._zk,
            f"{self.layout.root}/agents",
            decode=AgentInfo.from_znode,
            groups=lambda group: group == self.group,
            refresh=refresh,
            on_change=self._on_agents,
            name=f"source {self.name} agents",
            auth=self.zk_auth,
        )
        self._pool = concurrent.futures.ThreadPoolExecutor(
            self.threads, thread_name_prefix=f"poll-{self.name}"
        )
        self._stop.clear()
        self._endpoint_watch.start()
        self._agent_watch.start()
        self._thread = threading.Thread(target=self._round_loop, name=f"{self.name}-rounds", daemon=True)
        self._thread.start()
        super().start()
        self.counters.set("RoundInterval", int(self.interval * 1000))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.round_state = RoundState.STOPPED
        self._endpoint_watch.stop()
        self._agent_watch.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._zk.remove_listener(self._session.on_state)  # a stop is no expiry
        self._registration.close()  # its client is the watches' too
        with self._lock:
            idle, self._idle_clients = list(self._idle_clients.values()), {}
        for client in idle:
            client.close()
        super().stop()

    # -- discovery (from the membership recipe) ----------------------------------------------

    def _on_endpoints(self, view: Mapping[str, tuple[Member, ...]]) -> None:
        endpoints: dict[str, EndpointInfo] = {}
        for members in view.values():
            for member in members:
                info: EndpointInfo = member.payload
                if all(f.fullmatch(info.labels.get(k, "")) for k, f in self.label_filters.items()):
                    endpoints[f"{self.layout.context(member.group).rpartition('/')[2]}/{member.name}"] = info
        with self._lock:
            gone = set(self._endpoints) - set(endpoints)
            self._endpoints = endpoints
            idle = [self._idle_clients.pop(key) for key in gone if key in self._idle_clients]
        for client in idle:
            client.close()
        self.counters.set("EndpointCount", len(endpoints))

    def _on_agents(self, view: Mapping[str, tuple[Member, ...]]) -> None:
        agents = {ZkLayout.context_name(m.name): m.created_ms for m in view.get(self.group, ())}
        with self._lock:
            self._agents = agents
        self.counters.set("AgentCount", len(agents))

    def _wait_discovered(self, timeout: float) -> bool:
        """Wait until endpoints and agents have both been read once."""
        deadline = time.monotonic() + timeout
        return self._endpoint_watch.ready.wait(timeout) and self._agent_watch.ready.wait(
            max(0.0, deadline - time.monotonic())
        )

    def _members_at(self, round_ms: int, agents: dict[str, int], fallback: bool = True) -> list[str]:
        members = members_at(round_ms, agents, self.interval * 500)  # settled half an interval
        return members or ([self.agent_id] if fallback else [])  # ZooKeeper unknown, or all new

    def _mine(self, round_ms: int) -> dict[str, EndpointInfo]:
        asked = time.monotonic()
        if not (fresh := self._agent_watch.read_now(timeout=self.round_read)):
            self.counters.add("StaleViewRoundCount")
        if not self._session.member(self._agent_watch.answered_at, asked if fresh else None):
            self.counters.add("CutOffRoundCount")
            return {}
        with self._lock:
            endpoints, agents = dict(self._endpoints), dict(self._agents)
        members = self._members_at(round_ms, agents)
        return {k: v for k, v in endpoints.items() if owner(k, members) == self.agent_id}

    # -- rounds ------------------------------------------------------------------------------

    def _round_loop(self) -> None:
        interval_ms = int(self.interval * 1000)
        self.round_state = RoundState.STARTING
        self._startup_round(interval_ms)
        next_round = (int(time.time() * 1000) // interval_ms + 1) * interval_ms
        while not self._stop.is_set():
            self.round_state = RoundState.WAITING
            if self._stop.wait(max(0.0, next_round / 1000 - time.time())):
                return
            round_ms = next_round
            self.round_state = RoundState.POLLING
            self.counters.add("RoundCount")
            self.counters.set(
                "RegistrationRefusedCount", self._endpoint_watch.refused + self._agent_watch.refused
            )
            self._poll_round(round_ms, self._mine(round_ms), round_ms + int(interval_ms * 0.95))
            self.round_state = RoundState.CATCHING_UP
            catchup_at = (round_ms + interval_ms * self.catchup) / 1000
            if self.catchup and not self._stop.wait(max(0.0, catchup_at - time.time())):
                self._catch_up(round_ms)  # stopping: none early (members stopping too are no deaths)
            next_round = next_round_after(self, round_ms, interval_ms)

    def _startup_round(self, interval_ms: int) -> None:
        """Poll the round under way if it began less than ``catchup`` of the interval ago."""
        round_ms = int(time.time() * 1000) // interval_ms * interval_ms
        late_ms = round_ms + int(interval_ms * self.catchup)
        if not self._wait_discovered(max(0.0, late_ms / 1000 - time.time())) or self._stop.is_set():
            return
        with self._lock:
            agents = dict(self._agents)
        if not self._members_at(round_ms, agents, fallback=False) and set(agents) - {self.agent_id}:
            return  # a group starting together: its first whole round is its first
        mine = self._mine(round_ms)
        if mine and time.time() * 1000 < late_ms:
            log.info(
                "source %s: started within round %d; polling its %d endpoints", self.name, round_ms, len(mine)
            )
            self.counters.add("StartupPollCount", len(mine))
            self.round_state = RoundState.POLLING
            self._poll_round(round_ms, mine, round_ms + int(interval_ms * 0.95))

    def _catch_up(self, round_ms: int) -> None:
        """Poll, for ``round_ms``, the endpoints of agents that died since it began."""
        with self._lock:
            endpoints, agents = dict(self._endpoints), dict(self._agents)
        before = self._assigned_members
        now_members = self._members_at(round_ms, agents)
        dead = [agent for agent in before if agent not in now_members]
        if not dead or self._session.state is not SessionState.MEMBER:  # cut off: nothing
            return
        orphans = {
            k: v
            for k, v in endpoints.items()
            if owner(k, before) in dead and owner(k, now_members) == self.agent_id
        }
        if orphans:
            log.info(
                "source %s: polling %d endpoints of %s for round %d", self.name, len(orphans), dead, round_ms
            )
            self.counters.add("CatchupPollCount", len(orphans))
            self._poll_round(round_ms, orphans, round_ms + int(self.interval * 950), catchup=True)

    def _poll_round(
        self, round_ms: int, endpoints: dict[str, EndpointInfo], deadline_ms: int, catchup: bool = False
    ) -> None:
        if not catchup:
            with self._lock:
                self._assigned_members = self._members_at(round_ms, dict(self._agents))
            self.counters.set("AssignedEndpointCount", len(endpoints))
            self.counters.set("LastRoundTime", round_ms)
        futures = {
            self._pool.submit(self._poll, key, info, round_ms, deadline_ms): key
            for key, info in endpoints.items()
        }
        pending: list[Event] = []
        try:
            for future in concurrent.futures.as_completed(
                futures, timeout=max(0.0, deadline_ms / 1000 - time.time())
            ):
                event = future.result()
                if event is not None:
                    pending.append(event)
                if len(pending) >= self.batch_size:
                    emit_until(self, pending, deadline_ms, self._stop)
                    pending = []
        except concurrent.futures.TimeoutError:
            late = [key for future, key in futures.items() if not future.done()]
            self.counters.add("PollTimeoutCount", len(late))
            log.warning(
                "source %s: %d endpoints did not answer before round %d's deadline",
                self.name,
                len(late),
                round_ms,
            )
        if pending:
            emit_until(self, pending, deadline_ms, self._stop)

    def _checkout(self, key: str, info: EndpointInfo) -> EndpointClient:
        """The endpoint's kept-alive client, taken out of its slot, or a fresh one."""
        with self._lock:
            client = self._idle_clients.pop(key, None)
        return client or EndpointClient(
            info.host,
            info.port,
            connect_timeout=self.connect_timeout,
            timeout=self.read_timeout,
            max_frame_size=self.max_frame_size,
            ssl_context=self.ssl_context,
        )

    def _checkin(self, key: str, client: EndpointClient, abandoned: bool) -> None:
        """Back into the slot, unless its poll was abandoned, the slot was filled meanwhile,
        the endpoint is gone or the source stopping: then closed."""
        with self._lock:
            keep = (
                not abandoned
                and client.is_open
                and key in self._endpoints
                and key not in self._idle_clients
                and not self._stop.is_set()
            )
            if keep:
                self._idle_clients[key] = client
        if not keep:
            client.close()

    def _poll(self, key: str, info: EndpointInfo, round_ms: int, deadline_ms: int) -> Event | None:
        self.counters.add("PollAttemptCount")
        client = self._checkout(key, info)
        batch, failure = None, None
        try:
            batch = client.snapshot()
        except BookkeeperError as exc:
            failure = exc
        finally:
            abandoned = time.time() * 1000 > deadline_ms  # counted in PollTimeoutCount already
            self._checkin(key, client, abandoned)
        if batch is None:  # late or not, the endpoint failed: counted, per endpoint too
            self.endpoint_failures[key] += 1
            self.counters.add("PollFailCount")
            if key not in self._failing:
                self._failing.add(key)
                log.warning("source %s: polling %s (%s) failed: %s", self.name, key, info.context, failure)
            return None
        if abandoned:  # its round has moved on without it
            return None
        if key in self._failing:
            self._failing.discard(key)
            log.info("source %s: %s answers again", self.name, key)
        self.counters.add("PollSuccessCount")
        headers = {
            "artimon.context": info.context,
            "artimon.endpoint": key.rpartition("/")[2],
            "artimon.round": str(round_ms),
            "artimon.agent": self.agent_id,
        }
        if self.ledger is not None:
            self.ledger.expect(round_ms, headers["artimon.endpoint"], len(batch))
        return Event(headers, encode_sample_batch(batch))
