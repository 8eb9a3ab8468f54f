"""The local SparkSession listens on loopback only: its driver's RPC and block manager
default to the host's outward address, reachable from the network."""

from __future__ import annotations

import ipaddress
import os
from typing import Any

import pytest

from bookkeeper.testing import listening


@pytest.mark.spark
def test_a_local_session_listens_on_loopback_only(spark: Any) -> None:
    assert spark.range(3).count() == 3  # the driver and its block manager are up
    listeners = listening(os.getpid())  # the JVM is a child of this process
    assert listeners, "no listener found"
    assert all(ipaddress.ip_address(entry.host).is_loopback for entry in listeners), listeners
