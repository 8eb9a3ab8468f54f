"""The ``file`` channel's part in a put that several durable channels must all keep or all
undo (a :class:`~collector_agent.channels.base.PutGroup`), across a crash.

Each member writes the group's batch with a row of ``groups(seq, txn, peers, decided)`` at
``prepare`` (``decided`` 0: undecided; ``peers``: the other members' databases, JSON), sets
``decided`` to 1 at ``decide``, which the channel processor calls on every member once all
are prepared and before any commits, and deletes the row with its batch. So after a crash:

- a member whose row is decided keeps the batch (its own outcome);
- a member whose row is undecided asks its peers: if one has decided the group, every
  member had prepared it, and this one keeps it too; if every peer answers and none has,
  nobody acknowledged the put, and this member undoes it (``EventUndoneCount``);
- a peer that cannot be read (its database gone, damaged, moved) leaves the question open:
  the batch is kept (at least once, never lost) and a warning names the peer.

A member never deletes a decided row before every member has decided (commits, and so
takes, come after the last ``decide``), so a peer's undecided row never outlives the
evidence it needs. A salvaged database keeps no ``groups`` row: its batches are kept.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GROUPS_SCHEMA", "Resolution", "resolve_in_doubt"]

log = logging.getLogger(__name__)

# no index on txn: a peer's lookup happens only at a start after a crash, over a table that
# holds a row per waiting batch, and an index would be one more page written by every put
GROUPS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS groups (seq INTEGER PRIMARY KEY, txn TEXT NOT NULL,"
    " peers TEXT NOT NULL, decided INTEGER NOT NULL DEFAULT 0)",
)
_PEER_TIMEOUT = 10.0  # seconds a peer's database may stay locked by its writer


@dataclass
class Resolution:
    """What a start found undecided: batches kept, batches undone and their events, and
    the peers that could not be read."""

    kept: int = 0
    undone: int = 0
    undone_events: int = 0
    unreadable: set[str] = field(default_factory=set)


def _decided_by(peer: str, txn: str) -> bool:
    """Whether ``peer``'s database holds ``txn`` decided; ``sqlite3.Error`` or ``OSError``
    when it cannot be read (a database without a ``groups`` table has decided nothing)."""
    if not Path(peer).is_file():
        raise OSError(f"{peer} does not exist")
    # read-write (never created: mode=rw) so that SQLite may roll back a journal a crash left
    uri = f"{Path(peer).as_uri()}?mode=rw"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=_PEER_TIMEOUT)) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "groups" not in tables:
            return False
        found = conn.execute("SELECT 1 FROM groups WHERE txn = ? AND decided = 1", (txn,)).fetchone()
    return found is not None


def resolve_in_doubt(conn: sqlite3.Connection, name: str) -> Resolution:
    """Decide every undecided batch of the database ``conn`` writes (see the module doc), in
    one SQLite transaction; ``name`` is the channel's, for the log."""
    report = Resolution()
    rows = conn.execute(
        "SELECT g.seq, g.txn, g.peers, b.count FROM groups g LEFT JOIN batches b ON b.seq = g.seq"
        " WHERE g.decided = 0"
    ).fetchall()
    if not rows:
        return report
    keep: list[tuple[int]] = []
    undo: list[tuple[int]] = []
    for seq, txn, peers, count in rows:
        decided = False
        unreadable = []
        for peer in json.loads(peers):
            try:
                decided = _decided_by(peer, txn)
            except (sqlite3.Error, OSError, ValueError) as exc:
                unreadable.append(f"{peer} ({exc})")
                continue
            if decided:
                break
        if decided or unreadable:
            keep.append((seq,))
            report.kept += 1
            report.unreadable.update(unreadable if not decided else [])
        else:
            undo.append((seq,))
            report.undone += 1
            report.undone_events += count or 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("UPDATE groups SET decided = 1 WHERE seq = ?", keep)
        conn.executemany("DELETE FROM batches WHERE seq = ?", undo)
        conn.executemany("DELETE FROM consumed WHERE seq = ?", undo)
        conn.executemany("DELETE FROM groups WHERE seq = ?", undo)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    if report.unreadable:
        log.warning(
            "channel %s: kept %d batches of interrupted multi-channel puts whose peers cannot be read: %s",
            name,
            report.kept,
            "; ".join(sorted(report.unreadable)),
        )
    if report.undone:
        log.warning(
            "channel %s: undid %d batches (%d events) of multi-channel puts a crash interrupted before "
            "every channel held them (none was acknowledged)",
            name,
            report.undone,
            report.undone_events,
        )
    return report
