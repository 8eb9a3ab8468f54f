"""Agent groups: which agents are alive, and which endpoints each one polls.

Agents of a group register the ephemeral ``/artimon/agents/<group>/<agent-id>``. An
endpoint belongs to the live agent with the highest rendezvous score
``blake2b(agent-id | endpoint)`` (highest random weight hashing: when an agent leaves or
joins, only the endpoints it gains or loses move).

For round ``R`` an agent counts the members whose znode was created at least ``margin``
(half an interval) before ``R`` began (:func:`members_at`): every agent reads the same
creation times, and by then every member's view has the znode, so they agree on who polls
what in that round; an agent that joins later takes its share from a later round (no
endpoint is polled twice for one round by a join, even when the join is seen by some members
a moment before the others). A group starting together, none of its members that old, counts
those created before ``R``. The agents read the group after a ZooKeeper ``sync`` at each
round's start (``Membership.read_now``), so a watch running late does not leave one of them
on an older view than the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["members_at", "owner", "score"]


def score(agent_id: str, endpoint: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{agent_id}|{endpoint}".encode(), digest_size=8).digest(), "big")


def owner(endpoint: str, agents: Iterable[str]) -> str | None:
    """The agent that polls ``endpoint`` among ``agents`` (``None`` if there is none)."""
    best: tuple[int, str] | None = None
    for agent in agents:
        candidate = (score(agent, endpoint), agent)
        if best is None or candidate > best:
            best = candidate
    return best[1] if best else None


def members_at(round_ms: int, created: dict[str, int], margin_ms: float) -> list[str]:
    """The members of round ``round_ms`` among agents and their znodes' creation times
    (epoch ms): those settled ``margin_ms`` before it, or, when none is, those created
    before it."""
    settled = [agent for agent, t in created.items() if t < round_ms - margin_ms]
    return settled or [agent for agent, t in created.items() if t < round_ms]
