"""The vhms sink carries a batch's series as columns from the channel to the store: no key
string is made per sample on the way, and an old peer is refused by name."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest
import thriftpy2.rpc

import bookkeeper.batch
import bookkeeper.labels
from bookkeeper import Bookkeeper
from bookkeeper.ground import encode_sample_batch
from collector_agent import Agent
from collector_agent.event import Event
from vhms import ProtocolVersionError, VhmsClient
from vhms.idl import vhms_thrift
from vhms.server import Store, VhmsService

CONFIG = """
a.channels = ch
a.sinks = out
a.channels.ch.type = memory
a.channels.ch.capacity = 1000
a.sinks.out.type = vhms
a.sinks.out.channel = ch
a.sinks.out.servers = s1@{host}:{port}
a.sinks.out.time = sample
a.sinks.out.timeout = 5
"""


def _no_key_strings(*_: object, **__: object) -> list[str]:
    raise AssertionError("a key string was made per sample on the sink's path")


def test_a_batch_goes_through_the_sink_into_vhms_without_a_key_string(
    monkeypatch: pytest.MonkeyPatch, wait: Callable[..., None]
) -> None:
    bk = Bookkeeper("shop", labels={"module": "web"}, environ={})
    for i in range(20):
        bk.integer("requests", path=f"/p{i}").set(i)
    bk.string("release", path="/").set("1.2")
    batch = bk.snapshot()
    monkeypatch.setattr(bookkeeper.labels, "series_keys", _no_key_strings)
    monkeypatch.setattr(bookkeeper.batch, "series_keys", _no_key_strings)
    shard = VhmsService(Store(), shard="s1", http_port=None)
    shard.start(register=False)
    try:
        host, port = shard.host, shard.port
        agent = Agent.from_properties(CONFIG.format(host=host, port=port), "a", {})
        agent.start()
        try:
            channel = agent.channels["ch"]
            with channel.transaction() as tx:
                tx.put(Event({}, encode_sample_batch(batch)))
            wait(lambda: shard.store.series == 21, 30, "the batch stored")
        finally:
            agent.stop()
        now = int(time.time() * 1000)
        with VhmsClient(host, port) as client:
            result = client.fetch("requests", now - 3_600_000, now + 60_000)
            assert len(result) == 20
            assert [text for _, text in client.strings("release").values()] == ["1.2"]
    finally:
        shard.stop()
    last = np.nanmax(result.values, axis=1)
    by_path = {
        labels["path"]: value for (_, labels), value in zip(result.series(), last.tolist(), strict=True)
    }
    assert by_path == {f"/p{i}": float(i) for i in range(20)}
    assert {labels["module"] for _, labels in result.series()} == {"web"}


def test_an_old_peer_sending_a_key_per_sample_is_refused_by_name() -> None:
    shard = VhmsService(Store(), shard="s1", http_port=None)
    shard.start(register=False)
    try:
        client = thriftpy2.rpc.make_client(
            vhms_thrift.Vhms,
            shard.host,
            shard.port,
            trans_factory=thriftpy2.transport.TFramedTransportFactory(),
            proto_factory=thriftpy2.protocol.TBinaryProtocolFactory(),
        )
        try:
            with pytest.raises(vhms_thrift.VhmsException) as refused:
                client.ingest(["a{}"], np.ones(1).tobytes(), np.zeros(1, dtype="<i8").tobytes(), [], [], b"")
        finally:
            client.close()
    finally:
        shard.stop()
    assert refused.value.kind == "ProtocolVersionError"
    assert "protocol 1" in refused.value.message and "protocol 2" in refused.value.message
    assert shard.store.series == 0
    assert issubclass(ProtocolVersionError, Exception)
