"""Waiting for Ctrl-C or SIGTERM in the foreground commands."""

from __future__ import annotations

import signal
import threading


def stop_event() -> threading.Event:
    """An event set by SIGINT or SIGTERM (so both stop a command cleanly)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop
