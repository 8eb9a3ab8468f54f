"""The VHMS service's IDL (``vhms.thrift``): the service serves it, the sharded client
calls it (``vhms.client``)."""

from __future__ import annotations

from pathlib import Path

import thriftpy2

vhms_thrift = thriftpy2.load(str(Path(__file__).with_name("vhms.thrift")), module_name="vhms_service_thrift")
