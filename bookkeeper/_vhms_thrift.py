"""The VHMS service's IDL (``vhms.thrift``), shared here because both the store (``vhms``)
and the agent's sink (``collector_agent``) speak it and neither may import the other."""

from __future__ import annotations

from pathlib import Path

import thriftpy2

vhms_thrift = thriftpy2.load(str(Path(__file__).with_name("vhms.thrift")), module_name="vhms_service_thrift")
