"""The four variable types."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["VarType"]


class VarType(IntEnum):
    """A variable's type; the numbers are the wire codes of ``endpoint.thrift``."""

    INTEGER = 0
    DOUBLE = 1
    BOOLEAN = 2
    STRING = 3
