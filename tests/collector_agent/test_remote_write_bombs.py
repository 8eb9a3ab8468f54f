"""Bodies made to cost more than they weigh (issue 28's probe), in remote write 1.0 and 2.0
and OTLP: an agent of its own process, its memory read from /proc while they are answered."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cramjam
import httpx
import pytest

from artimon.servers import free_port
from artimon.stack import agent_properties
from collector_agent.remote_write import messages

MIB = 1024 * 1024


def snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def one_series(inner: bytes) -> bytes:
    return b"\x0a" + varint(len(inner)) + inner


NAMED = b"\x0a\x0e\x0a\x08__name__\x12\x02ab"  # the label __name__="ab"
V1 = ("/api/v1/write", {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"})
V2 = (
    "/api/v1/write",
    {**V1[1], "Content-Type": "application/x-protobuf;proto=io.prometheus.write.v2.Request"},
)
OTLP = ("/api/v1/otlp/v1/metrics", {"Content-Encoding": "gzip", "Content-Type": "application/x-protobuf"})
BOMBS = {
    # the probe's: 3.1 MB of snappy, 64 MiB of empty series; and its 188 KB variant
    "empty-series-64MiB": (*V1, snappy(b"\x0a\x00" * 33_554_424)),
    "empty-series-4MiB": (*V1, snappy(b"\x0a\x00" * 2_000_000)),
    # under the default maxDecodedBytes: decompressed, then refused at the 100,001st series
    "empty-series-32MiB": (*V1, snappy(b"\x0a\x00" * (16 * MIB - 8))),
    # one named series of 5M empty labels, samples, exemplars, unknown fields
    **{
        f"series-of-{what}": (*V1, snappy(one_series(NAMED + tag * 5_000_000)))
        for what, tag in (("labels", b"\x0a\x00"), ("samples", b"\x12\x00"), ("exemplars", b"\x1a\x00"))
    },
    "series-of-unknown-fields": (*V1, snappy(one_series(NAMED + b"\x28\x00" * 5_000_000))),
    # remote write 2.0: 16M empty series; 30M label references of one byte in one series
    "v2-empty-series-32MiB": (*V2, snappy(b"\x2a\x00" * (16 * MIB - 8))),
    "v2-label-refs": (
        *V2,
        snappy(b"\x2a" + varint(30_000_005) + b"\x0a" + varint(30_000_000) + bytes(30_000_000)),
    ),
    # OTLP in gzip: 32 MiB of empty resource_metrics in 32 KB
    "otlp-empty-resources-32MiB": (*OTLP, gzip.compress(b"\x0a\x00" * (16 * MIB - 8))),
}


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak since the last reset) of ``pid``, in bytes."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {key: int(fields[key].split()[0]) * 1024 for key in ("VmRSS", "VmHWM")}


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux 4.0+)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


def valid_body() -> bytes:
    request = messages["WriteRequest"]()
    series = request.timeseries.add()
    series.labels.add(name="__name__", value="rw.after")
    series.samples.add(value=1.0, timestamp=int(time.time() * 1000))
    return snappy(request.SerializeToString())


def post(url: str, body: bytes, headers: dict[str, str] = V1[1]) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=120)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """``artimon agent`` with a remote-write receiver of default limits: its pid and base URL."""
    port = free_port()
    conf = tmp_path_factory.mktemp("bombs") / "agent.properties"
    receiver = {"type": "prometheus_remote_write", "bind": "127.0.0.1", "port": port, "channels": "c"}
    conf.write_text(
        agent_properties(
            "a",
            sources={"rw": receiver},
            channels={"c": {"type": "memory", "capacity": 1000}},
            sinks={"k": {"type": "null", "channel": "c"}},
        )
    )
    command = [sys.executable, "-m", "artimon", "agent", "-f", str(conf), "-n", "a", "--monitor-port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if post(url + V1[0], valid_body()).status_code == 204:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "the agent did not start"
            time.sleep(0.1)
        yield process.pid, url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_bomb_is_answered_400_within_64_mib_and_2_s_of_cpu(agent: tuple[int, str], bomb: str) -> None:
    pid, url = agent
    path, headers, body = BOMBS[bomb]
    assert len(body) < 8 * MIB  # under maxBodySize: it reaches the decoder
    before = memory(pid)["VmRSS"]
    reset_peak(pid)
    cpu = cpu_seconds(pid)
    answer = post(url + path, body, headers)
    assert answer.status_code == 400, answer.text
    assert any(f"max{limit}" in answer.text for limit in ("DecodedBytes", "Series", "Samples", "Elements"))
    rise = memory(pid)["VmHWM"] - before
    assert rise < 64 * MIB, f"{bomb}: RSS rose by {rise / MIB:.0f} MiB"
    assert cpu_seconds(pid) - cpu < 2.0
    assert post(url + V1[0], valid_body()).status_code == 204


def test_64_bombs_at_once_keep_the_agent_under_1_gib(agent: tuple[int, str]) -> None:
    pid, url = agent
    bombs = [BOMBS[name] for name in BOMBS for _ in range(64 // len(BOMBS) + 1)][:64]
    reset_peak(pid)
    with ThreadPoolExecutor(64) as pool:
        statuses = list(pool.map(lambda bomb: post(url + bomb[0], bomb[2], bomb[1]).status_code, bombs))
    assert statuses == [400] * 64
    peak = memory(pid)["VmHWM"]
    assert peak < 1024 * MIB, f"peak RSS {peak / MIB:.0f} MiB"
    assert post(url + V1[0], valid_body()).status_code == 204
