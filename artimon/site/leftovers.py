"""What a site leaves on the machine, recorded so that a later run can remove it.

A :class:`SiteRecord` is ``/run/artimon-site/<prefix>.json``::

    {"prefix": "art-3fa9c1", "pid": 4242, "pid_started": 81234567,
     "bridge": "art-3fa9c1-br", "namespaces": ["art-3fa9c1-h1", ...], "links": ["art-3fa9c1-h1b", ...]}

written before the first link is made and removed after the last one is gone. ``pid`` is the
process that owns the site and ``pid_started`` its start time (field 22 of
``/proc/<pid>/stat``), so a PID reused by another process does not keep a dead run's site
alive. :func:`clean_leftovers` removes every recorded site whose owner is dead: it kills the
processes still in its namespaces (ours: only the harness puts processes there), deletes the
links, the namespaces, the bridge, then the record. Nothing without a record is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["STATE_DIR", "SiteError", "SiteRecord", "clean_leftovers", "live_sites"]

STATE_DIR = Path("/run/artimon-site")
MAX_RECORD_BYTES = 64 << 10


class SiteError(RuntimeError):
    """A site could not be made, checked or removed (the ``ip`` command's message in it)."""


def _started(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot, ``None`` if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


@dataclass(frozen=True)
class SiteRecord:
    """One site's owner and the names of what it made (see the module doc)."""

    path: Path
    prefix: str
    pid: int
    pid_started: int
    bridge: str
    namespaces: list[str]
    links: list[str]

    @classmethod
    def of_this_process(cls, path: Path, bridge: str, namespaces: list[str], links: list[str]) -> SiteRecord:
        started = _started(os.getpid())
        return cls(path, path.stem, os.getpid(), started or 0, bridge, namespaces, links)

    @classmethod
    def read(cls, path: Path) -> SiteRecord | None:
        """The record in ``path``; ``None`` for a file that is not one (too big, not JSON,
        a field missing, a name outside ``art-*``)."""
        try:
            if path.stat().st_size > MAX_RECORD_BYTES:
                return None
            fields = json.loads(path.read_text())
            record = cls(
                path,
                str(fields["prefix"]),
                int(fields["pid"]),
                int(fields["pid_started"]),
                str(fields["bridge"]),
                [str(name) for name in fields["namespaces"]],
                [str(name) for name in fields["links"]],
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        names = [record.prefix, record.bridge, *record.namespaces, *record.links]
        return record if all(name.startswith("art-") for name in names) else None

    @property
    def alive(self) -> bool:
        """Whether the owner still runs (the same process: its start time matches)."""
        return _started(self.pid) == self.pid_started

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fields = {key: value for key, value in asdict(self).items() if key != "path"}
        self.path.write_text(json.dumps(fields))

    def remove(self) -> None:
        """Kill what runs in the namespaces, delete links, namespaces and bridge, then the record."""
        for namespace in self.namespaces:
            pids = _run("ip", "netns", "pids", namespace).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for link in self.links:
            _run("ip", "link", "del", link)
        for namespace in self.namespaces:
            _run("ip", "netns", "del", namespace)
        _run("ip", "link", "del", self.bridge)
        self.path.unlink(missing_ok=True)


def _records(state_dir: Path) -> list[SiteRecord]:
    records = (SiteRecord.read(path) for path in sorted(state_dir.glob("art-*.json")))
    return [record for record in records if record is not None]


def live_sites(state_dir: Path = STATE_DIR) -> list[SiteRecord]:
    """The recorded sites whose owner still runs."""
    return [record for record in _records(state_dir) if record.alive]


def clean_leftovers(state_dir: Path = STATE_DIR) -> list[str]:
    """Remove every recorded site whose owner is dead; their prefixes."""
    removed = []
    for record in _records(state_dir):
        if not record.alive:
            record.remove()
            removed.append(record.prefix)
    return removed
