"""The round ledger: per polling round, how many samples each terminal has committed.

The ``artimon`` source says what a round produced (:meth:`RoundLedger.expect`: per endpoint,
the samples of its batch; :meth:`~RoundLedger.drop` for a batch its channel refused until
the round's deadline). The terminals say what they hold: the ``vhms`` sink after an ingest
the shards acknowledged (:meth:`~RoundLedger.commit` under terminal ``vhms``); the ``raw``
sink names the landing file each batch went into (:meth:`~RoundLedger.land`), and Spark's
``raw_ingest`` reports the landing files a committed micro-batch read
(:meth:`~RoundLedger.files_committed`: their batches become ``history`` commits). Terminals in
other processes report over the agent's monitoring port (``POST /ledger``,
:meth:`~RoundLedger.apply_report`). A terminal holds a batch once it reported at least the
batch's samples; a batch delivered twice (at-least-once) is counted once.

A round's state (``RoundLedger.view``)::

    WAITING --every expected endpoint's samples held by every terminal--> COMPLETE
    WAITING --a batch dropped at the source, or samples a terminal refused--> INCOMPLETE
        (for good: those samples will never be stored; the round still leaves the ledger
        only by eviction)

A round waits *somewhere*: at ``vhms`` in the channel of the ``vhms`` sink(s) that declared
themselves (``sink k1 (channel c1)``); at ``history`` in the landing files Spark has not
committed yet, or, not landed yet, in the ``raw`` sink's channel. A round awaits the
terminals declared when it was polled (the agent's own sinks declare theirs at start), and a
terminal of another process from its first report on.

Cost: a round keeps, per terminal, only the endpoints whose batch that terminal still lacks,
and a complete round its totals only; ``gauges`` looks at each round once, ``view`` reads the
lacking endpoints of the rounds that wait.

Bounded: the last ``max_rounds`` rounds (default 120); an older round is evicted and
counted (``RoundsEvictedCount``; ``IncompleteRoundsEvictedCount`` if it was not complete).
Commits of rounds the ledger does not hold (evicted, or polled by another agent) are
counted (``UntrackedCommitCount``) and otherwise ignored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TERMINALS", "RoundLedger", "round_of"]

log = logging.getLogger(__name__)

TERMINALS = ("vhms", "history")
MAX_REPORT_ITEMS = 100_000  # files or commits in one report
_MAX_NAME = 1024  # a landing file's name, an endpoint's key


@dataclass
class _Round:
    """A round's batches: per terminal, the endpoints whose batch it still lacks, and totals.
    The per-endpoint maps shrink as the terminals take the batches: a complete round keeps
    its totals only."""

    expected: dict[str, int] = field(default_factory=dict)  # endpoint -> samples, until complete
    endpoints: int = 0
    samples: int = 0
    pending: dict[str, dict[str, int]] = field(default_factory=dict)  # terminal -> endpoint -> samples
    held: Counter[str] = field(default_factory=Counter)  # terminal -> samples it holds
    landed: dict[str, str] = field(default_factory=dict)  # endpoint -> landing file, until in the history
    dropped: dict[str, int] = field(default_factory=dict)  # endpoint -> samples dropped at the source
    refused: Counter[str] = field(default_factory=Counter)  # terminal -> samples refused

    @property
    def state(self) -> str:
        if self.dropped or self.refused:
            return "incomplete"
        return "waiting" if not self.pending or any(self.pending.values()) else "complete"


class RoundLedger:
    """See the module doc. Thread-safe; ``clock`` gives epoch seconds."""

    def __init__(self, max_rounds: int = 120, *, clock: Callable[[], float] = time.time) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, not {max_rounds}")
        self.max_rounds = max_rounds
        self._clock = clock
        self._lock = threading.Lock()
        self._rounds: dict[int, _Round] = {}  # by round time
        self._files: dict[str, list[tuple[int, str, int]]] = {}  # landing file -> (round, endpoint, samples)
        self._where: dict[str, dict[str, int]] = {}  # terminal -> places that declared it -> how many times
        self._reported: set[str] = set()  # terminals that reported from another process
        self.counts: Counter[str] = Counter()

    # -- what the components say -----------------------------------------------------------

    def declare(self, terminal: str, where: str) -> None:
        """A component in front of ``terminal`` started (``where``: ``sink k1 (channel c1)``);
        the rounds expected from now on wait for it."""
        with self._lock:
            places = self._where.setdefault(_terminal(terminal), {})
            places[where] = places.get(where, 0) + 1

    def withdraw(self, terminal: str, where: str) -> None:
        """The component that declared ``where`` stopped."""
        with self._lock:
            places = self._where.get(terminal, {})
            if places.get(where, 0) > 1:
                places[where] -= 1
            else:
                places.pop(where, None)

    def expect(self, round_ms: int, endpoint: str, samples: int) -> None:
        """The source polled ``samples`` samples of ``endpoint`` in round ``round_ms``."""
        with self._lock:
            entry = self._rounds.get(round_ms)
            if entry is None:
                entry = self._rounds[round_ms] = _Round()
                self._evict()
            before = entry.expected.get(endpoint)
            if before is not None and before >= samples:
                return
            entry.endpoints += before is None
            entry.samples += samples - (before or 0)
            entry.expected[endpoint] = samples
            for terminal in self._awaited() | set(entry.pending):
                entry.pending.setdefault(terminal, {})[endpoint] = samples

    def drop(self, round_ms: int, endpoint: str) -> None:
        """The channel refused the batch until the round's deadline: it is lost."""
        with self._lock:
            entry = self._rounds.get(round_ms)
            if entry is not None and endpoint in entry.expected:
                entry.dropped[endpoint] = entry.expected[endpoint]

    def commit(self, terminal: str, round_ms: int, endpoint: str, samples: int) -> None:
        """``terminal`` holds ``samples`` samples of ``endpoint``'s batch of round ``round_ms``."""
        with self._lock:
            self._commit(_terminal(terminal), round_ms, endpoint, samples)

    def refuse(self, terminal: str, rounds: Iterable[int], samples: int) -> None:
        """``terminal`` refused ``samples`` samples of a delivery that held ``rounds``."""
        with self._lock:
            for round_ms in set(rounds):
                entry = self._rounds.get(round_ms)
                if entry is not None:
                    entry.refused[terminal] += samples

    def land(self, file: str, round_ms: int, endpoint: str, samples: int) -> None:
        """The ``raw`` sink wrote the batch into landing file ``file`` (its final name)."""
        with self._lock:
            entry = self._rounds.get(round_ms)
            if entry is None:
                self.counts["UntrackedCommitCount"] += 1
            elif endpoint in entry.pending.get("history", {}):
                entry.landed[endpoint] = file
                self._files.setdefault(file, []).append((round_ms, endpoint, samples))

    def files_committed(self, files: Iterable[str]) -> int:
        """``raw_ingest`` committed these landing files (names, or URIs: the last segment is
        the name) into the history; returns how many batches that completed."""
        done = 0
        with self._lock:
            for name in files:
                for round_ms, endpoint, samples in self._files.pop(name.rpartition("/")[2], ()):
                    self._commit("history", round_ms, endpoint, samples)
                    done += 1
        return done

    def apply_report(self, report: Any) -> int:
        """A report of a terminal in another process (``POST /ledger``)::

            {"files": ["raw-1764212400000-1.avro", ...]}            (raw_ingest)
            {"terminal": "vhms", "commits": [[round_ms, "ip:port:uuid", samples], ...]}

        ``ValueError`` (counted in ``ReportsRefusedCount``) names what is wrong; returns how
        many batches it recorded."""
        try:
            files, terminal, commits = _parse_report(report)
        except ValueError:
            with self._lock:
                self.counts["ReportsRefusedCount"] += 1
            raise
        with self._lock:
            self.counts["ReportsReceivedCount"] += 1
            if commits:
                self._reported.add(terminal)
            for round_ms, endpoint, samples in commits:
                self._commit(terminal, round_ms, endpoint, samples)
        return self.files_committed(files) + len(commits)

    # -- what it says ------------------------------------------------------------------------

    def view(self) -> dict[str, Any]:
        """The ``/ledger`` answer: totals, then each round held, newest first."""
        now_ms = int(self._clock() * 1000)
        with self._lock:
            terminals = {name: sorted(places) for name, places in sorted(self._where.items()) if places}
            rounds = [
                self._describe(round_ms, self._rounds[round_ms], terminals)
                for round_ms in sorted(self._rounds, reverse=True)
            ]
            counts = dict(self.counts)
        unfinished = [entry["round"] for entry in rounds if entry["state"] != "complete"]
        return {
            "rounds_tracked": len(rounds),
            "rounds_incomplete": len(unfinished),
            "oldest_incomplete_round": min(unfinished) if unfinished else None,
            "oldest_incomplete_age_s": round((now_ms - min(unfinished)) / 1000, 3) if unfinished else 0.0,
            "terminals": terminals,
            "evicted": counts.get("RoundsEvictedCount", 0),
            "evicted_incomplete": counts.get("IncompleteRoundsEvictedCount", 0),
            "rounds": rounds,
        }

    def gauges(self) -> dict[str, float]:
        """The ``LEDGER.rounds`` group of ``/metrics`` (the cost of a look at each round)."""
        now_ms = int(self._clock() * 1000)
        with self._lock:
            unfinished = [round_ms for round_ms, entry in self._rounds.items() if entry.state != "complete"]
            tracked, counts = len(self._rounds), dict(self.counts)
        return {
            "RoundsTracked": tracked,
            "RoundsIncomplete": len(unfinished),
            "OldestIncompleteRoundAgeSeconds": round((now_ms - min(unfinished)) / 1000, 3)
            if unfinished
            else 0.0,
            **{name: counts.get(name, 0) for name in _COUNTED},
        }

    # -- inside ------------------------------------------------------------------------------

    def _awaited(self) -> set[str]:
        return {terminal for terminal, places in self._where.items() if places} | self._reported

    def _evict(self) -> None:
        while len(self._rounds) > self.max_rounds:
            round_ms = min(self._rounds)
            entry = self._rounds.pop(round_ms)
            self.counts["RoundsEvictedCount"] += 1
            if entry.state != "complete":
                self.counts["IncompleteRoundsEvictedCount"] += 1
                log.warning("round ledger: round %d left the ledger incomplete", round_ms)
            for file in set(entry.landed.values()):
                kept = [item for item in self._files.get(file, ()) if item[0] != round_ms]
                if kept:
                    self._files[file] = kept
                else:
                    self._files.pop(file, None)

    def _commit(self, terminal: str, round_ms: int, endpoint: str, samples: int) -> None:
        entry = self._rounds.get(round_ms)
        if entry is None or (terminal not in entry.pending and not entry.expected):
            self.counts["UntrackedCommitCount"] += 1
            return
        if terminal not in entry.pending:  # a terminal heard of for the first time
            entry.pending[terminal] = dict(entry.expected)
        lacking = entry.pending[terminal].get(endpoint)
        if lacking is None or samples < lacking:  # held already (counted once), or not whole
            return
        del entry.pending[terminal][endpoint]
        entry.held[terminal] += lacking
        if terminal == "history":
            entry.landed.pop(endpoint, None)
        if not entry.pending[terminal]:  # a dict emptied by deletes keeps its table: clear() frees it
            entry.pending[terminal].clear()
            if terminal == "history":
                entry.landed.clear()
            if entry.state == "complete":
                entry.expected.clear()

    def _describe(self, round_ms: int, entry: _Round, places: Mapping[str, list[str]]) -> dict[str, Any]:
        described: dict[str, Any] = {
            "round": round_ms,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(round_ms / 1000)),
            "state": entry.state,
            "endpoints": entry.endpoints,
            "expected": entry.samples,
            "committed": {
                terminal: min(entry.held[terminal], entry.samples) for terminal in sorted(entry.pending)
            },
        }
        if entry.dropped:
            described["dropped_at_source"] = sum(entry.dropped.values())
        if entry.refused:
            described["refused"] = dict(entry.refused)
        described["waiting"] = [
            {
                "terminal": terminal,
                "endpoints": len(lacking),
                "samples": sum(lacking.values()),
                "where": _where_waiting(entry, terminal, lacking, places.get(terminal, [])),
            }
            for terminal, lacking in sorted(entry.pending.items())
            if lacking
        ]
        return described


