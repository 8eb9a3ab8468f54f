"""What Prometheus's web configuration file costs a request (issue 28): the median latency of
a 1 KB answer on a kept-alive connection from ``BackgroundServer`` plain, with TLS, and with
TLS and basic auth (a password verified once, then remembered), beside a wrong password,
which pays bcrypt (cost 10, Prometheus's documented cost) every time (measured after the
others, whose requests are interleaved, in one run); a throwaway CA made with trustme. Prints a table, writes
results/web_config_bench.json.

Run: python benchmarks/web_config_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import bcrypt
import trustme
import urllib3
from _report import report
from fastapi import FastAPI
from fastapi.responses import Response

from bookkeeper.ground import BackgroundServer, load_web_config

BODY = b"x" * 1000


def app() -> FastAPI:
    api = FastAPI()

    @api.get("/answer")
    def answer() -> Response:
        return Response(BODY, media_type="application/json")

    return api


def web_configs(directory: Path) -> dict[str, Path]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    server = directory / "server.pem"
    tls = f"tls_server_config:\n  cert_file: {server}\n  key_file: {server}\n"
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(10)).decode()
    (directory / "tls.yml").write_text(tls)
    (directory / "auth.yml").write_text(tls + f"basic_auth_users:\n  bench: '{hashed}'\n")
    return {"tls": directory / "tls.yml", "tls+basic auth": directory / "auth.yml"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 requests per case, not 50")
    args = parser.parse_args()
    requests = 10 if args.quick else 50
    with tempfile.TemporaryDirectory() as scratch:
        files = web_configs(Path(scratch))
        servers = {"plain": BackgroundServer(app(), name="bench-plain")}
        for name, path in files.items():
            servers[name] = BackgroundServer(app(), name=f"bench-{name}", web_config=load_web_config(path))
        for server in servers.values():
            server.start()
        ca = os.path.join(scratch, "ca.pem")
        pools = {
            "plain": urllib3.HTTPConnectionPool("127.0.0.1", servers["plain"].port, maxsize=1),
            "tls": urllib3.HTTPSConnectionPool("127.0.0.1", servers["tls"].port, maxsize=1, ca_certs=ca),
        }
        auth_port = servers["tls+basic auth"].port
        pools["tls+basic auth"] = urllib3.HTTPSConnectionPool("127.0.0.1", auth_port, maxsize=1, ca_certs=ca)
        pools["wrong password"] = urllib3.HTTPSConnectionPool("127.0.0.1", auth_port, maxsize=1, ca_certs=ca)
        headers = {
            "tls+basic auth": urllib3.make_headers(basic_auth="bench:s3cret"),
            "wrong password": urllib3.make_headers(basic_auth="bench:guess"),
        }
        expected = {"wrong password": 401}
        times: dict[str, list[float]] = {name: [] for name in pools}
        try:
            # bcrypt's CPU would slow the requests after it: the wrong passwords come last
            for cases in ([c for c in times if c != "wrong password"], ["wrong password"]):
                for _ in range(requests):
                    for name in cases:
                        started = time.perf_counter()
                        answer = pools[name].request("GET", "/answer", headers=headers.get(name))
                        times[name].append(time.perf_counter() - started)
                        if answer.status != expected.get(name, 200):
                            raise RuntimeError(f"{name}: {answer.status}")
        finally:
            for server in servers.values():
                server.stop()
    plain_ms = statistics.median(times["plain"]) * 1e3
    rows: list[dict[str, Any]] = []
    for name, measured in times.items():
        median_ms = statistics.median(measured) * 1e3
        rows.append(
            {"case": name, "median_ms": round(median_ms, 2), "x_plain": round(median_ms / plain_ms, 1)}
        )
    rows.append({"case": "load average (1 min)", "median_ms": round(os.getloadavg()[0], 1)})
    report("web_config_bench", rows, ["case", "median_ms", "x_plain"])


if __name__ == "__main__":
    main()
