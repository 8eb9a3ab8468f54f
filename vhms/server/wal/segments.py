"""The write-ahead log's segment files: numbered in 8 digits or more (``00000001``), one
directory, written in order and deleted from the oldest."""

from __future__ import annotations

import os
import re
from pathlib import Path

from bookkeeper.ground import fsync_path

__all__ = ["SEGMENT_BYTES", "remove_segments", "segments"]

SEGMENT_BYTES = 64 << 20
_SEGMENT_NAME = re.compile(r"\d{8,}")


def segments(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The log's segment files (their number in 8 digits or more) in ``directory``, by number."""
    source = Path(directory)
    if not source.is_dir():
        return []
    found = [(int(path.name), path) for path in source.iterdir() if _SEGMENT_NAME.fullmatch(path.name)]
    return sorted(found)


def remove_segments(directory: str | os.PathLike[str], before: int | None = None) -> int:
    """Delete the segments numbered below ``before`` (every one with ``None``); how many."""
    removed = 0
    for number, path in segments(directory):
        if before is None or number < before:
            path.unlink(missing_ok=True)
            removed += 1
    if removed:
        fsync_path(Path(directory))
    return removed
