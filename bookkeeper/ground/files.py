"""Making a file's bytes, or a directory's entries, survive a power loss."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_path"]


def fsync_path(path: Path | str) -> None:
    """fsync a file (its data) or a directory (the names in it: a new or renamed file's
    name survives a power loss only once its directory is synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
