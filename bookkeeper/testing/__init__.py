"""What only tests need: a bookkeeper test application in its own process (``start_app``,
``python -m bookkeeper.testing``), a way to expire a ZooKeeper session as a partition would
(``expire_session``), what a process listens on (``listening``) and process trees
(``descendants``, ``running``). The launchers of real servers are product code:
:mod:`artimon.servers`."""

from __future__ import annotations

from bookkeeper.testing.apps import AppProcess, expire_session, formula_value, populate, start_app
from bookkeeper.testing.processes import descendants, running
from bookkeeper.testing.sockets import Listener, listening

__all__ = [
    "AppProcess",
    "Listener",
    "descendants",
    "expire_session",
    "formula_value",
    "listening",
    "populate",
    "running",
    "start_app",
]
