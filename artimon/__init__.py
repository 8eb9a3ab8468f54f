"""The ``artimon`` command and the embedded all-in-one stack: wiring only."""

from __future__ import annotations

__all__: list[str] = []