_COUNTED = (
    "RoundsEvictedCount",
    "IncompleteRoundsEvictedCount",
    "UntrackedCommitCount",
    "ReportsReceivedCount",
    "ReportsRefusedCount",
)
MAX_FILES_NAMED = 5  # landing files named per waiting round; the rest counted


def _where_waiting(entry: _Round, terminal: str, lacking: Mapping[str, int], places: list[str]) -> list[str]:
    dropped = sum(1 for endpoint in lacking if endpoint in entry.dropped)
    files = sorted({entry.landed[e] for e in lacking if terminal == "history" and e in entry.landed})
    in_channel = (
        len(lacking) - dropped - sum(1 for e in lacking if terminal == "history" and e in entry.landed)
    )
    where = [f"landing file {name} (not yet committed by raw_ingest)" for name in files[:MAX_FILES_NAMED]]
    if len(files) > MAX_FILES_NAMED:
        where.append(f"{len(files) - MAX_FILES_NAMED} more landing files")
    if in_channel:
        where += places or [f"no {terminal} report yet"]
    if dropped:
        where.append("dropped at the source")
    return sorted(where)


def round_of(headers: Mapping[str, str]) -> tuple[int, str] | None:
    """The (round, endpoint) an event's headers name, if a polling source stamped them."""
    round_ms, endpoint = headers.get("artimon.round", ""), headers.get("artimon.endpoint")
    return (int(round_ms), endpoint) if round_ms.isdigit() and endpoint else None


