"""Process trees from Linux's ``/proc``, for tests that kill a parent and check that its
children went with it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["descendants", "running"]


def _parent_of(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return None


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _parent_of(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return [p for p in found if running(p)]


def _task_running(status_path: Path) -> bool:
    try:
        status = status_path.read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("State:"):
            return line.split()[1] not in ("Z", "X")
    return False


def running(pid: int) -> bool:
    """Whether any thread of ``pid`` is still alive: not gone, not a zombie (a killed
    process whose parent died stays a zombie until init reaps it, and the main thread of a
    JVM is one while its other threads, which still hold its files, are ending)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    return any(_task_running(task / "status") for task in tasks)
