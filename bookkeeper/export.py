"""Periodic export of a bookkeeper to ``<directory>/<module>.artimon`` (the text format)."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bookkeeper.textformat import format_line

if TYPE_CHECKING:
    from bookkeeper._bookkeeper import Bookkeeper

__all__ = ["FileExporter", "write_snapshot_file"]

log = logging.getLogger(__name__)


def write_snapshot_file(bk: Bookkeeper, path: Path) -> int:
    """Write every variable of ``bk`` to ``path`` atomically: ``<path>.<ts>``, fsync, rename.
    Returns the number of lines written."""
    batch = bk.snapshot()
    tmp = path.with_name(f"{path.name}.{batch.snapshot_ms}")
    count = 0
    with open(tmp, "w", encoding="utf-8") as out:
        for sample in batch.samples():
            out.write(format_line(sample))
            out.write("\n")
            count += 1
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return count


class FileExporter:
    """Writes ``<module>.artimon`` every ``every`` seconds from a daemon thread.

    ``module`` defaults to the framework label ``module``, else the context. Write errors
    are counted in ``errors`` and logged once until a write succeeds again: instrumentation
    never takes the application down.
    """

    def __init__(
        self, bk: Bookkeeper, directory: Path, *, every: float = 60.0, module: str | None = None
    ) -> None:
        if every <= 0:
            raise ValueError(f"export period must be positive, got {every}")
        self.bookkeeper = bk
        name = module or bk.framework_labels.get("module") or bk.context
        if "/" in name or name in (".", ".."):
            raise ValueError(f"module name {name!r} cannot be a file name")
        self.path = Path(directory) / f"{name}.artimon"
        self.every = every
        self.writes = 0
        self.errors = 0
        self._failing = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"export {self.path}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def export_now(self) -> None:
        """Write the file once, now; errors counted and logged once per burst."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_snapshot_file(self.bookkeeper, self.path)
        except OSError as exc:
            self.errors += 1
            if not self._failing:
                log.warning("cannot export %s: %s (counting further failures)", self.path, exc)
            self._failing = True
            return
        self._failing = False
        self.writes += 1

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.export_now()
            next_at += self.every
            self._stop.wait(max(0.0, next_at - time.monotonic()))