def _terminal(name: str) -> str:
    if name not in TERMINALS:
        raise ValueError(f"terminal {name!r} is none of {', '.join(TERMINALS)}")
    return name


def _parse_report(report: Any) -> tuple[list[str], str, list[tuple[int, str, int]]]:
    if not isinstance(report, dict) or not report or set(report) - {"files", "terminal", "commits"}:
        raise ValueError("a report is an object with files, or terminal and commits")
    files = report.get("files", [])
    if not isinstance(files, list) or len(files) > MAX_REPORT_ITEMS:
        raise ValueError(f"files must be a list of at most {MAX_REPORT_ITEMS} names")
    if not all(isinstance(name, str) and 0 < len(name) <= _MAX_NAME for name in files):
        raise ValueError(f"a file name is a string of 1 to {_MAX_NAME} characters")
    commits = report.get("commits", [])
    if not isinstance(commits, list) or len(commits) > MAX_REPORT_ITEMS:
        raise ValueError(f"commits must be a list of at most {MAX_REPORT_ITEMS} entries")
    terminal = report.get("terminal", "history" if not commits else None)
    if not isinstance(terminal, str):
        raise ValueError("commits need a terminal")
    _terminal(terminal)
    parsed = []
    for item in commits:
        if not (
            isinstance(item, list)
            and len(item) == 3
            and type(item[0]) is int
            and isinstance(item[1], str)
            and 0 < len(item[1]) <= _MAX_NAME
            and type(item[2]) is int
            and item[2] >= 0
        ):
            raise ValueError(f"a commit is [round_ms, endpoint, samples], not {str(item)[:100]!r}")
        parsed.append((item[0], item[1], item[2]))
    return files, terminal, parsed
