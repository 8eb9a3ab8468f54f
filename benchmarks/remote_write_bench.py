"""Prometheus remote write into the agent: decoding alone, and whole requests answered 204.

    python benchmarks/remote_write_bench.py [--series 2000] [--requests 200]

Requests are shaped as a Prometheus sends them (``max_samples_per_send`` series of one
sample each, five labels, the same series request after request). ``decode`` is
:func:`collector_agent.remote_write.decode_write_request` on the first request (every
series checked) and on the next ones (checked series remembered); ``http`` posts them one
after another to a ``prometheus_remote_write`` source whose memory channel a ``null`` sink
drains, each answered once committed.
"""

from __future__ import annotations

import argparse
import time

import cramjam
import httpx
from _report import report

from artimon.stack import agent_properties
from collector_agent import Agent
from collector_agent.remote_write import decode_write_request, messages

AGENT = agent_properties(
    "b",
    sources={"prom": {"type": "prometheus_remote_write", "bind": "127.0.0.1", "port": 0, "channels": "ch"}},
    channels={"ch": {"type": "memory", "capacity": 10000}},
    sinks={"drop": {"type": "null", "channel": "ch"}},
)


def request_body(series: int, at_ms: int) -> bytes:
    request = messages["WriteRequest"]()
    for i in range(series):
        one = request.timeseries.add()
        for name, value in (
            ("__name__", "node_cpu_seconds_total"),
            ("cpu", str(i % 64)),
            ("mode", ("idle", "user", "system", "iowait")[i % 4]),
            ("instance", f"host{i // 256}:9100"),
            ("job", "node"),
        ):
            one.labels.add(name=name, value=value)
        one.samples.add(value=float(i), timestamp=at_ms)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=2000, help="series (samples) per request")
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    now = int(time.time() * 1000)
    bodies = [request_body(args.series, now + i * 1000) for i in range(args.requests)]
    rows = []
    started = time.perf_counter()
    decode_write_request(bodies[0], "bench")
    cold = time.perf_counter() - started
    started = time.perf_counter()
    for body in bodies[1:]:
        decode_write_request(body, "bench")
    warm = (time.perf_counter() - started) / (len(bodies) - 1)
    rows.append(
        {"path": "decode, series first seen", "ms/request": cold * 1000, "samples/s": args.series / cold}
    )
    rows.append(
        {"path": "decode, series seen before", "ms/request": warm * 1000, "samples/s": args.series / warm}
    )
    agent = Agent.from_properties(AGENT, "b", {})
    agent.start()
    try:
        url = agent.sources["prom"].url  # type: ignore[attr-defined]
        headers = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"}
        with httpx.Client(timeout=30) as client:
            started = time.perf_counter()
            for body in bodies:
                answer = client.post(url, content=body, headers=headers)
                if answer.status_code != 204:
                    raise SystemExit(f"the source answered {answer.status_code}: {answer.text}")
            took = (time.perf_counter() - started) / len(bodies)
    finally:
        agent.stop()
    rows.append(
        {
            "path": "http POST -> 204 (memory channel)",
            "ms/request": took * 1000,
            "samples/s": args.series / took,
        }
    )
    report("remote_write_bench", rows, ["path", "ms/request", "samples/s"])


if __name__ == "__main__":
    main()
