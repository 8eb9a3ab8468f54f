"""Artimon's ``vhms`` package: not built yet, see README.md beside this file."""

from __future__ import annotations

__all__: list[str] = []
