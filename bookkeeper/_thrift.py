"""The endpoint's Thrift module, loaded once from ``endpoint.thrift``."""

from __future__ import annotations

from pathlib import Path

import thriftpy2

PROTOCOL_VERSION = 1

endpoint_thrift = thriftpy2.load(
    str(Path(__file__).with_name("endpoint.thrift")), module_name="bookkeeper_endpoint_thrift"
)
