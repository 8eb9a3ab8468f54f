"""Latency of one HTTP answer of 1-64 KB on a kept-alive connection: ``BackgroundServer`` (the
query API's, the agent's and VHMS's HTTP server) beside the same uvicorn app on a listening
socket made by ``socket.create_server`` alone, as ``BackgroundServer`` made it before issue 27
(asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and that one's is 0: an
answer longer than one segment then waits for the client's delayed ACK, about 40 ms).
Interleaved requests, medians, in one run. Prints a table, writes results/http_bench.json.

Run: python benchmarks/http_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from typing import Any

import urllib3
import uvicorn
from _report import report
from fastapi import FastAPI
from fastapi.responses import Response

from bookkeeper.ground import BackgroundServer

SIZES = (1_000, 8_000, 57_000)  # 57 KB: the `group_left` answer issue 27 timed


def app() -> FastAPI:
    api = FastAPI()

    @api.get("/answer/{size}")
    def answer(size: int) -> Response:
        return Response(b"x" * size, media_type="application/json")

    return api


def plain_server() -> tuple[uvicorn.Server, int]:
    """The app on a ``socket.create_server`` socket, TCP_NODELAY left as asyncio leaves it
    (asyncio's loop: uvloop, which BackgroundServer now runs on, sets it itself)."""
    server = uvicorn.Server(uvicorn.Config(app(), log_level="warning", loop="asyncio"))
    sock = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    return server, sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 requests per case, not 50")
    args = parser.parse_args()
    requests = 10 if args.quick else 50
    ours = BackgroundServer(app(), "127.0.0.1", 0, name="http-bench")
    ours.start()
    plain, plain_port = plain_server()
    pools = {
        "BackgroundServer": urllib3.HTTPConnectionPool("127.0.0.1", ours.port, maxsize=1),
        "create_server socket": urllib3.HTTPConnectionPool("127.0.0.1", plain_port, maxsize=1),
    }
    times: dict[tuple[str, int], list[float]] = {(name, size): [] for name in pools for size in SIZES}
    try:
        for _ in range(requests):
            for (name, size), measured in times.items():
                started = time.perf_counter()
                body = pools[name].request("GET", f"/answer/{size}").data
                measured.append(time.perf_counter() - started)
                if len(body) != size:
                    raise RuntimeError(f"{name}: {len(body)} bytes for {size}")
    finally:
        ours.stop()
        plain.should_exit = True
    rows: list[dict[str, Any]] = []
    for size in SIZES:
        ours_ms = statistics.median(times[("BackgroundServer", size)]) * 1e3
        plain_ms = statistics.median(times[("create_server socket", size)]) * 1e3
        rows.append(
            {
                "answer_bytes": size,
                "BackgroundServer_ms": round(ours_ms, 2),
                "create_server_ms": round(plain_ms, 2),
                "speed_up": round(plain_ms / ours_ms, 1),
            }
        )
    report("http_bench", rows, ["answer_bytes", "BackgroundServer_ms", "create_server_ms", "speed_up"])


if __name__ == "__main__":
    main()
