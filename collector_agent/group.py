"""Agent groups: which agents are alive, and which endpoints each one polls.

Agents of a group register the ephemeral ``/artimon/agents/<group>/<agent-id>``. An
endpoint belongs to the live agent with the highest rendezvous score
``blake2b(agent-id | endpoint)`` (highest random weight hashing: when an agent leaves or
joins, only the endpoints it gains or loses move).

For round ``R`` an agent counts the members whose znode was created before ``R`` began:
every agent reads the same creation times, so they agree on who polls what in that round,
and an agent that joins mid-round takes its share from the next round on (no endpoint is
polled twice for one round by a join).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["owner", "score"]


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
