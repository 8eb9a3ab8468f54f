"""Flume's Thrift IDL, loaded once, and the protocol factories by config name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import thriftpy2
from thriftpy2.protocol import TCompactProtocolFactory, TCyBinaryProtocolFactory

from collector_agent.context import Context

__all__ = ["flume_thrift", "protocol_factory"]

flume_thrift = thriftpy2.load(str(Path(__file__).with_name("flume.thrift")), module_name="flume_thrift")


def protocol_factory(context: Context) -> Any:
    """``protocol = compact`` (Flume's default) or ``binary``."""
    name = context.get_str("protocol", "compact").strip().lower()
    if name == "compact":
        return TCompactProtocolFactory()  # type: ignore[no-untyped-call]
    if name == "binary":
        return TCyBinaryProtocolFactory()  # type: ignore[no-untyped-call]
    raise context.error("protocol", f"{name!r} is neither compact nor binary")
